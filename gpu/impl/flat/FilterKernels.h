// Device steps of a filtered flat search (FlatStorage::search with
// FlatSearchOptions::filter): the selected vectors gathered into a smaller
// corpus, labels mapped back, and, where gathering does not fit, distance
// tiles masked so that excluded vectors are never selected.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// dst row j = src row ids[j] (n rows of d floats; device pointers), and
/// dstNorms[j] = srcNorms[ids[j]] when both are given.
void gatherSelectedRows(const float* src, const float* srcNorms, const uint32_t* ids, int64_t n,
                        int d, float* dst, float* dstNorms, cudaStream_t stream);

/// labels[i] = ids[labels[i]] for the n labels that are >= 0 (-1 padding stays).
void mapSelectedLabels(int64_t* labels, int64_t n, const uint32_t* ids, cudaStream_t stream);

/// labels[i] += offset for the n labels that are >= 0.
void offsetLabels(int64_t* labels, int64_t n, int64_t offset, cudaStream_t stream);

/// Sets tile entries (rows x cols, leading dimension ld) of excluded columns
/// to NaN: column j is vector col0 + j, kept where bit (col0 + j) of `bits`
/// is set. NaN sorts after every distance (select/SelectKeys.cuh), so the
/// selection takes an excluded vector only when fewer than k are kept.
void maskExcludedColumns(float* dist, int64_t ld, int64_t rows, int64_t cols, int64_t col0,
                         const uint32_t* bits, cudaStream_t stream);

/// Results of a masked search: entries whose distance decoded as NaN (an
/// excluded vector, taken because fewer than k were kept) become padding,
/// label -1 and distance +inf, or -inf for similarities.
void padExcludedResults(float* distances, int64_t* labels, int64_t n, bool similarity,
                        cudaStream_t stream);

}  // namespace gpu
}  // namespace faiss_ext
