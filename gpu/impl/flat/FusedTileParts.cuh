// What the fused candidate kernels share (FusedCandidates.cu: mma.sync on
// any GPU since sm_80; FusedCandidatesWgmma.cu: Hopper's warpgroup products):
// the arguments, the staged layout of a 128 x 128 tile in shared memory, the
// copier that fills it by cp.async, and the append of a kept product.
#pragma once

#include <cstdint>

#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"

namespace faiss_ext {
namespace gpu {
namespace fused {

constexpr int kTileRows = 128;  ///< queries of a block tile
constexpr int kTileCols = 128;  ///< vectors of a block tile
constexpr int kStepDims = 32;   ///< dimensions of a pipeline stage (8 chunks of 16 bytes a row)
constexpr int kStageRows = kTileRows + kTileCols;  ///< queries, then vectors
constexpr int kStageFloats = kStageRows * kStepDims;

/// Query tiles that walk the vectors together (blocks in flight then share
/// each vector tile through L2: the vectors are read from memory about
/// rows / (kGroupQueryTiles x 128) times, not rows / 128 times).
constexpr int64_t kGroupQueryTiles = 16;

/// The kernel sees rows as 32-bit words (FP32 values, or pairs of BF16):
/// it only copies them and hands them to the tensor cores, whose product
/// instruction says how to read them.
struct FusedArgs {
    const float* queries;  ///< rows x d words
    int64_t rows;
    const float* vectors;  ///< nb x d words
    int64_t nb;
    int d;  ///< words a row (a multiple of 4: whole 16-byte chunks)
    float alpha;
    const float* colAdd;  ///< nb, or null
    const uint64_t* thresholds;
    unsigned* counts;
    uint64_t* candidates;
    int64_t capacity;
    int64_t queryTiles;
    int64_t vectorTiles;
    /// A residual corpus's terms (ResidualCorpus.h, FusedResidualTerms),
    /// else null: residualTileOffset lowers every product of a (query,
    /// tile) pair by one term before the threshold test.
    const float* centreDots;  ///< rows x centreDotsLd: the queries' products with the centres
    int64_t centreDotsLd;
    const float4* rowBoundCoefs;   ///< rows: {a1, a2, b, unused}
    const int32_t* tilePartition;  ///< vector tiles: the centre of each
    const float2* tileRadii;       ///< vector tiles: {rho, lambda}
};

/// The term a residual corpus subtracts from the keys of query `row` against
/// the vector tile starting at v0 (0 past the last row; called only with a
/// residual corpus: the kResidual kernels and the residual sample): 2 q~.c_p,
/// the query's product with the tile's centre, plus the bound of the key's error,
/// a1 rho + a2 lambda + b (ResidualBound.h), so that the key left is a lower
/// bound of the query's distance to each vector of the tile.
/// Its bound part, a1 rho + a2 lambda + b ({a1, a2, b} = c.xyz, {rho,
/// lambda} = radii), and the whole term: the same roundings in the same
/// order wherever it is computed (the certificate's margin counts them).
__device__ __forceinline__ float residualBoundTerm(float4 c, float2 radii) {
    return fmaf(c.x, radii.x, fmaf(c.y, radii.y, c.z));
}

__device__ __forceinline__ float residualOffset(float dot, float4 c, float2 radii) {
    return fmaf(2.f, dot, residualBoundTerm(c, radii));
}

__device__ __forceinline__ float residualTileOffset(const FusedArgs& a, int64_t row, int64_t v0) {
    if (row >= a.rows) return 0.f;
    const int64_t tile = v0 / kTileCols;
    const int p = __ldg(a.tilePartition + tile);
    return residualOffset(__ldg(a.centreDots + row * a.centreDotsLd + p),
                          __ldg(a.rowBoundCoefs + row), __ldg(a.tileRadii + tile));
}

/// Float offset of (row, dim) in a stage. Rows are 32 floats (128 bytes),
/// unpadded; the 16-byte chunk of a dimension is XORed with the row's low 3
/// bits, so that the 8 rows an ldmatrix phase reads (16 bytes each, the
/// same chunk) fall on 32 different banks. This is also the layout Hopper's
/// warpgroup products read as "128-byte swizzled, K-major" (8-row atoms of
/// 1,024 bytes) when a stage starts at a multiple of 1,024 bytes.
__device__ __forceinline__ int stageOffset(int row, int dim) {
    return row * kStepDims + (((dim >> 2) ^ (row & 7)) << 2) + (dim & 3);
}

/// The tile (q0, v0) of block `block`: kGroupQueryTiles query tiles sweep
/// the vector tiles together, block ids running along the group's query
/// tiles first. (32-bit divisions: the grid holds fewer than 2^31 blocks.)
__device__ __forceinline__ void blockTile(const FusedArgs& a, unsigned block, int64_t& q0,
                                          int64_t& v0) {
    const unsigned perGroup = unsigned(kGroupQueryTiles * a.vectorTiles);
    const unsigned group = block / perGroup;
    const unsigned firstTile = group * unsigned(kGroupQueryTiles);
    const unsigned tilesInGroup =
        min(unsigned(kGroupQueryTiles), unsigned(a.queryTiles) - firstTile);
    const unsigned within = block - group * perGroup;
    q0 = int64_t(firstTile + within % tilesInGroup) * kTileRows;
    v0 = int64_t(within / tilesInGroup) * kTileCols;
}

/// 16 bytes global -> shared, asynchronously; zeros where !valid (src-size
/// 0: nothing is read, `src` need only be a valid address).
__device__ __forceinline__ void copy16(unsigned dst, const float* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::); }

template <int kPending>
__device__ __forceinline__ void waitCopies() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

/// What a thread of kThreads copies each stage: chunk `chunk` of rows r0,
/// r0 + kRowStep, ... of the stage (its first half queries, its second half
/// vectors), from pointers that advance by kStepDims words a stage.
template <int kThreads>
struct StageCopier {
    static constexpr int kChunksPerRow = kStepDims / 4;
    static constexpr int kRowStep = kThreads / kChunksPerRow;  ///< rows between a thread's copies
    static constexpr int kCopies = kStageRows / kRowStep;      ///< 16-byte copies a stage
    static_assert(kTileRows % kRowStep == 0 && kRowStep % 8 == 0,
                  "a thread's copies split into queries and vectors, one swizzle");

    const float* src[2];  ///< the first query row's and the first vector row's chunk
    int64_t rowStep;      ///< words between a thread's consecutive rows (kRowStep d)
    unsigned rowValid;    ///< bit i: row r0 + kRowStep i exists
    int dstOffset;        ///< stageOffset(r0, 4 chunk)
    int dim;              ///< the chunk's first dimension (of stage 0)

    __device__ StageCopier(const FusedArgs& a, int64_t q0, int64_t v0) {
        const int r0 = threadIdx.x / kChunksPerRow;
        const int chunk = threadIdx.x % kChunksPerRow;
        dim = chunk * 4;
        rowStep = int64_t(kRowStep) * a.d;
        rowValid = 0;
#pragma unroll
        for (int i = 0; i < kCopies; ++i) {
            const int r = r0 + i * kRowStep;
            const bool ok = r < kTileRows ? q0 + r < a.rows : v0 + (r - kTileRows) < a.nb;
            rowValid |= unsigned(ok) << i;
        }
        src[0] = a.queries + (q0 + r0) * a.d + dim;
        src[1] = a.vectors + (v0 + r0) * a.d + dim;
        dstOffset = stageOffset(r0, dim);
    }

    /// Stage `s`'s copies into `stage` (zeros past d and past the rows).
    __device__ __forceinline__ void issue(float* stage, int s, int d, const FusedArgs& a) const {
        const int k0 = s * kStepDims;
        const bool dimOk = k0 + dim < d;
        const unsigned base = unsigned(__cvta_generic_to_shared(stage + dstOffset));
        constexpr int kHalf = kCopies / 2;
#pragma unroll
        for (int i = 0; i < kCopies; ++i) {
            const int side = i < kHalf ? 0 : 1;
            const bool valid = dimOk && ((rowValid >> i) & 1u);
            const float* p = src[side] + (i % kHalf) * rowStep + k0;
            // (rows r0 + kRowStep i share r0's swizzle: kRowStep is a multiple of 8)
            copy16(base + unsigned(sizeof(float) * i * kRowStep * kStepDims), valid ? p : a.queries,
                   valid);
        }
    }
};

/// The stage pipeline of a block that multiplies one tile: kStages stages
/// of kStepDims words of its queries and vectors in flight. multiply(buffer,
/// s) multiplies step s from stage buffer `buffer` once every thread's
/// copies of it have landed and every thread is past step s - 1, whose
/// buffer the copies of step s + kStages - 1 then refill (so multiply must
/// be done reading its buffer when it returns). kAsyncProxy: the products
/// read shared memory through the async proxy (wgmma), so the copies
/// (generic proxy) are fenced for it before the barrier.
template <int kStages, bool kAsyncProxy, int kThreads, class Multiply>
__device__ __forceinline__ void runTileStages(const FusedArgs& a,
                                              const StageCopier<kThreads>& copier, float* stages,
                                              Multiply&& multiply) {
    const int steps = (a.d + kStepDims - 1) / kStepDims;
    // Groups committed before step s: kStages - 1 + s (empty ones included),
    // so waiting for all but kStages - 2 leaves stage s complete.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < steps) copier.issue(stages + s * kStageFloats, s, a.d, a);
        commitCopies();
    }
    for (int s = 0; s < steps; ++s) {
        waitCopies<kStages - 2>();
        if constexpr (kAsyncProxy) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();  // stage s visible to all; stage s - 1 no longer read
        const int next = s + kStages - 1;
        if (next < steps) copier.issue(stages + (next % kStages) * kStageFloats, next, a.d, a);
        commitCopies();
        multiply(s % kStages, s);
    }
}

/// Appends one product at or below its query's threshold key (ties in
/// value go to the smaller column).
__device__ __forceinline__ void keepIfBelow(const FusedArgs& a, int64_t row, int64_t col, float v,
                                            uint64_t threshold) {
    const uint32_t ob = select::orderedFloatBits(v);
    if (col >= a.nb ||
        !select::keyAtMost(ob, uint32_t(col), uint32_t(threshold >> 32), uint32_t(threshold))) {
        return;
    }
    const unsigned pos = atomicAdd(a.counts + row, 1u);
    if (int64_t(pos) < a.capacity) {
        a.candidates[row * a.capacity + pos] = (uint64_t(ob) << 32) | uint64_t(col);
    }
}

/// The threshold's value of query `row` (NaN where the row is out of range
/// or to be redone: nothing passes a NaN).
__device__ __forceinline__ float thresholdValue(const FusedArgs& a, int64_t row) {
    const uint64_t threshold = row < a.rows ? __ldg(a.thresholds + row) : select::kMaxKey;
    return select::floatFromOrderedBits(uint32_t(threshold >> 32));
}

}  // namespace fused
}  // namespace gpu
}  // namespace faiss_ext
