// The fused products and threshold filter (FusedCandidates.h).
//   gatherSharedSampleKernel  the sampled vectors (and their column terms)
//   (cuBLAS GEMM)             the queries' products with them (TF32 or BF16x3)
//   (select thresholds)       one threshold key per query from its sample
//   fusedFilterKernel         128 x 128 tiles of products on the tensor cores,
//                             kept where at or below the query's threshold
//   (select settle)           the m smallest kept keys per query, sorted
// The tile loop follows the usual shape of a tensor-core GEMM (as in CUTLASS's
// SM80 multistage kernels): 32 dimensions of both tiles staged in shared
// memory by cp.async while earlier stages are multiplied, fragments loaded
// by ldmatrix, each of 8 warps a 64 x 32 piece of the tile in registers.
// What differs is the end: no product is written; each is compared with its
// query's threshold in registers.
#include <faiss/impl/FaissAssert.h>

#include <atomic>

#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidates.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidatesWgmma.h"
#include "faiss_ext/gpu/impl/flat/FusedTileParts.cuh"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
#include "faiss_ext/gpu/impl/select/SelectKeys.cuh"
#include "faiss_ext/gpu/utils/Align.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

using namespace fused;

constexpr int kWarpRows = 64;
constexpr int kMmaRowTiles = kWarpRows / 16;  ///< m16n8k8: 16 queries a product tile

/// The block's shape: kThreads / 32 warps, each kWarpRows x kWarpCols of the
/// tile, kStages stages of 32 dimensions in flight. Measured on the H200
/// (1M x 128, 10,000 queries, the kernel alone under ncu): 8 warps of 64 x
/// 32 with 3 stages 24.5 ms, with 2 stages 27.3 ms; 4 warps of 64 x 64 (as
/// cuBLAS's own 128 x 128 TF32 tile) 53.8 ms: at 245 registers only 8 warps
/// fit an SM, too few to hide the products' fixed latencies (ncu: stalls on
/// "wait" dominate).
constexpr int kThreads = 256;
constexpr int kWarpCols = 32;
constexpr int kStages = 3;
constexpr int kMmaColTiles = kWarpCols / 8;  ///< 8 vectors a product tile
static_assert((kTileRows / kWarpRows) * (kTileCols / kWarpCols) * 32 == kThreads,
              "the warps cover the tile");
constexpr size_t kSharedBytes = sizeof(float) * kStageFloats * kStages;

std::atomic<bool> gEnabled{true};
std::atomic<int64_t> gTf32Rows{0};
std::atomic<int64_t> gBf16x3Rows{0};
std::atomic<bool> gWgmmaEnabled{true};
std::atomic<int64_t> gWgmmaRows{0};

/// Four 8 x 4 tiles of 32-bit values from shared memory (ldmatrix of four
/// 8 x 8 b16 matrices): lanes 8 i .. 8 i + 7 give the row addresses of tile
/// i; lane 4 g + t receives (row g, column t) of each tile, in r[0..3].
__device__ __forceinline__ void loadTiles4(uint32_t (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

/// c += a b on the tensor cores: a 16 x 8 (row-major fragment), b 8 x 8
/// (column-major), FP32 bits taken as TF32 (the low mantissa bits ignored:
/// truncation, which Tf32ErrorBound.h assumes).
__device__ __forceinline__ void mmaTf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// c += a b for BF16 a 16 x 16 and b 16 x 8, FP32 accumulation: the same
/// registers as mmaTf32's, each holding two BF16 of consecutive k.
__device__ __forceinline__ void mmaBf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

using Accumulators = float[kMmaRowTiles][kMmaColTiles][4];

/// The warp's products over one stage. In m16n8k8 (PTX ISA) lane 4 g + t
/// holds a at (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4), b at (t, g),
/// (t + 4, g) (for m16n8k16 BF16 the same registers hold pairs of k: 2t,
/// 2t + 1 and 2t + 8, 2t + 9; a "dimension" below is then a pair of BF16,
/// and an 8-word step is 16 of k); one ldmatrix.x4 loads an a fragment (tiles: rows 0-7 and
/// 8-15 of dimensions k8 .. k8 + 3, then of k8 + 4 .. k8 + 7) or the b
/// fragments of two 8-vector tiles, straight into the registers the product
/// takes (as CUTLASS's SM80 TF32 kernels do).
template <bool kBf16>
__device__ __forceinline__ void multiplyStage(const float* stage, int warpRow, int warpCol,
                                              Accumulators& acc) {
    static_assert(kMmaColTiles % 2 == 0, "b fragments load in pairs of tiles");
    const int lane = threadIdx.x & 31;
    const int tile = lane >> 3;  // the ldmatrix tile this lane addresses
    const int r = lane & 7;      // its row in the tile
    const unsigned base = unsigned(__cvta_generic_to_shared(stage));
    // a: tile bit 0 picks rows + 8, bit 1 dimensions + 4; b: tile bit 0
    // dimensions + 4, bit 1 the next 8 vectors.
    const int aRow = warpRow * kWarpRows + (tile & 1) * 8 + r;
    const int bRow = kTileRows + warpCol * kWarpCols + (tile >> 1) * 8 + r;
#pragma unroll
    for (int k8 = 0; k8 < kStepDims; k8 += 8) {
        const unsigned aAddr = base + 4u * unsigned(stageOffset(aRow, k8 + (tile >> 1) * 4));
        const unsigned bAddr = base + 4u * unsigned(stageOffset(bRow, k8 + (tile & 1) * 4));
        uint32_t af[kMmaRowTiles][4];
        uint32_t bf[kMmaColTiles / 2][4];
        // (rows 16 i and 16 j further keep the swizzle: multiples of 8)
#pragma unroll
        for (int i = 0; i < kMmaRowTiles; ++i) loadTiles4(af[i], aAddr + 4u * 16 * kStepDims * i);
#pragma unroll
        for (int j = 0; j < kMmaColTiles / 2; ++j)
            loadTiles4(bf[j], bAddr + 4u * 16 * kStepDims * j);
#pragma unroll
        for (int i = 0; i < kMmaRowTiles; ++i) {
#pragma unroll
            for (int j = 0; j < kMmaColTiles; ++j) {
                const uint32_t b0 = bf[j / 2][2 * (j % 2)];
                const uint32_t b1 = bf[j / 2][2 * (j % 2) + 1];
                if (kBf16) {
                    mmaBf16(acc[i][j], af[i], b0, b1);
                } else {
                    mmaTf32(acc[i][j], af[i], b0, b1);
                }
            }
        }
    }
}

/// Appends the thread's products at or below their query's threshold key:
/// value alpha p + the column term (one FMA: alpha p is exact, so this is
/// the unfused path's GEMM output plus colAdd, one rounding; -0 where there
/// is no column term, which keeps -0 products -0). The thread's 16 values
/// of a row are compared through their minimum first, without branches:
/// nearly every row of a tile has none to keep (the thresholds keep about
/// 0.15% of the products at 1M vectors), and a branch per value made this
/// epilogue as long as the products.
template <bool kResidual>
__device__ __forceinline__ void keepBelowThreshold(const FusedArgs& a, int64_t q0, int64_t v0,
                                                   int warpRow, int warpCol,
                                                   const Accumulators& acc) {
    const int lane = threadIdx.x & 31;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int64_t col0 = v0 + warpCol * kWarpCols + 2 * t;
    const int64_t row0 = q0 + warpRow * kWarpRows + g;
    // All loads first, so that their latencies overlap.
    float add[kMmaColTiles][2];
    float tValue[kMmaRowTiles][2];
    float offset[kMmaRowTiles][2];  // a residual corpus's (query, tile) term, else 0
#pragma unroll
    for (int j = 0; j < kMmaColTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int64_t col = col0 + j * 8 + e;
            add[j][e] = a.colAdd && col < a.nb ? __ldg(a.colAdd + col) : -0.f;
        }
    }
#pragma unroll
    for (int i = 0; i < kMmaRowTiles; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            tValue[i][h] = thresholdValue(a, row0 + i * 16 + 8 * h);
            offset[i][h] = 0.f;
            if constexpr (kResidual) {
                offset[i][h] = residualTileOffset(a, row0 + i * 16 + 8 * h, v0);
                tValue[i][h] += offset[i][h];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < kMmaRowTiles; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float v[kMmaColTiles][2];
            float lowest = INFINITY;
#pragma unroll
            for (int j = 0; j < kMmaColTiles; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    v[j][e] = fmaf(a.alpha, acc[i][j][2 * h + e], add[j][e]);
                    lowest = fminf(lowest, v[j][e]);  // (a NaN value is skipped)
                }
            }
            if (!(lowest <= tValue[i][h])) continue;
            const int64_t row = row0 + i * 16 + 8 * h;
            const uint64_t threshold = __ldg(a.thresholds + row);
#pragma unroll
            for (int j = 0; j < kMmaColTiles; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (v[j][e] <= tValue[i][h]) {
                        keepIfBelow(a, row, col0 + j * 8 + e,
                                    kResidual ? v[j][e] - offset[i][h] : v[j][e], threshold);
                    }
                }
            }
        }
    }
}

/// One 128 x 128 tile of products per block, kGroupQueryTiles query tiles
/// sweeping the vector tiles together (block ids run along the group's
/// query tiles first). kStages stages of 32 dimensions in flight.
template <bool kBf16, bool kResidual>
__global__ void __launch_bounds__(kThreads, 2) fusedFilterKernel(FusedArgs a) {
    extern __shared__ float4 sharedRaw[];
    float* stages = reinterpret_cast<float*>(sharedRaw);
    int64_t q0, v0;
    blockTile(a, blockIdx.x, q0, v0);
    const int warp = threadIdx.x >> 5;
    const int warpRow = warp / (kTileCols / kWarpCols);
    const int warpCol = warp % (kTileCols / kWarpCols);

    Accumulators acc;
#pragma unroll
    for (int i = 0; i < kMmaRowTiles; ++i) {
#pragma unroll
        for (int j = 0; j < kMmaColTiles; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
        }
    }
    const StageCopier<kThreads> copier(a, q0, v0);
    runTileStages<kStages, false>(a, copier, stages, [&](int buffer, int) {
        multiplyStage<kBf16>(stages + buffer * kStageFloats, warpRow, warpCol, acc);
    });
    keepBelowThreshold<kResidual>(a, q0, v0, warpRow, warpCol, acc);
}

template <bool kBf16, bool kResidual>
void launchFused(const FusedArgs& a, cudaStream_t stream) {
    FAISS_EXT_CUDA_CHECK(cudaFuncSetAttribute(fusedFilterKernel<kBf16, kResidual>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              int(kSharedBytes)));
    fusedFilterKernel<kBf16, kResidual>
        <<<unsigned(a.queryTiles * a.vectorTiles), kThreads, kSharedBytes, stream>>>(a);
}

/// The shared sample's rows (`words` 32-bit words each) and column terms,
/// in sample order.
__global__ void gatherSharedSampleKernel(const uint32_t* vectors, int64_t nb, int words,
                                         const float* colAdd, int64_t samples, uint32_t* outVectors,
                                         float* outColAdd) {
    const int64_t total = samples * words;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t s = i / words;
        const int64_t w = i - s * words;
        const int64_t col = select::sampledThresholdSharedColumn(s, nb, samples);
        outVectors[i] = vectors[col * words + w];
        if (w == 0 && colAdd) outColAdd[s] = colAdd[col];
    }
}

/// products[r][s] -= the residual term of row r against the tile of sample
/// s's column (residualTileOffset), so that the thresholds rank the keys
/// the kernel compares.
__global__ void lowerSampleProductsKernel(FusedArgs a, int64_t samples, float* products) {
    const int64_t total = a.rows * samples;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / samples;
        const int64_t col = select::sampledThresholdSharedColumn(i - r * samples, a.nb, samples);
        products[i] -= residualTileOffset(a, r, col / kTileCols * kTileCols);
    }
}

/// 32-bit words of one row of the operands.
int rowWords(const FusedOperands& ops) { return ops.bf16x3 ? 3 * ops.d / 2 : ops.d; }

/// The scratch of one call, carved in this order.
struct ScratchLayout {
    size_t sampleVectors, sampleColAdd, sampleProducts, threshold, thresholdBytes, total;
    ScratchLayout(int64_t rows, int64_t nb, int64_t m, int words) {
        const int64_t samples = select::sharedSampleThresholdPlan(nb, m).samples;
        sampleVectors = 0;
        sampleColAdd = sampleVectors + align256(sizeof(uint32_t) * size_t(samples) * size_t(words));
        sampleProducts = sampleColAdd + align256(sizeof(float) * size_t(samples));
        threshold = sampleProducts + align256(sizeof(float) * size_t(rows) * size_t(samples));
        thresholdBytes = select::sharedSampleThresholdScratchBytes(rows, nb, m);
        total = threshold + align256(thresholdBytes);
    }
};

/// The products of the queries with the sampled rows, as the unfused path
/// computes them (cuBLAS, the operands' precision).
void sampleProducts(cublasHandle_t blas, const FusedOperands& ops, int64_t rows,
                    const uint32_t* sampleRows, int64_t samples, float alpha, float* out) {
    if (ops.bf16x3) {
        gemmDotProductsBf16x3(blas, static_cast<const Bf16Bits*>(ops.queries), rows,
                              reinterpret_cast<const Bf16Bits*>(sampleRows), samples, ops.d, alpha,
                              out, samples);
    } else {
        gemmDotProductsTf32(blas, static_cast<const float*>(ops.queries), rows,
                            reinterpret_cast<const float*>(sampleRows), samples, ops.d, alpha, out,
                            samples);
    }
}

/// The kernel's arguments but the threshold buffers.
FusedArgs fusedArgs(const FusedOperands& ops, int64_t rows, int64_t nb, float alpha,
                    const float* colAdd, const FusedResidualTerms* residual) {
    FusedArgs a{};
    a.queries = static_cast<const float*>(ops.queries);
    a.rows = rows;
    a.vectors = static_cast<const float*>(ops.vectors);
    a.nb = nb;
    a.d = rowWords(ops);
    a.alpha = alpha;
    a.colAdd = colAdd;
    a.queryTiles = (rows + kTileRows - 1) / kTileRows;
    a.vectorTiles = (nb + kTileCols - 1) / kTileCols;
    if (residual) {
        a.centreDots = residual->centreDots;
        a.centreDotsLd = residual->centreDotsLd;
        a.rowBoundCoefs = residual->rowBoundCoefs;
        a.tilePartition = residual->tilePartition;
        a.tileRadii = residual->tileRadii;
    }
    return a;
}

}  // namespace

bool fusedCandidatesApply(int64_t nb, int64_t m, const FusedOperands& ops) {
    const bool wholeChunks = ops.d >= 1 && ops.d % (ops.bf16x3 ? 8 : 4) == 0;
    return gEnabled.load() && select::sampledThresholdKeysApply(nb, m) && wholeChunks &&
           ops.queries && ops.vectors && aligned16(ops.queries) && aligned16(ops.vectors);
}

int64_t fusedCandidatesMaxRows() { return select::kSampledThresholdMaxRows; }

size_t fusedCandidatesScratchBytes(int64_t rows, int64_t nb, int64_t m, const FusedOperands& ops) {
    return ScratchLayout(rows, nb, m, rowWords(ops)).total;
}

void fusedCandidates(cublasHandle_t blas, const FusedOperands& ops, int64_t rows, int64_t nb,
                     float alpha, const float* colAdd, int64_t m, uint64_t* outKeys,
                     uint8_t* needsFallback, void* scratch, size_t scratchBytes,
                     cudaStream_t stream, const FusedResidualTerms* residual) {
    FAISS_THROW_IF_NOT_FMT(fusedCandidatesApply(nb, m, ops),
                           "fusedCandidates: nb %lld, m %lld, d %d (%s) out of its range (or "
                           "unaligned rows)",
                           (long long)nb, (long long)m, ops.d, ops.bf16x3 ? "BF16x3" : "TF32");
    FAISS_THROW_IF_NOT_FMT(rows >= 1 && rows <= fusedCandidatesMaxRows(),
                           "fusedCandidates: %lld rows (1 to %lld a call)", (long long)rows,
                           (long long)fusedCandidatesMaxRows());
    FAISS_THROW_IF_NOT_FMT(!residual || (!ops.bf16x3 && nb % kTileCols == 0),
                           "fusedCandidates: a residual corpus takes TF32 rows in whole tiles "
                           "(nb %lld)",
                           (long long)nb);
    const int words = rowWords(ops);
    FusedArgs a = fusedArgs(ops, rows, nb, alpha, colAdd, residual);
    const ScratchLayout layout(rows, nb, m, words);
    FAISS_THROW_IF_NOT_FMT(scratch && scratchBytes >= layout.total,
                           "fusedCandidates: %zu bytes of scratch, %zu needed", scratchBytes,
                           layout.total);
    FAISS_THROW_IF_NOT_FMT(a.queryTiles * a.vectorTiles < (int64_t(1) << 31),
                           "fusedCandidates: %lld x %lld tiles exceed one grid",
                           (long long)a.queryTiles, (long long)a.vectorTiles);
    char* base = static_cast<char*>(scratch);
    uint32_t* sampleRows = reinterpret_cast<uint32_t*>(base + layout.sampleVectors);
    float* sampleColAdd = reinterpret_cast<float*>(base + layout.sampleColAdd);
    float* products = reinterpret_cast<float*>(base + layout.sampleProducts);
    void* thresholdScratch = base + layout.threshold;
    const int64_t samples = select::sharedSampleThresholdPlan(nb, m).samples;

    gatherSharedSampleKernel<<<gridStrideBlocks(samples * words), 256, 0, stream>>>(
        static_cast<const uint32_t*>(ops.vectors), nb, words, colAdd, samples, sampleRows,
        sampleColAdd);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    sampleProducts(blas, ops, rows, sampleRows, samples, alpha, products);
    if (residual) {
        lowerSampleProductsKernel<<<gridStrideBlocks(rows * samples), 256, 0, stream>>>(a, samples,
                                                                                       products);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    select::sampledThresholdFromSharedSample(products, colAdd ? sampleColAdd : nullptr, rows, nb, m,
                                             thresholdScratch, layout.thresholdBytes, stream);
    const select::SampledThresholdRowBuffers buf =
        select::sampledThresholdRowBuffers(thresholdScratch, layout.thresholdBytes, rows, nb, m);

    a.thresholds = buf.thresholds;
    a.counts = buf.counts;
    a.candidates = buf.candidates;
    a.capacity = buf.capacity;
    const int device = getCurrentDevice();
    const bool wgmma = gWgmmaEnabled.load() && fusedWgmmaAvailable(device);
    if (wgmma) {
        launchFusedWgmma(a, ops.bf16x3, device, stream);
        gWgmmaRows += rows;
    } else if (ops.bf16x3) {
        launchFused<true, false>(a, stream);
    } else if (residual) {
        launchFused<false, true>(a, stream);
    } else {
        launchFused<false, false>(a, stream);
    }
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    select::sampledThresholdSettleKeys(rows, nb, m, outKeys, needsFallback, thresholdScratch,
                                       layout.thresholdBytes, stream);
    (ops.bf16x3 ? gBf16x3Rows : gTf32Rows) += rows;
}

void setFusedCandidatesEnabled(bool enabled) { gEnabled.store(enabled); }

bool fusedCandidatesEnabled() { return gEnabled.load(); }

void setFusedWgmmaEnabled(bool enabled) { gWgmmaEnabled.store(enabled); }

FusedCandidateRows fusedCandidateRows() {
    FusedCandidateRows r;
    r.tf32 = gTf32Rows.load();
    r.bf16x3 = gBf16x3Rows.load();
    r.wgmma = gWgmmaRows.load();
    return r;
}

}  // namespace gpu
}  // namespace faiss_ext
