// The bounded TF32 search's candidates without the distance matrix.
//
// The unfused path writes each block of queries' TF32 distances to every
// vector (rows x nb floats: 8.6 GB for 2,147 queries of 1M) and reads them
// back in the sampled-threshold filter; on an H200 at 1M x 128 those two
// passes over memory, not the tensor cores, set its pace (0.48x of the TF32
// GEMM floor). Here one kernel multiplies 128 x 128 tiles of queries and
// vectors on the tensor cores (mma.sync m16n8k8 TF32, FP32 accumulation) and
// compares each product, in registers, with its query's threshold; only the
// keys at or below it leave the chip. The thresholds come first, from the
// products of every query with a sample of the vectors shared by all queries
// (a small cuBLAS TF32 GEMM), as select/SampledThresholdSelect.h does from a
// sample of each row; that file also settles the rows (the m smallest kept
// keys, sorted, or the row flagged).
//
// The results are the keys sampledThresholdSelectKeys would give on the
// same products: the bound of Tf32ErrorBound.h holds for any order of the
// FP32 accumulation and for inputs truncated to TF32 (what mma.sync does
// with FP32 bits), so the certificate of BoundedFlatSearch.cu is unchanged.
// A threshold that keeps fewer than m keys or more than the buffer holds
// flags the row (its query is not certified: it falls back).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// Whether the fused candidates serve queries against nb vectors of d
/// dimensions with m candidates each: the sampled-threshold keys path
/// applies to (nb, m), d is a multiple of 4 (16-byte rows for cp.async),
/// both pointers are 16-byte aligned, and fusedTf32CandidatesEnabled().
bool fusedTf32CandidatesApply(int64_t nb, int64_t m, int d, const float* queries,
                              const float* vectors);

/// Most query rows of one call.
int64_t fusedTf32CandidatesMaxRows();

/// Scratch bytes of one call of `rows` rows (the shared sample's vectors and
/// products, the thresholds and candidate buffers).
size_t fusedTf32CandidatesScratchBytes(int64_t rows, int64_t nb, int64_t m, int d);

/// Per row of queries, the m smallest keys select::makeKey(alpha q.x_j +
/// (colAdd ? colAdd[j] : 0), j) over the nb vectors x_j, sorted, to outKeys
/// (rows x m), the products computed on the tensor cores in TF32; a row the
/// threshold could not settle gets needsFallback[r] = 1 and kMaxKey keys.
/// queries rows x d, vectors nb x d, colAdd nb floats or null: device
/// pointers; `blas` runs on `stream`. Ordered on `stream`, no host
/// synchronisation. Requires fusedTf32CandidatesApply and
/// 1 <= rows <= fusedTf32CandidatesMaxRows().
void fusedTf32Candidates(cublasHandle_t blas, const float* queries, int64_t rows,
                         const float* vectors, int64_t nb, int d, float alpha,
                         const float* colAdd, int64_t m, uint64_t* outKeys,
                         uint8_t* needsFallback, void* scratch, size_t scratchBytes,
                         cudaStream_t stream);

/// Testing and benchmarking hook (process-wide, default on): off, the
/// bounded search writes the distance tiles and filters them as before, so
/// that both can be compared on the same index.
void setFusedTf32CandidatesEnabled(bool enabled);
bool fusedTf32CandidatesEnabled();

/// Query rows fusedTf32Candidates has taken since the process started (so
/// that tests can tell the fused path ran).
int64_t fusedTf32CandidatesRows();

}  // namespace gpu
}  // namespace faiss_ext
