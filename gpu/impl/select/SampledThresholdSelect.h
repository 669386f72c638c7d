// Sampled-threshold k-selection: the k smallest keys of each row of a float
// matrix in one read of the matrix, for rows much longer than k (selectK's
// Auto path for device matrices, GpuSelect.cpp). Per row:
//   1. a sample of the row (runs of 8 consecutive floats, one 32-byte sector
//      each, at stratified random positions) gives a threshold key T: a key
//      with exactly r sampled keys at or below it, r chosen so that the row
//      very likely holds at least k keys <= T and not many more;
//   2. one pass over the whole row, many blocks per row, appends every key
//      <= T to the row's candidate buffer (each block gathers its keys in
//      shared memory, then claims room with one atomic on the row's counter);
//   3. the row's last block to finish finds the k-th smallest candidate by a
//      radix select, keeps the k keys at or below it, sorts and decodes them.
// A row whose buffer overflowed, or that kept fewer than k keys (an unlucky
// sample, or a row laid out against the sample positions), or whose
// threshold is NaN (a row of almost only NaN) is flagged; the caller redoes
// flagged rows by another selection, so results never depend on the sample.
//
// The threshold from a sample is the idea of Matsumoto & Yiu's TH-heap
// (T. Matsumoto, M. L. Yiu, "Accelerating Exact Similarity Search on CPU-GPU
// Systems", ICDM 2015, doi:10.1109/ICDM.2015.125); the one-pass filter into a
// per-row candidate buffer follows AIR Top-K (Zhang et al., "Parallel Top-K
// Algorithms on GPU: A Comprehensive Study and New Methods", SC 2023,
// doi:10.1145/3581784.3607062).
//
// Keys are select::makeKey(value, column) (SelectKeys.cuh): ties go to the
// smaller column and NaN comes last; for the largest entries the value is
// negated as it is read, so the results equal those of the other selections
// exactly (same values, same ids, same order).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace select {

/// Largest k the sampled-threshold path selects.
constexpr int64_t kSampledThresholdMaxK = 2048;

/// Shortest rows it takes (shorter rows are cheap for the other paths).
constexpr int64_t kSampledThresholdMinN = 16384;

/// It takes rows of at least this many times k entries, so that the
/// threshold discards nearly all of the row.
constexpr int64_t kSampledThresholdMinNOverK = 64;

/// Most rows of one call (the filter's grid has a row per y).
constexpr int64_t kSampledThresholdMaxRows = 65535;

/// Whether rows of n entries with k wanted are in the path's range:
/// 1 <= k <= kSampledThresholdMaxK, n >= kSampledThresholdMinN,
/// n >= kSampledThresholdMinNOverK * k, n <= 2^32 - 1.
bool sampledThresholdApplies(int64_t n, int64_t k);

/// The keys entry point (sampledThresholdSelectKeys, for the flat search's
/// full-row distance tiles) sorts up to this many keys per row ...
constexpr int64_t kSampledThresholdKeysMaxK = 4096;

/// ... from rows of at least this many times k entries: the candidate
/// buffer then holds at most about a sixth of a row.
constexpr int64_t kSampledThresholdKeysMinNOverK = 16;

/// Whether sampledThresholdSelectKeys takes rows of n entries with k wanted:
/// 1 <= k <= kSampledThresholdKeysMaxK, n >= kSampledThresholdMinN,
/// n >= kSampledThresholdKeysMinNOverK * k, n <= 2^32 - 1.
bool sampledThresholdKeysApply(int64_t n, int64_t k);

/// The per-row constants of the path for rows of n entries, k wanted.
struct SampledThresholdPlan {
    /// Sampled entries per row: a power of two in [1024, 4096], at most n / 16
    /// where n allows (runs of 8 consecutive entries).
    int64_t samples = 0;
    /// The threshold has exactly `rank` sampled keys at or below it:
    /// ceil(mu + 4 sqrt(mu) + 4) with mu = k * samples / n, the expected
    /// number of samples among the row's k smallest.
    int64_t rank = 0;
    /// Candidate buffer per row (keys): the power of two at or above
    /// (2 rank + 12) n / samples, about twice the expected survivors.
    int64_t capacity = 0;
};

/// The plan for rows of n entries, k wanted (sampledThresholdApplies(n, k)
/// or sampledThresholdKeysApply(n, k)).
SampledThresholdPlan sampledThresholdPlan(int64_t n, int64_t k);

/// Entries per sample run: one 32-byte sector of floats.
constexpr int64_t kSampledThresholdRunLength = 8;

/// First entry of sample run i (0 <= i < runs, runs = samples / 8) of a row
/// of n entries that is row `row` of its call: in stratum i (n / runs >= 128
/// entries) at an offset hashed from (row, i) by splitmix64's finaliser,
/// aligned down to a multiple of 8 (a sector where the row is aligned).
/// Host and device, so that tests can rebuild the sample.
__host__ __device__ inline int64_t sampledThresholdRunStart(int64_t row, int64_t i, int64_t n,
                                                            int64_t runs) {
    const int64_t stratum = n / runs;
    uint64_t z = ((uint64_t(row) << 32) | uint64_t(uint32_t(i))) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const int64_t offset = int64_t(z % uint64_t(stratum - kSampledThresholdRunLength + 1));
    return (i * stratum + offset) & ~(kSampledThresholdRunLength - 1);
}

/// Bytes of device scratch sampledThresholdSelect needs for `rows` rows.
size_t sampledThresholdScratchBytes(int64_t rows, int64_t n, int64_t k);

/// The k smallest entries of each of `rows` rows of the row-major rows x n
/// float matrix `values` (largest = true: the k largest), sorted (ascending,
/// respectively descending), ties to the smaller column, NaN last:
/// outValues / outIndices (rows x k; either may be null) receive them as
/// decodeKeys writes them (KeyDecode::Identity, or Negated for largest), ids
/// being column numbers. needsFallback[r] (rows bytes) is set to 1 for a row
/// the path could not settle (its outputs then hold placeholders: NaN
/// values, ids 2^32 - 1) and to 0 otherwise; redo flagged rows by another
/// selection before using their ids. All pointers are device pointers on
/// the current device; requires sampledThresholdApplies(n, k) and
/// 1 <= rows <= kSampledThresholdMaxRows; scratch: sampledThresholdScratchBytes(rows, n, k)
/// bytes. Ordered on `stream`, no host synchronisation.
void sampledThresholdSelect(const float* values, int64_t rows, int64_t n, int64_t k, bool largest,
                            float* outValues, int64_t* outIndices, uint8_t* needsFallback,
                            void* scratch, size_t scratchBytes, cudaStream_t stream);

/// The keys form, for callers that decode themselves (the flat search's
/// full-row tiles): the kk = k smallest keys select::makeKey(dist[r * ld +
/// j] + (colAdd ? colAdd[j] : 0), j) of each of `rows` rows of w = n
/// columns, sorted ascending, to outKeys (rows x k); the same keys, in the
/// same order, as radixSelectRows followed by a sort (colBase 0). A flagged
/// row (needsFallback[r] = 1) gets kMaxKey in every slot: the caller must
/// select it again (or, in the bounded TF32 search, not certify it).
/// Requires sampledThresholdKeysApply(n, k), ld >= n, 1 <= rows <= kSampledThresholdMaxRows;
/// device pointers; scratch: sampledThresholdScratchBytes(rows, n, k).
/// Ordered on `stream`, no host synchronisation.
void sampledThresholdSelectKeys(const float* dist, int64_t ld, const float* colAdd, int64_t rows,
                                int64_t n, int64_t k, uint64_t* outKeys, uint8_t* needsFallback,
                                void* scratch, size_t scratchBytes, cudaStream_t stream);

/// Its parts, for a caller that filters in its own kernel (the fused TF32
/// GEMM and filter of the bounded flat search, flat/FusedCandidates.h):
/// the thresholds come from a sample of columns shared by every row, the
/// filter is the caller's, the settle of the rows is this path's.
struct SampledThresholdRowBuffers {
    const uint64_t* thresholds = nullptr;  ///< per row, the key T (a NaN value: redo the row)
    unsigned* counts = nullptr;            ///< per row, keys appended (may exceed capacity)
    uint64_t* candidates = nullptr;        ///< row r's keys at r * capacity
    int64_t capacity = 0;
};

/// Largest sample shared by every row.
constexpr int64_t kSharedSampleMaxSamples = 16384;

/// The plan of the shared-sample entry points below: sampledThresholdPlan's
/// rank and capacity rules over a sample of kSharedSampleMaxSamples entries
/// (16,384 from n = 262,144 on; below, the largest power of two with n >= 16
/// samples, down to 1,024). One sample serves every row, so a larger one
/// costs a GEMM of rows x samples products and a threshold kernel that reads
/// them, and keeps fewer candidates a row: at n = 10M and k = 42 the rank-5
/// key of 4,096 samples passes about 12,000 products, the rank-6 key of
/// 16,384 about 3,700. Forced to 4,096 it equals sampledThresholdPlan(n, k).
SampledThresholdPlan sharedSampleThresholdPlan(int64_t n, int64_t k);

/// Bytes of device scratch of the shared-sample entry points for `rows` rows.
size_t sharedSampleThresholdScratchBytes(int64_t rows, int64_t n, int64_t k);

/// Benchmark and test hook: force the shared sample's size (a power of two
/// in [1024, kSharedSampleMaxSamples], still halved where n < 16 samples),
/// or 0 for the default above; throws otherwise. Process-wide; set it between
/// searches (a search sizes its scratch by the plan when it starts, and a
/// call whose scratch no longer fits the plan is refused).
void setSharedSampleSize(int64_t samples);
int64_t sharedSampleSizeForced();

/// The buffers in `scratch` (sharedSampleThresholdScratchBytes(rows, n, k)
/// bytes) for rows of n entries, k wanted (sampledThresholdKeysApply(n, k)).
SampledThresholdRowBuffers sampledThresholdRowBuffers(void* scratch, size_t scratchBytes,
                                                      int64_t rows, int64_t n, int64_t k);

/// Column of sample entry s (0 <= s < sharedSampleThresholdPlan(n, k).samples)
/// of the sample shared by every row: the runs of row 0's sample.
__host__ __device__ inline int64_t sampledThresholdSharedColumn(int64_t s, int64_t n,
                                                                int64_t samples) {
    const int64_t runs = samples / kSampledThresholdRunLength;
    return sampledThresholdRunStart(0, s / kSampledThresholdRunLength, n, runs) +
           s % kSampledThresholdRunLength;
}

/// Thresholds from the shared sample: sampleValues (rows x samples, the
/// entries of the columns sampledThresholdSharedColumn in that order) plus
/// sampleColAdd (samples floats, or null), samples =
/// sharedSampleThresholdPlan(n, k).samples; each row's T has exactly that
/// plan's rank sampled keys at or below it (the low half of T numbers the
/// sample entry, not the column: any T between the rank-r and rank-(r+1)
/// keys serves the filter). Zeroes the counts. Ordered on `stream`.
void sampledThresholdFromSharedSample(const float* sampleValues, const float* sampleColAdd,
                                      int64_t rows, int64_t n, int64_t k, void* scratch,
                                      size_t scratchBytes, cudaStream_t stream);

/// Settles every row once the caller's filter has appended its keys <= T:
/// outKeys and needsFallback as sampledThresholdSelectKeys writes them.
/// Ordered on `stream`.
void sampledThresholdSettleKeys(int64_t rows, int64_t n, int64_t k, uint64_t* outKeys,
                                uint8_t* needsFallback, void* scratch, size_t scratchBytes,
                                cudaStream_t stream);

/// Process-wide counters of selectK's use of the path (a testing and
/// benchmarking hook, like setAllocFailureInjection): rows it selected and
/// rows it flagged for the fallback since the process started.
struct SampledThresholdCounters {
    int64_t rows = 0;
    int64_t fallbackRows = 0;
};

/// The counters so far (thread-safe).
SampledThresholdCounters sampledThresholdCounters();

/// After a selection of `rows` rows: copies their flags (device) into
/// `host`, waits for `stream`, adds the rows and the flagged ones to the
/// counters (thread-safe) and returns how many are flagged. The one wait of
/// every caller of the path (selectK, the radix large-k path).
int64_t fetchSampledThresholdFlags(const uint8_t* flags, int64_t rows, std::vector<uint8_t>& host,
                                   cudaStream_t stream);

}  // namespace select
}  // namespace gpu
}  // namespace faiss_ext
