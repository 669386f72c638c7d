// Data-parallel GNND (one build split over several devices): after each
// iteration the devices' copies of the raw lists are merged segment by
// segment. Both copies started the iteration equal (same sampling of the
// same lists) and differ only by the insertions of each device's joins, so
// the union of a segment holds every id at most twice.
#include "faiss_ext/gpu/impl/gnnd/GnndCommon.cuh"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

constexpr int kMergeWarps = 8;

/// One warp per (node, segment): the 64 entries of the two copies, sorted by
/// id so that the two entries of an id meet, one kept (the smaller distance,
/// NEW if either is), then sorted by (distance, id) and the first 32 written.
__global__ void mergeCopiesKernel(int64_t items, uint32_t* gIds, float* gDists,
                                  uint32_t* oIds, float* oDists, bool writeBack) {
    __shared__ float sk[kMergeWarps][2 * kSegment];
    __shared__ uint32_t si[kMergeWarps][2 * kSegment];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t item = int64_t(blockIdx.x) * kMergeWarps + warp;  // node * nseg + segment
    if (item >= items) return;
    const int64_t base = item * kSegment;
    float* keys = sk[warp];
    uint32_t* ids = si[warp];
    const uint32_t a = gIds[base + lane], b = oIds[base + lane];
    ids[lane] = a;
    keys[lane] = a == kEmptyId ? infinity() : gDists[base + lane];
    ids[kSegment + lane] = b;
    keys[kSegment + lane] = b == kEmptyId ? infinity() : oDists[base + lane];
    __syncwarp();
    warpBitonicSortBy(keys, ids, 2 * kSegment, lane,
                      [](float ka, uint32_t ia, float kb, uint32_t ib) {
                          const uint32_t ma = ia & kIdMask, mb = ib & kIdMask;
                          return ma < mb || (ma == mb && ka < kb);
                      });
    // decide first (reads only), then write
    bool drop[2];
    uint32_t keep[2];
    for (int h = 0; h < 2; ++h) {
        const int e = lane + h * kSegment;
        const uint32_t me = ids[e] & kIdMask;
        const bool real = me != kEmptyId;
        drop[h] = real && e > 0 && (ids[e - 1] & kIdMask) == me;
        const bool nextSame = real && e + 1 < 2 * kSegment && (ids[e + 1] & kIdMask) == me;
        keep[h] = ids[e] | (nextSame ? (ids[e + 1] & kNewFlag) : 0u);
    }
    __syncwarp();
    for (int h = 0; h < 2; ++h) {
        const int e = lane + h * kSegment;
        ids[e] = drop[h] ? kEmptyId : keep[h];
        if (drop[h]) keys[e] = infinity();
    }
    __syncwarp();
    warpBitonicSortBy(keys, ids, 2 * kSegment, lane,
                      [](float ka, uint32_t ia, float kb, uint32_t ib) {
                          return ka < kb || (ka == kb && (ia & kIdMask) < (ib & kIdMask));
                      });
    gIds[base + lane] = ids[lane];
    gDists[base + lane] = keys[lane];
    if (writeBack) {
        oIds[base + lane] = ids[lane];
        oDists[base + lane] = keys[lane];
    }
}

}  // namespace

void launchMergeCopies(cudaStream_t stream, int64_t n, int K, uint32_t* gIds, float* gDists,
                       uint32_t* oIds, float* oDists, bool writeBack) {
    const int64_t items = n * (K / kSegment);
    if (items == 0) return;
    const unsigned grid = unsigned((items + kMergeWarps - 1) / kMergeWarps);
    mergeCopiesKernel<<<grid, 32 * kMergeWarps, 0, stream>>>(items, gIds, gDists, oIds, oDists,
                                                                writeBack);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
