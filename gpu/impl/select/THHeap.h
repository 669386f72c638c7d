// GPU side of Matsumoto & Yiu's TH-heap (ICDM 2015; docs/references.md):
// a per-row threshold from the k-th smallest of a sample of the row, and
// the compaction of the entries at or below it into CSR rows of keys that
// go to the host, where min-max heaps finish the selection
// (faiss_ext/MinMaxHeap.h). All pointers are device pointers unless said.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace faiss_ext {
namespace gpu {
namespace select {

/// Bytes of scratch thSampleThresholds needs.
size_t thSampleScratchBytes(int64_t rows, int64_t nS, int64_t k);

/// thresholds[r] = ordered distance bits of the k-th smallest of nS entries
/// of row r (value dist[r * ld + j] + colAdd[j]) at distinct positions
/// spread over [0, n) (one per stride n / nS, offset by a hash of `seed`).
/// Every row then holds at least k entries whose bits are <= its threshold.
/// Requires 1 <= k <= nS <= n.
void thSampleThresholds(const float* dist, int64_t ld, const float* colAdd, int64_t rows,
                        int64_t n, int64_t k, int64_t nS, uint32_t seed, uint32_t* thresholds,
                        void* scratch, size_t scratchBytes, cudaStream_t stream);

/// counts[r] = number of entries of row r with ordered bits <= thresholds[r].
void thCountRows(const float* dist, int64_t ld, const float* colAdd, int64_t rows, int64_t n,
                 const uint32_t* thresholds, unsigned long long* counts, cudaStream_t stream);

/// For rows [r0, r1): writes the keys (bits << 32 | colBase + j) of the
/// entries within threshold to out[offsets[r] - offsets[r0] ...] (offsets:
/// device, indexed by absolute row, offsets[r + 1] - offsets[r] = count of
/// row r), in no particular order within a row. cursor: r1 - r0 counters
/// of scratch.
void thCompactRows(const float* dist, int64_t ld, const float* colAdd, uint32_t colBase,
                   int64_t r0, int64_t r1, int64_t n, const uint32_t* thresholds,
                   const int64_t* offsets, uint64_t* out, unsigned long long* cursor,
                   cudaStream_t stream);

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
