// The bounded search's candidates without the distance matrix.
//
// The unfused path writes each block of queries' approximate distances to
// every vector (rows x nb floats: 8.6 GB for 2,147 queries of 1M) and reads
// them back in the sampled-threshold filter; on an H200 at 1M x 128 those two
// passes over memory, not the tensor cores, set its pace (0.46x of the TF32
// GEMM floor). Here one kernel multiplies 128 x 128 tiles of queries and
// vectors on the tensor cores and compares each product, in registers, with
// its query's threshold; only the keys at or below it leave the chip. The
// products are those of either bounded precision:
//   - TF32: FP32 rows, mma.sync m16n8k8 TF32 (inputs truncated to TF32,
//     FP32 accumulation);
//   - BF16x3: the split rows of SplitBf16.h (queries [hi | lo | hi], vectors
//     [lo | hi | hi], 3 dPad BF16 each), mma.sync m16n8k16 BF16 with FP32
//     accumulation: one product over 3 dPad terms, as the unfused path's
//     GEMM.
// The thresholds come first, from the products of every query with a sample
// of the vectors shared by all queries (a small cuBLAS GEMM of the same
// precision), as select/SampledThresholdSelect.h does from a sample of each
// row; that file also settles the rows (the m smallest kept keys, sorted, or
// the row flagged). The shared sample is four times the per-row one
// (sharedSampleThresholdPlan: 16,384 vectors from 262,144 on), so that a
// query keeps about a quarter as many products at 10M.
//
// The bounds of Tf32ErrorBound.h hold for any order of the FP32 accumulation
// and for TF32 inputs truncated (what mma.sync does with FP32 bits), so the
// certificate of BoundedFlatSearch.cu is unchanged. A threshold that keeps
// fewer than m keys or more than the buffer holds flags the row (its query
// is not certified: it falls back).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>

#include "faiss_ext/gpu/impl/flat/Distance.h"

namespace faiss_ext {
namespace gpu {

/// What a fused search multiplies (device pointers).
struct FusedOperands {
    /// false: FP32 rows of d floats, TF32 products; true: BF16x3 split rows
    /// of 3 d BF16 (d = the split's padded dimension, a multiple of 8).
    bool bf16x3 = false;
    const void* queries = nullptr;  ///< rows x (d floats, or 3 d BF16)
    const void* vectors = nullptr;  ///< nb x (d floats, or 3 d BF16)
    int d = 0;
};

/// A residual corpus's terms (ResidualCorpus.h; device pointers): the
/// vectors are residual rows in tiles of one partition each, and every key
/// of query r against tile t is lowered by 2 centreDots[r][tilePartition[t]]
/// + a1 rho + a2 lambda + b ({a1, a2, b} = rowBoundCoefs[r], {rho, lambda}
/// = tileRadii[t]; ResidualBound.h says why), threshold samples included.
struct FusedResidualTerms {
    const float* centreDots = nullptr;  ///< rows x centreDotsLd
    int64_t centreDotsLd = 0;
    const float4* rowBoundCoefs = nullptr;   ///< rows
    const int32_t* tilePartition = nullptr;  ///< nb / 128 tiles
    const float2* tileRadii = nullptr;       ///< nb / 128 tiles
};

/// Whether the fused candidates serve these operands against nb vectors
/// with m candidates per query: the sampled-threshold keys path applies to
/// (nb, m), rows are whole 16-byte chunks (TF32: d a multiple of 4; BF16x3:
/// d a multiple of 8), both pointers are 16-byte aligned, and
/// fusedCandidatesEnabled().
bool fusedCandidatesApply(int64_t nb, int64_t m, const FusedOperands& ops);

/// Most query rows of one call.
int64_t fusedCandidatesMaxRows();

/// Scratch bytes of one call of `rows` rows (the shared sample's rows and
/// products, the thresholds and candidate buffers).
size_t fusedCandidatesScratchBytes(int64_t rows, int64_t nb, int64_t m, const FusedOperands& ops);

/// Per query row, the m smallest keys select::makeKey(alpha p_j + (colAdd ?
/// colAdd[j] : 0), j) over the nb vectors, p_j the approximate product of
/// the query with vector j, sorted, to outKeys (rows x m); a row the
/// threshold could not settle gets needsFallback[r] = 1 and kMaxKey keys.
/// colAdd: nb floats or null (device); `blas` runs on `stream`. Ordered on
/// `stream`, no host synchronisation. Requires fusedCandidatesApply and
/// 1 <= rows <= fusedCandidatesMaxRows().
void fusedCandidates(cublasHandle_t blas, const FusedOperands& ops, int64_t rows, int64_t nb,
                     float alpha, const float* colAdd, int64_t m, uint64_t* outKeys,
                     uint8_t* needsFallback, void* scratch, size_t scratchBytes,
                     cudaStream_t stream, const FusedResidualTerms* residual = nullptr);

/// Testing and benchmarking hook (process-wide, default on): off, the
/// bounded search writes the distance tiles and filters them as before, so
/// that both can be compared on the same index.
void setFusedCandidatesEnabled(bool enabled);
bool fusedCandidatesEnabled();

/// Testing and benchmarking hook (process-wide, default on): off, the
/// mma.sync kernel multiplies the tiles on Hopper too, instead of the
/// warpgroup kernel of FusedCandidatesWgmma.h.
void setFusedWgmmaEnabled(bool enabled);

/// Query rows fusedCandidates has taken since the process started, TF32 and
/// BF16x3, and of those the rows the warpgroup kernel multiplied (so that
/// tests can tell which path ran).
struct FusedCandidateRows {
    int64_t tf32 = 0;
    int64_t bf16x3 = 0;
    int64_t wgmma = 0;
};
FusedCandidateRows fusedCandidateRows();

}  // namespace gpu
}  // namespace faiss_ext
