// Level two of Bi-level LSH on the GPU (Pan & Manocha 2011, docs/references.md,
// section 5.2): canonical projections of all vectors, p-stable codes per
// group and table, per table a stable radix sort by (table, group, Morton
// code, id) (two passes: by code, then by table and group), the buckets (runs
// of equal codes) as 64-bit keys with their intervals, and the GPU cuckoo
// hash table over all keys. The same tables as lsh::buildTablesCpu.
#include "faiss_ext/gpu/impl/lsh/LshEngine.h"

#include <faiss/impl/FaissAssert.h>

#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <cstdio>

namespace faiss_ext {
namespace gpu {
namespace lsh_impl {

namespace {

using namespace faiss_ext::lsh;

constexpr int kTile = 32;

/// out[i * P + p] = canonicalDot(proj_p, x_i): tiles of 32 rows x 32
/// projections staged through shared memory, each output accumulated in
/// dimension order.
__global__ void projectKernel(const float* __restrict__ x, int64_t n, int d,
                              const float* __restrict__ proj, int P, float* __restrict__ out) {
    __shared__ float xs[kTile][kTile + 1];
    __shared__ float ps[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t row0 = int64_t(blockIdx.x) * kTile;
    const int p0 = blockIdx.y * kTile;
    float acc = 0.f;
    for (int d0 = 0; d0 < d; d0 += kTile) {
        const int64_t r = row0 + ty;
        const int j = d0 + tx;
        xs[ty][tx] = (r < n && j < d) ? x[size_t(r) * d + j] : 0.f;
        ps[ty][tx] = (p0 + ty < P && j < d) ? proj[size_t(p0 + ty) * d + j] : 0.f;
        __syncthreads();
        const int lim = min(kTile, d - d0);
        for (int jj = 0; jj < lim; ++jj) acc = addRn(acc, mulRn(ps[tx][jj], xs[ty][jj]));
        __syncthreads();
    }
    const int64_t r = row0 + ty;
    if (r < n && p0 + tx < P) out[size_t(r) * P + p0 + tx] = acc;
}

__global__ void leafKernel(const uint8_t* __restrict__ rule, const float* __restrict__ vec,
                           const float* __restrict__ thr, int depth, int d,
                           const float* __restrict__ x, int64_t n, int32_t* __restrict__ group) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) group[i] = leafOfTree(rule, vec, thr, depth, d, x + size_t(i) * d);
}

/// Morton code of row i in table t: codes[t * n + i]; values c = t * n + i.
__global__ void codesKernel(const float* __restrict__ projOut, int64_t n, int L, int M, int bits,
                            int lattice,
                            const int32_t* __restrict__ group, const float* __restrict__ leafOffset,
                            const float* __restrict__ leafWidth, const float* __restrict__ bias,
                            uint64_t* __restrict__ codes, int32_t* __restrict__ vals) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= int64_t(L) * n) return;
    const int t = int(c / n);
    const int64_t i = c - int64_t(t) * n;
    const int g = group[i];
    const int LM = L * M;
    uint32_t u[kMaxProjections];
    float frac[kMaxProjections];
    latticeCoordinates(lattice, projOut + size_t(i) * LM + size_t(t) * M,
                       leafOffset + size_t(g) * LM + size_t(t) * M, leafWidth[g],
                       bias + size_t(t) * M, M, bits, u, frac);
    codes[c] = mortonCode(u, M, bits);
    vals[c] = int32_t(c);
}

__global__ void tableGroupKeysKernel(const int32_t* __restrict__ vals, int64_t total, int64_t n,
                                     int G, const int32_t* __restrict__ group,
                                     uint32_t* __restrict__ keys) {
    const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= total) return;
    const int64_t c = vals[p];
    const int t = int(c / n);
    keys[p] = uint32_t(t) * uint32_t(G) + uint32_t(group[c - int64_t(t) * n]);
}

__global__ void finishSortKernel(const int32_t* __restrict__ vals, int64_t total, int64_t n,
                                 const uint64_t* __restrict__ codes, int32_t* __restrict__ ids,
                                 uint64_t* __restrict__ sortedCodes) {
    const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= total) return;
    const int64_t c = vals[p];
    ids[p] = int32_t(c % n);
    sortedCodes[p] = codes[c];
}

__global__ void groupCountKernel(const int32_t* __restrict__ group, int64_t n,
                                 unsigned long long* __restrict__ counts) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&counts[group[i]], 1ull);
}

__global__ void runFlagsKernel(const int32_t* __restrict__ ids, const uint64_t* __restrict__ codes,
                               const int32_t* __restrict__ group, int64_t total, int64_t n,
                               uint8_t* __restrict__ flags) {
    const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (p >= total) return;
    bool start = (p % n) == 0;
    if (!start) start = codes[p] != codes[p - 1] || group[ids[p]] != group[ids[p - 1]];
    flags[p] = start ? 1 : 0;
}

__global__ void bucketKeysKernel(const int32_t* __restrict__ runStart, int64_t runs, int64_t total,
                                 int64_t n, const int32_t* __restrict__ ids,
                                 const uint64_t* __restrict__ codes,
                                 const int32_t* __restrict__ group, uint64_t salt,
                                 uint64_t* __restrict__ keys, BucketRange* __restrict__ ranges) {
    const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (k >= runs) return;
    const int64_t s = runStart[k];
    const int64_t e = k + 1 < runs ? runStart[k + 1] : total;
    const int t = int(s / n);
    keys[k] = bucketKey(t, group[ids[s]], codes[s], salt);
    ranges[k].start = s;
    ranges[k].count = e - s;
}


/// Grows the CUB passes' shared scratch to at least `bytes` (at least one).
void growScratch(DeviceVector<char>& temp, size_t bytes, const char* who, const char* what) {
    if (temp.size() == 0 || bytes > temp.size()) temp.allocate(std::max<size_t>(bytes, 1), who, what);
}

/// The Morton code of every (table, row) pair, codes[t n + i], and its sort
/// value t n + i, vals[t n + i], from the rows' canonical projections.
void makeCodes(const BiLevelLSHModel& model, const DeviceState& st, const int32_t* group,
               uint64_t* codes, int32_t* vals, cudaStream_t stream, const char* who) {
    const int64_t n = st.n;
    const int L = model.nTables, M = model.nProjections, LM = L * M;
    const int64_t total = int64_t(L) * n;
    DeviceVector<float> projOut;
    projOut.allocate(size_t(n) * LM, who, "projections");
    projectRows(st.vectors.data(), n, model.d, st.model.proj.data(), LM, projOut.data(), stream);
    codesKernel<<<blocksFor(total, 256), 256, 0, stream>>>(
        projOut.data(), n, L, M, model.bits, model.lattice, group, st.model.leafOffset.data(),
        st.model.leafWidth.data(), st.model.projBias.data(), codes, vals);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

/// Orders the sort values by (table, group, Morton code, id) in two stable
/// radix passes: by code (ties keep (table, id) order; the codes themselves
/// stay where they are), then by (table, group). The order ends in vals;
/// valsAlt is the passes' other buffer.
void sortByTableGroupCode(int L, int G, int64_t n, const int32_t* group,
                          DeviceVector<uint64_t>& codes, DeviceVector<int32_t>& vals,
                          DeviceVector<int32_t>& valsAlt, DeviceVector<char>& temp,
                          cudaStream_t stream, const char* who) {
    const int64_t total = int64_t(L) * n;
    {
        DeviceVector<uint64_t> codesAlt;
        codesAlt.allocate(total, who, "codes");
        size_t bytes = 0;
        FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, codes.data(),
                                                             codesAlt.data(), vals.data(),
                                                             valsAlt.data(), int(total), 0, 64,
                                                             stream));
        growScratch(temp, bytes, who, "sort");
        bytes = temp.size();
        FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), bytes, codes.data(),
                                                             codesAlt.data(), vals.data(),
                                                             valsAlt.data(), int(total), 0, 64,
                                                             stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));  // before codesAlt goes
    }
    DeviceVector<uint32_t> k2, k2Alt;
    k2.allocate(total, who, "sort keys");
    k2Alt.allocate(total, who, "sort keys");
    tableGroupKeysKernel<<<blocksFor(total, 256), 256, 0, stream>>>(valsAlt.data(), total, n, G,
                                                                    group, k2.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    int keyBits = 1;
    while ((uint64_t(1) << keyBits) < uint64_t(L) * uint64_t(G)) ++keyBits;
    size_t bytes = 0;
    FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k2.data(), k2Alt.data(),
                                                         valsAlt.data(), vals.data(), int(total),
                                                         0, keyBits, stream));
    growScratch(temp, bytes, who, "sort");
    bytes = temp.size();
    FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), bytes, k2.data(),
                                                         k2Alt.data(), valsAlt.data(), vals.data(),
                                                         int(total), 0, keyBits, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

/// groupStart[g] = the rows of groups before g (G + 1 offsets, on the host).
std::vector<int64_t> groupOffsets(const int32_t* group, int64_t n, int G, cudaStream_t stream,
                                  const char* who) {
    DeviceVector<unsigned long long> cnt;
    cnt.allocate(G, who, "group counts");
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(cnt.data(), 0, G * sizeof(unsigned long long), stream));
    groupCountKernel<<<blocksFor(n, 256), 256, 0, stream>>>(group, n, cnt.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    std::vector<unsigned long long> h(G);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(h.data(), cnt.data(), G * sizeof(unsigned long long),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<int64_t> groupStart(G + 1, 0);
    for (int g = 0; g < G; ++g) groupStart[g + 1] = groupStart[g] + int64_t(h[g]);
    return groupStart;
}

/// The buckets: the start of each run of equal (group, code) in a table of
/// the sorted order, into runStart (allocated here); returns their number.
int bucketRuns(const int32_t* sortedIds, const uint64_t* sortedCodes, const int32_t* group,
               int64_t total, int64_t n, DeviceVector<int32_t>& runStart,
               DeviceVector<char>& temp, cudaStream_t stream, const char* who) {
    DeviceVector<uint8_t> flags;
    DeviceVector<int> numRuns;
    flags.allocate(total, who, "bucket flags");
    runStart.allocate(total, who, "buckets");
    numRuns.allocate(1, who, "buckets");
    runFlagsKernel<<<blocksFor(total, 256), 256, 0, stream>>>(sortedIds, sortedCodes, group, total,
                                                              n, flags.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    thrust::counting_iterator<int32_t> it(0);
    size_t bytes = 0;
    FAISS_EXT_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, bytes, it, flags.data(),
                                                    runStart.data(), numRuns.data(), int(total),
                                                    stream));
    growScratch(temp, bytes, who, "select");
    bytes = temp.size();
    FAISS_EXT_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.data(), bytes, it, flags.data(),
                                                    runStart.data(), numRuns.data(), int(total),
                                                    stream));
    int runs = 0;
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(&runs, numRuns.data(), sizeof(int), cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return runs;
}

/// Each bucket's 64-bit key and interval, with a salt that leaves no two
/// keys equal (the cuckoo table holds distinct keys); returns the salt.
uint64_t distinctBucketKeys(const int32_t* runStart, int runs, int64_t total, int64_t n,
                            const int32_t* sortedIds, const uint64_t* sortedCodes,
                            const int32_t* group, uint64_t* keys, BucketRange* ranges,
                            cudaStream_t stream) {
    uint64_t salt = 0;
    for (int round = 0;; ++round) {
        FAISS_THROW_IF_NOT_MSG(round < 64, "GpuIndexBiLevelLSH: bucket keys keep colliding");
        bucketKeysKernel<<<blocksFor(runs, 256), 256, 0, stream>>>(
            runStart, runs, total, n, sortedIds, sortedCodes, group, salt, keys, ranges);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        if (DeviceCuckooTable::countRepeatedKeys(keys, size_t(runs), stream) == 0) return salt;
        salt = mix64(salt + 0x73616c74ULL);
    }
}

}  // namespace

void DeviceModel::upload(const BiLevelLSHModel& m, cudaStream_t stream) {
    lsh_impl::upload(&nodeRule, m.nodeRule, stream, "RP-tree");
    lsh_impl::upload(&nodeVec, m.nodeVec, stream, "RP-tree");
    lsh_impl::upload(&nodeThreshold, m.nodeThreshold, stream, "RP-tree");
    lsh_impl::upload(&leafWidth, m.leafWidth, stream, "groups");
    lsh_impl::upload(&leafOffset, m.leafOffset, stream, "groups");
    lsh_impl::upload(&proj, m.proj, stream, "projections");
    lsh_impl::upload(&projBias, m.projBias, stream, "projections");
}

void projectRows(const float* dX, int64_t n, int d, const float* dProj, int P, float* dOut,
                 cudaStream_t stream) {
    if (n == 0 || P == 0) return;
    int64_t done = 0;
    const int64_t maxRowsPerLaunch = int64_t(65535) * kTile * 1000;  // grid.x limit is 2^31 - 1
    while (done < n) {
        const int64_t rows = std::min(n - done, maxRowsPerLaunch);
        dim3 grid(unsigned((rows + kTile - 1) / kTile), unsigned((P + kTile - 1) / kTile));
        projectKernel<<<grid, dim3(kTile, kTile), 0, stream>>>(dX + size_t(done) * d, rows, d, dProj,
                                                              P, dOut + size_t(done) * P);
        FAISS_EXT_CUDA_CHECK_LAUNCH();
        done += rows;
    }
}

void leafOfRows(const DeviceModel& dm, const BiLevelLSHModel& model, const float* dX, int64_t n,
                int32_t* dGroup, cudaStream_t stream) {
    if (n == 0) return;
    leafKernel<<<blocksFor(n, 128), 128, 0, stream>>>(dm.nodeRule.data(), dm.nodeVec.data(),
                                                      dm.nodeThreshold.data(), model.depth, model.d,
                                                      dX, n, dGroup);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
}

void buildTablesGpu(const BiLevelLSHModel& model, const BiLevelLSHConfig& config, DeviceState* st,
                    cudaStream_t stream, bool verbose) {
    const char* who = "GpuIndexBiLevelLSH::add";
    const double t0 = lshWallSeconds();
    const int64_t n = st->n;
    const int L = model.nTables, G = model.groups();
    const int64_t total = int64_t(L) * n;
    FAISS_THROW_IF_NOT_FMT(total < (int64_t(1) << 31) - 1,
                           "%s: L x ntotal must be < 2^31 (L = %d, ntotal = %lld)", who, L,
                           (long long)n);
    DeviceVector<int32_t> group;
    group.allocate(n, who, "groups");
    leafOfRows(st->model, model, st->vectors.data(), n, group.data(), stream);

    DeviceVector<uint64_t> codes;
    DeviceVector<int32_t> vals, valsAlt;
    codes.allocate(total, who, "codes");
    vals.allocate(total, who, "sort values");
    valsAlt.allocate(total, who, "sort values");
    makeCodes(model, *st, group.data(), codes.data(), vals.data(), stream, who);
    DeviceVector<char> temp;  // the CUB passes' scratch, grown as each needs
    sortByTableGroupCode(L, G, n, group.data(), codes, vals, valsAlt, temp, stream, who);
    DeviceVector<int32_t> sortedIds;
    DeviceVector<uint64_t> sortedCodes;
    sortedIds.allocate(total, who, "sorted ids");
    sortedCodes.allocate(total, who, "sorted codes");
    finishSortKernel<<<blocksFor(total, 256), 256, 0, stream>>>(vals.data(), total, n, codes.data(),
                                                                sortedIds.data(), sortedCodes.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    valsAlt.release();
    codes.release();

    std::vector<int64_t> groupStart = groupOffsets(group.data(), n, G, stream, who);
    DeviceVector<int32_t> runStart;
    const int runs = bucketRuns(sortedIds.data(), sortedCodes.data(), group.data(), total, n,
                                runStart, temp, stream, who);
    temp.release();
    DeviceVector<uint64_t> keys;
    DeviceVector<lsh::BucketRange> ranges;
    keys.allocate(runs, who, "bucket keys");
    ranges.allocate(runs, who, "bucket ranges");
    const uint64_t salt = distinctBucketKeys(runStart.data(), runs, total, n, sortedIds.data(),
                                             sortedCodes.data(), group.data(), keys.data(),
                                             ranges.data(), stream);
    DeviceCuckooTable cuckoo;
    cuckoo.build(keys.data(), size_t(runs), config.cuckooSubTables, config.cuckooMaxLoad,
                 config.seed ^ 0x637563ULL, stream);
    DeviceVector<int64_t> dGroupStart;
    lsh_impl::upload(&dGroupStart, groupStart, stream, "group offsets");
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));

    st->sortedIds.swap(sortedIds);
    st->sortedCodes.swap(sortedCodes);
    st->groupStart.swap(dGroupStart);
    st->ranges.swap(ranges);
    st->cuckoo.swap(cuckoo);
    st->keySalt = salt;
    st->numKeys = size_t(runs);
    st->groupStartHost = groupStart;
    if (verbose)
        std::printf("GpuIndexBiLevelLSH tables: %lld vectors, %d tables, %d bucket keys, cuckoo "
                    "load %.3f (%d attempts, %d growths), %.3f s\n",
                    (long long)n, L, runs, st->cuckoo.load(), st->cuckoo.attempts(),
                    st->cuckoo.growths(), lshWallSeconds() - t0);
}

}  // namespace lsh_impl
}  // namespace gpu
}  // namespace faiss_ext
