// The sampled nodes nearest to each query (NearestEntryPoints.cu): where
// the beam search starts (EntrySample.h).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace graph {

/// Largest number of entry points per query nearestEntryPoints finds (one
/// warp's registers; more go through the exact engine).
constexpr int kMaxNearestEntrySeeds = 32;

/// Row stride (floats) of nearestEntryPoints' scratch for `count` entry points.
int64_t entryDotsLd(int count);

/// Rows the product GEMM of nq queries runs on: nq rounded up to a power of
/// two below kEntryGemmRowStep, else to a multiple of it. The GEMM is tuned
/// once per shape (GemmTuner: timed candidates and a verification), so the
/// shapes a stream of batches of any size makes must be few; the padding
/// rows cost products only.
int64_t entryGemmRows(int64_t nq);
constexpr int64_t kEntryGemmRowStep = 256;

/// For each of nq queries q (gemmRows x d, device, gemmRows =
/// entryGemmRows(nq) rows, those past nq finite and ignored; centred like
/// the sample for L2), the perQuery (1..kMaxNearestEntrySeeds) entry points nearest to it:
/// out[i * perQuery + j] = a position in the sample, nearest first (-1 past
/// the sample's size). entries: the sample's rows (count x d, device, centred
/// on one point: translation changes no L2 distance, and inner products by
/// a constant per query, while TF32 errors scale with the norms); sqNorms:
/// their |x|^2 for L2, null for inner products; dots: gemmRows x
/// entryDotsLd(count) device scratch. TF32 products (CUBLAS via blas, bound
/// to `stream`) and a warp per query: approximate by design, as seeds need
/// only be near. Allocates nothing.
void nearestEntryPoints(cublasHandle_t blas, cudaStream_t stream, const float* entries,
                        const float* sqNorms, int count, int d, const float* q, int64_t nq,
                        int64_t gemmRows, int perQuery, float* dots, int64_t* out);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
