// The fused candidates' warpgroup kernels (FusedCandidatesWgmma.h).
//
// Warpgroup w (128 threads) of a block multiplies the queries 64 w .. 64 w +
// 63 of a 128-query tile with 128 vectors by wgmma m64n128 (PTX ISA,
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"). Both operands
// are read by the tensor cores from shared memory through matrix
// descriptors: rows of 128 bytes whose 16-byte chunks are XORed with the
// row's low 3 bits (FusedTileParts.cuh's stageOffset) are what wgmma calls
// the 128-byte swizzle, K-major, in atoms of 8 rows (1,024 bytes). No
// fragment is held in registers, which is what capped the mma.sync
// kernel's occupancy. Two kernels:
//   fusedFilterResidentKernel  the query tile resident in shared memory,
//                              the vector tiles streamed past it (where
//                              its panels leave room for two blocks an SM);
//   fusedFilterWgmmaKernel     one 128 x 128 tile a block, both sides
//                              staged by FusedTileParts.cuh's copier.
// The end is the same threshold test as FusedCandidates.cu's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "faiss_ext/gpu/impl/flat/FusedCandidatesWgmma.h"
#include "faiss_ext/gpu/impl/flat/FusedTileParts.cuh"
#include "faiss_ext/gpu/impl/flat/KernelLaunchCache.h"
#include "faiss_ext/gpu/impl/flat/StageBarriers.cuh"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

using namespace fused;

constexpr int kThreads = 256;  ///< two warpgroups, 64 queries each
constexpr int kWarpgroupRows = 64;
constexpr int kStages = 3;                                 ///< of the tile kernel
constexpr unsigned kRowBytes = sizeof(float) * kStepDims;  ///< 128: one swizzle row
constexpr unsigned kStageBytes = sizeof(float) * kStageFloats;
/// Stages of the tile kernel, plus room to start them at a multiple of
/// 1,024 bytes (alignedShared).
constexpr size_t kSharedBytes = size_t(kStageBytes) * kStages + 1024;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// The descriptor of a K-major operand at shared address `address` (a row
/// of 128 bytes a query or vector, 128-byte swizzle): start address >> 4
/// (bits 0-13), leading offset unused by swizzled K-major layouts (1, bits
/// 16-29), 1,024 bytes between 8-row atoms (bits 32-45), swizzle mode 1 =
/// 128 bytes (bits 62-63). A step of k within the 128-byte row moves the
/// start address only: the swizzle applies to the address bits, so the
/// atom must start at a multiple of 1,024 bytes (base offset 0).
__device__ __forceinline__ uint64_t swizzledKMajor(unsigned address) {
    return uint64_t((address & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
           (uint64_t(1) << 62);
}

/// One wgmma m64n128 of `shapeTypes` (e.g. "m64n128k8.f32.tf32.tf32") and
/// immediate operands `tail` after the scales: d (the 64 accumulators of
/// the warpgroup, %0 .. %63) from shared-memory descriptors a (%64) and b
/// (%65), accumulating where `accumulate` (%66) is nonzero.
#define FX_WARPGROUP_PRODUCT(shapeTypes, tail)                                                    \
    asm volatile(                                                                                 \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                              \
        "wgmma.mma_async.sync.aligned." shapeTypes                                                \
        " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "   \
        "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "   \
        "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1" tail ";\n}\n" \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),     \
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),           \
          "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),           \
          "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),           \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]),           \
          "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),           \
          "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),           \
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),           \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),           \
          "+f"(d[62]), "+f"(d[63])                                                                \
        : "l"(a), "l"(b), "r"(accumulate))

/// d (64 x 128, the warpgroup's accumulators) += a b over 8 dimensions:
/// wgmma m64n128k8, TF32 from FP32 bits (truncated, as Tf32ErrorBound.h
/// assumes), FP32 accumulation; a (64 queries) and b (128 vectors) K-major
/// in shared memory, described by their descriptors; accumulate 0: d = a b.
__device__ __forceinline__ void warpgroupTf32(float (&d)[64], uint64_t a, uint64_t b,
                                              int accumulate) {
    FX_WARPGROUP_PRODUCT("m64n128k8.f32.tf32.tf32", "");
}

/// The same over 16 BF16 (a pair a 32-bit word): wgmma m64n128k16, BF16
/// inputs, FP32 accumulation, both operands K-major (no transposes: the
/// last two immediates).
__device__ __forceinline__ void warpgroupBf16(float (&d)[64], uint64_t a, uint64_t b,
                                              int accumulate) {
    FX_WARPGROUP_PRODUCT("m64n128k16.f32.bf16.bf16", ", 0, 0");
}

#undef FX_WARPGROUP_PRODUCT

/// The block's dynamic shared memory from its first multiple of 1,024
/// bytes (the swizzle's atom; dynamic shared memory is only 16-byte
/// aligned): its generic pointer, and its shared address in `address`.
__device__ __forceinline__ float* alignedShared(float4* raw, unsigned& address) {
    const unsigned rawAddress = unsigned(__cvta_generic_to_shared(raw));
    address = (rawAddress + 1023u) & ~1023u;
    return reinterpret_cast<float*>(reinterpret_cast<char*>(raw) + (address - rawAddress));
}

/// The warpgroup's accumulators pinned after a wait (the asm statements
/// above produce them, as far as the compiler knows, when issued).
__device__ __forceinline__ void settleAccumulators(float (&d)[64]) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// Issues d (+)= the products of 32 words of the warpgroup's 64 query rows
/// at shared address rowsA with the 128 vector rows at rowsB (4 wgmma of 32
/// bytes a row each: 8 TF32 or 16 BF16) as one group, not waited for;
/// `start` (the first panel of a tile) sets d instead of adding to it.
template <bool kBf16>
__device__ __forceinline__ void issuePanel(float (&d)[64], unsigned rowsA, unsigned rowsB,
                                           bool start) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const uint64_t a = swizzledKMajor(rowsA + 32u * k);
        const uint64_t b = swizzledKMajor(rowsB + 32u * k);
        const int accumulate = !start || k > 0;
        if (kBf16) {
            warpgroupBf16(d, a, b, accumulate);
        } else {
            warpgroupTf32(d, a, b, accumulate);
        }
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/// Waits for the warpgroup's issued products (their operands read, d set).
__device__ __forceinline__ void finishPanels(float (&d)[64]) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    settleAccumulators(d);
}

/// issuePanel, waited for.
template <bool kBf16>
__device__ __forceinline__ void multiplyPanel(float (&d)[64], unsigned rowsA, unsigned rowsB,
                                              bool start) {
    issuePanel<kBf16>(d, rowsA, rowsB, start);
    finishPanels(d);
}

/// The first of the thread's two rows (the other is 8 further) in the
/// accumulator layout below.
__device__ __forceinline__ int64_t threadRow(int64_t q0, int warpgroup) {
    const int warp = (threadIdx.x >> 5) & 3;
    return q0 + warpgroup * kWarpgroupRows + warp * 16 + ((threadIdx.x & 31) >> 2);
}

/// Appends the thread's products at or below their query's threshold key,
/// as FusedCandidates.cu's keepBelowThreshold: value alpha p + the column
/// term (one FMA), rows compared through their minimum first. In wgmma's
/// accumulator layout (that of mma m16n8 repeated over 16 column tiles)
/// lane 4 g + t of warp w holds d[4 j + 2 h + e] = (row 16 w + g + 8 h,
/// column 8 j + 2 t + e).
template <bool kWholeTile, bool kResidual>
__device__ __forceinline__ void keepWarpgroupBelowThresholdIn(const FusedArgs& a, int64_t q0,
                                                              int64_t v0, int warpgroup,
                                                              float (&d)[64],
                                                              const float (&offset)[2]) {
    const int lane = threadIdx.x & 31;
    const int64_t row0 = threadRow(q0, warpgroup);
    const int64_t col0 = v0 + 2 * (lane & 3);
    // kResidual: offset holds a residual corpus's (query, tile) terms; the
    // threshold test moves by them, the kept key is lowered by them.
    float tValue[2] = {thresholdValue(a, row0), thresholdValue(a, row0 + 8)};
    if constexpr (kResidual) {
        tValue[0] += offset[0];
        tValue[1] += offset[1];
    }
    // Columns from the thread's first onward, and their terms (32-bit
    // offsets from here on keep the registers for the 64 products).
    const int colsLeft = int(min(a.nb - col0, int64_t(1) << 30));
    const float* add = a.colAdd ? a.colAdd + col0 : nullptr;
    float lowest[2] = {INFINITY, INFINITY};
    // Eight column tiles at a time: their 16 terms loaded first, so that
    // the loads' latencies overlap without holding all 32.
#pragma unroll
    for (int j0 = 0; j0 < 16; j0 += 8) {
        float terms[8][2];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int c = 8 * (j0 + j) + e;
                terms[j][e] = kWholeTile            ? __ldg(add + c)
                              : add && c < colsLeft ? __ldg(add + c)
                                                    : -0.f;
            }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    float& v = d[4 * (j0 + j) + 2 * h + e];
                    v = fmaf(a.alpha, v, terms[j][e]);
                    lowest[h] = fminf(lowest[h], v);  // (a NaN value is skipped)
                }
            }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (!(lowest[h] <= tValue[h])) continue;
        const int64_t row = row0 + 8 * h;
        const uint64_t threshold = __ldg(a.thresholds + row);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float v = d[4 * j + 2 * h + e];
                if (v <= tValue[h]) {
                    keepIfBelow(a, row, col0 + 8 * j + e, kResidual ? v - offset[h] : v,
                                threshold);
                }
            }
        }
    }
}

/// The column terms loaded without bounds checks where the tile holds 128
/// vectors and there are terms (the common case), with them elsewhere.
template <bool kResidual>
__device__ __forceinline__ void keepWarpgroupBelowThreshold(const FusedArgs& a, int64_t q0,
                                                            int64_t v0, int warpgroup,
                                                            float (&d)[64],
                                                            const float (&offset)[2]) {
    if (a.colAdd && v0 + kTileCols <= a.nb) {
        keepWarpgroupBelowThresholdIn<true, kResidual>(a, q0, v0, warpgroup, d, offset);
    } else {
        keepWarpgroupBelowThresholdIn<false, kResidual>(a, q0, v0, warpgroup, d, offset);
    }
}

/// A residual corpus's terms of the thread's two rows against one vector
/// tile (FusedTileParts.cuh, residualOffset), loaded ahead so that their
/// latencies pass under the products rather than in a tile's epilogue: the
/// rows' coefficients once an item, each tile's partition and radii one
/// tile ahead (beginTile takes them and fetches the next tile's), and the
/// rows' products with the tile's centre, which need its partition, at the
/// tile's first step, a whole tile before its epilogue (at d = 96 a tile is
/// only three steps: loads issued within it still stall the epilogue, and
/// through the step barrier the other warpgroup).
struct ResidualPrefetch {
    int partition, nextPartition;
    float2 radii, nextRadii;
    float4 coefs[2];
    float partial[2];  ///< a1 rho + a2 lambda + b
    float dot[2];      ///< q~ . c_p

    /// The rows' coefficients (once an item) and the partition and radii
    /// of its first tile (taken by the first beginTile).
    __device__ __forceinline__ void beginItem(const FusedArgs& a, int64_t row0, int64_t v0) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            coefs[h] = row0 + 8 * h < a.rows ? __ldg(a.rowBoundCoefs + row0 + 8 * h)
                                             : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        fetchTile(a, v0 / kTileCols);
    }
    __device__ __forceinline__ void fetchTile(const FusedArgs& a, int64_t tile) {
        nextPartition = __ldg(a.tilePartition + tile);
        nextRadii = __ldg(a.tileRadii + tile);
    }
    /// At a tile's first step: its partition and radii (fetched a tile
    /// ago), its centre's products with the rows, and the next tile's
    /// partition and radii where the item has one (hasNext).
    __device__ __forceinline__ void beginTile(const FusedArgs& a, int64_t row0, int64_t v0,
                                              bool hasNext) {
        partition = nextPartition;
        radii = nextRadii;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t row = row0 + 8 * h;
            dot[h] = row < a.rows ? __ldg(a.centreDots + row * a.centreDotsLd + partition) : 0.f;
            partial[h] = residualBoundTerm(coefs[h], radii);
        }
        if (hasNext) fetchTile(a, v0 / kTileCols + 1);
    }
    __device__ __forceinline__ void offsets(float (&out)[2]) const {
#pragma unroll
        for (int h = 0; h < 2; ++h) out[h] = fmaf(2.f, dot[h], partial[h]);
    }
};

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// One 128 x 128 tile of products per block (blockTile's order), kStages
/// stages of 32 dimensions in flight: while the warpgroups multiply stage
/// s, the copies of stage s + kStages - 1 land.
template <bool kBf16, bool kResidual>
__global__ void __launch_bounds__(kThreads, 2) fusedFilterWgmmaKernel(FusedArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ float4 sharedRaw[];
    unsigned stagesAddress;
    float* stages = alignedShared(sharedRaw, stagesAddress);
    int64_t q0, v0;
    blockTile(a, blockIdx.x, q0, v0);
    const int warpgroup = threadIdx.x >> 7;

    float d[64];  // (set, not read, by the first products; zeroed for the operands' sake)
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.f;
    const StageCopier<kThreads> copier(a, q0, v0);
    runTileStages<kStages, true>(a, copier, stages, [&](int buffer, int s) {
        const unsigned stage = stagesAddress + unsigned(buffer) * kStageBytes;
        multiplyPanel<kBf16>(d, stage + unsigned(warpgroup * kWarpgroupRows) * kRowBytes,
                             stage + unsigned(kTileRows) * kRowBytes, s == 0);
    });
    float offset[2] = {0.f, 0.f};
    if constexpr (kResidual) {
        const int64_t row0 = threadRow(q0, warpgroup);
        offset[0] = residualTileOffset(a, row0, v0);
        offset[1] = residualTileOffset(a, row0 + 8, v0);
    }
    keepWarpgroupBelowThreshold<kResidual>(a, q0, v0, warpgroup, d, offset);
#else
    __trap();  // never launched: fusedWgmmaAvailable is false without sm_90a code
#endif
}

/// Floats of a panel: 128 rows x 32 words (16 KB), laid out as a stage's half.
constexpr int kPanelFloats = kTileRows * kStepDims;
constexpr unsigned kPanelBytes = sizeof(float) * kPanelFloats;
/// Vector tiles of one work item of the resident kernel (an item is one
/// query tile against consecutive vector tiles): at most kMaxItemTiles
/// (8,192 vectors; 1M vectors and 10,000 queries make 9,471 items), fewer
/// where that would leave fewer than kItemsPerBlock items a block in
/// flight (few queries: 128 queries of 1M make 977 items of 8 tiles), but
/// at least kMinItemTiles, whose streamed panels outweigh the query tile's
/// 8 to 1.
constexpr int64_t kMaxItemTiles = 64;
constexpr int64_t kMinItemTiles = 8;
constexpr int64_t kItemsPerBlock = 4;

int64_t residentItemTiles(int64_t queryTiles, int64_t vectorTiles, int64_t blocksInFlight) {
    const int64_t balanced = queryTiles * vectorTiles / (kItemsPerBlock * blocksInFlight);
    return std::max(kMinItemTiles, std::min(kMaxItemTiles, balanced));
}

/// A thread's share of copying one panel: words 32 p .. 32 p + 31 of 128
/// consecutive rows (rows r0, r0 + 32, r0 + 64, r0 + 96; chunk `dim / 4`).
struct PanelCopier {
    int r0;
    int dim;
    int dstOffset;

    __device__ PanelCopier() {
        r0 = threadIdx.x / (kStepDims / 4);
        dim = (threadIdx.x % (kStepDims / 4)) * 4;
        dstOffset = stageOffset(r0, dim);
    }

    /// Rows first .. first + 127 of src (count rows of d words), panel p,
    /// into `panel` (zeros past d and past the rows).
    __device__ __forceinline__ void issue(float* panel, const float* src, int64_t first,
                                          int64_t count, int d, int p) const {
        constexpr int kRowStep = kThreads / (kStepDims / 4);
        const int k = p * kStepDims + dim;
        const unsigned base = unsigned(__cvta_generic_to_shared(panel + dstOffset));
#pragma unroll
        for (int i = 0; i < kTileRows / kRowStep; ++i) {
            const int64_t row = first + r0 + i * kRowStep;
            const bool valid = k < d && row < count;
            // (rows r0 + 32 i share r0's swizzle)
            copy16(base + unsigned(sizeof(float) * i * kRowStep * kStepDims),
                   valid ? src + row * d + k : src, valid);
        }
    }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// A thread's share of an item's vector panels, issued in step order (panel
/// 0 .. panels - 1 of one tile, then of the next) into stages 0, 1, ...,
/// kStages - 1, 0, ...: counters instead of a division a step.
template <int kStages>
struct VectorStream {
    const float* row;  ///< the thread's first row of the tile, at its chunk
    int64_t tileRow;   ///< the tile's first vector
    int64_t rowStep;   ///< words between the thread's rows (32 d)
    int panel;
    int stage;

    __device__ VectorStream(const FusedArgs& a, const PanelCopier& c, int64_t firstTile) {
        tileRow = firstTile * kTileCols;
        row = a.vectors + (tileRow + c.r0) * a.d + c.dim;
        rowStep = int64_t(kThreads / (kStepDims / 4)) * a.d;
        panel = 0;
        stage = 0;
    }

    __device__ __forceinline__ void issueNext(const FusedArgs& a, const PanelCopier& c,
                                              float* stages, int panels) {
        constexpr int kRowStep = kThreads / (kStepDims / 4);
        const bool dimOk = panel * kStepDims + c.dim < a.d;
        const unsigned base =
            unsigned(__cvta_generic_to_shared(stages + stage * kPanelFloats + c.dstOffset));
        const float* src = row + panel * kStepDims;
#pragma unroll
        for (int i = 0; i < kTileRows / kRowStep; ++i) {
            const bool valid = dimOk && tileRow + c.r0 + i * kRowStep < a.nb;
            copy16(base + unsigned(sizeof(float) * i * kRowStep * kStepDims),
                   valid ? src + i * rowStep : a.vectors, valid);
        }
        stage = stage + 1 == kStages ? 0 : stage + 1;
        if (++panel == panels) {
            panel = 0;
            tileRow += kTileCols;
            row += kTileCols * int64_t(a.d);
        }
    }
};

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

/// Room for the stage barriers in the 1,024 bytes alignedShared adds to a
/// region of `panelCount` panels: before the aligned start where that gap
/// holds them, else after the panels (the two gaps sum to 1,024 bytes, so
/// one of them holds at least 512).
template <int kStages>
__device__ __forceinline__ StageBarriers<kStages>* slackBarriers(float4* raw, float* aligned,
                                                                 int panelCount) {
    char* const start = reinterpret_cast<char*>(raw);
    char* const panelsStart = reinterpret_cast<char*>(aligned);
    if (panelsStart - start >= int(sizeof(StageBarriers<kStages>))) {
        return reinterpret_cast<StageBarriers<kStages>*>(start);
    }
    return reinterpret_cast<StageBarriers<kStages>*>(panelsStart +
                                                     size_t(panelCount) * kPanelBytes);
}

/// The same products with the query tile resident: each block takes work
/// items (one query tile, itemTiles vector tiles) in turn, loads the
/// query tile's `panels` panels once, and streams only the vector tiles
/// through kStages stages of one panel each, the pipeline running on
/// across the item's tiles (no refill between them). Half the shared-memory
/// traffic of a tile a block, and no block start, prologue or epilogue
/// wait per tile. Items run chunk by chunk (all query tiles of the first
/// itemTiles vector tiles, then the next), so the blocks in flight read the
/// same vector tiles through L2. Two hand-overs of the stages:
/// - the residual corpus's kernel (kResidual): each stage's own barriers
///   (StageBarriers.cuh): a warpgroup issues a step's products once that
///   stage's copies have landed, refills the stage of the step before once
///   both warpgroups have read it, and signals its own read when its
///   products are done, before its epilogue, so that one warpgroup's
///   epilogue and its per-tile loads pass under the other's products
///   (measured on the H200, far 10M x 96: 5-6% more q/s than one barrier
///   a step);
/// - the others: one __syncthreads a step (the stage barriers measured
///   within 1% on a clustered 1M x 128: nothing to gain there).
template <bool kBf16, int kStages, bool kResidual>
__global__ void __launch_bounds__(kThreads, 2)
    fusedFilterResidentKernel(FusedArgs a, int panels, int64_t itemTiles, int64_t items) {
    constexpr int kLookahead = kStages - 1;  ///< steps copied ahead
    constexpr bool kStageBarriers = kResidual;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ float4 sharedRaw[];
    unsigned queryAddress;
    float* queryPanels = alignedShared(sharedRaw, queryAddress);
    // (kStageBarriers only; in the alignment slack, not static shared
    // memory, which would cost d = 128 its third stage)
    StageBarriers<kStages>& barriers =
        *slackBarriers<kStages>(sharedRaw, queryPanels, panels + kStages);
    float* stages = queryPanels + panels * kPanelFloats;
    const unsigned stageAddress = queryAddress + unsigned(panels) * kPanelBytes;
    const int warpgroup = threadIdx.x >> 7;
    const bool warpLeader = (threadIdx.x & 31) == 0;
    const PanelCopier copier;
    if (kStageBarriers && threadIdx.x == 0) barriers.init(kThreads, kThreads / 32);
    StagePhases<kStages> phases;
    float d[64];  // (set, not read, by a tile's first products; zeroed for the operands' sake)
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.f;
    ResidualPrefetch prefetch{};  // (kResidual only)
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t chunk = item / a.queryTiles;
        const int64_t q0 = (item - chunk * a.queryTiles) * kTileRows;
        const int64_t firstTile = chunk * itemTiles;
        const int steps = int(min(itemTiles, a.vectorTiles - firstTile)) * panels;
        const int64_t row0 = threadRow(q0, warpgroup);
        // every thread past the last item's products (the query panels are
        // rewritten; the barriers' first item: their initialisation seen)
        __syncthreads();
        for (int p = 0; p < panels; ++p) {
            copier.issue(queryPanels + p * kPanelFloats, a.queries, q0, a.rows, a.d, p);
        }
        // (the query panels land with the first step's copies)
        VectorStream<kStages> stream(a, copier, firstTile);
        // The copies of the next step (a group of its own without stage
        // barriers, empty past the item's last step: the waits count groups)
        const auto copyNextStep = [&](bool any) {
            if constexpr (kStageBarriers) {
                if (!any) return;
                const int i = stream.stage;
                phases.waitEmpty(barriers, i);
                stream.issueNext(a, copier, stages, panels);
                arriveWhenCopiesLand(&barriers.full[i]);
            } else {
                if (any) stream.issueNext(a, copier, stages, panels);
                commitCopies();
            }
        };
        const int64_t endV0 = (firstTile + steps / panels) * kTileCols;  // past the item's tiles
        if constexpr (kResidual) prefetch.beginItem(a, row0, firstTile * kTileCols);
#pragma unroll
        for (int s = 0; s < kLookahead; ++s) copyNextStep(s < steps);
        int p = 0;      // the panel of step s
        int stage = 0;  // its stage
        int64_t v0 = firstTile * kTileCols;
        for (int s = 0; s < steps; ++s) {
            if constexpr (kStageBarriers) {
                phases.waitFull(barriers, stage);
            } else {
                waitCopies<kLookahead - 1>();
            }
            // (the copies wrote through the generic proxy; wgmma reads
            // through the async one)
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            if constexpr (!kStageBarriers) {
                // Step s visible to all; the products of step s - 1 done in
                // both warpgroups, so that its stage may be refilled.
                __syncthreads();
                copyNextStep(s + kLookahead < steps);
            }
            if constexpr (kResidual) {
                if (p == 0) prefetch.beginTile(a, row0, v0, v0 + kTileCols < endV0);
            }
            const unsigned rowsA = queryAddress + unsigned(p) * kPanelBytes +
                                   unsigned(warpgroup * kWarpgroupRows) * kRowBytes;
            issuePanel<kBf16>(d, rowsA, stageAddress + unsigned(stage) * kPanelBytes, p == 0);
            if constexpr (kStageBarriers) {
                // the stage of step s - 1, once both warpgroups have read it
                copyNextStep(s + kLookahead < steps);
            }
            finishPanels(d);
            if constexpr (kStageBarriers) {
                __syncwarp();
                if (warpLeader) arrive(&barriers.empty[stage]);
            }
            stage = stage + 1 == kStages ? 0 : stage + 1;
            if (++p == panels) {
                float offset[2] = {0.f, 0.f};
                if constexpr (kResidual) prefetch.offsets(offset);
                keepWarpgroupBelowThreshold<kResidual>(a, q0, v0, warpgroup, d, offset);
                p = 0;
                v0 += kTileCols;
            }
        }
    }
#else
    __trap();  // never launched: fusedWgmmaAvailable is false without sm_90a code
#endif
}

/// Dynamic shared memory of the resident kernel: the query panels and
/// kStages vector panels, from a multiple of 1,024 bytes.
size_t residentSharedBytes(int panels, int stages) {
    return size_t(kPanelBytes) * size_t(panels + stages) + 1024;
}

/// Launches the resident kernel with kStages stages on `device` (current)
/// if two blocks of it fit an SM (the other block's products cover one's
/// waits); false where they do not (nothing launched).
template <bool kBf16, int kStages, bool kResidual>
bool launchResident(const FusedArgs& a, int panels, int device, cudaStream_t stream) {
    auto kernel = fusedFilterResidentKernel<kBf16, kStages, kResidual>;
    const size_t bytes = residentSharedBytes(panels, kStages);
    int blockLimit = 0;
    FAISS_EXT_CUDA_CHECK(
        cudaDeviceGetAttribute(&blockLimit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    // Rows too wide for one block's shared memory (TF32 past d = 352 with
    // three stages): the tile kernel serves (asking for more would fail).
    if (bytes > size_t(blockLimit)) return false;
    // (all of the SM's unified memory for shared memory if asked)
    FAISS_EXT_CUDA_CHECK(cudaFuncSetAttribute(kernel,
                                              cudaFuncAttributePreferredSharedMemoryCarveout,
                                              int(cudaSharedmemCarveoutMaxShared)));
    const int perSm =
        cachedBlocksPerSm(reinterpret_cast<const void*>(kernel), device, kThreads, bytes);
    if (perSm < 2) return false;
    const int64_t inFlight = int64_t(cachedSmCount(device)) * perSm;
    const int64_t itemTiles = residentItemTiles(a.queryTiles, a.vectorTiles, inFlight);
    const int64_t items = a.queryTiles * ((a.vectorTiles + itemTiles - 1) / itemTiles);
    const int64_t grid = std::min(items, inFlight);
    kernel<<<unsigned(grid), kThreads, bytes, stream>>>(a, panels, itemTiles, items);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    return true;
}

/// The resident kernel with three stages, else two, else the tile kernel.
template <bool kBf16, bool kResidual>
void launchWgmma(const FusedArgs& a, int device, cudaStream_t stream) {
    const int panels = (a.d + kStepDims - 1) / kStepDims;
    if (launchResident<kBf16, 3, kResidual>(a, panels, device, stream) ||
        launchResident<kBf16, 2, kResidual>(a, panels, device, stream)) {
        return;
    }
    auto kernel = fusedFilterWgmmaKernel<kBf16, kResidual>;
    FAISS_EXT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              int(kSharedBytes)));
    kernel<<<unsigned(a.queryTiles * a.vectorTiles), kThreads, kSharedBytes, stream>>>(a);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool fusedWgmmaAvailable(int device) {
#if FAISS_EXT_FUSED_WGMMA
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        cudaGetLastError();  // (a later launch check must not see this query's error)
        return false;
    }
    return major == 9 && minor == 0;
#else
    (void)device;
    return false;
#endif
}

void launchFusedWgmma(const FusedArgs& a, bool bf16, int device, cudaStream_t stream) {
    // The resident kernel where its panels leave room for two blocks an SM
    // (at most 5 panels: TF32 rows of up to 160 words, BF16x3 of d <= 104),
    // with three stages where they fit, else two; the tile kernel otherwise.
    // A residual corpus's terms (TF32 rows only) are compiled in apart, so
    // that the other searches run the epilogue they had.
    if (a.tilePartition) {
        launchWgmma<false, true>(a, device, stream);
    } else if (bf16) {
        launchWgmma<true, false>(a, device, stream);
    } else {
        launchWgmma<false, false>(a, device, stream);
    }
}

}  // namespace gpu
}  // namespace faiss_ext
