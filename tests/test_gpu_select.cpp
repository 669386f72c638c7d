// The quick multi-select kernels alone against an exact CPU selection of
// (value, id) keys: both the warp-per-row and the block-per-row variants,
// float and key sources, adversarial rows (equal values, sorted, few values).
#include "TestUtils.h"

#include "faiss_ext/gpu/impl/select/QuickMultiSelect.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

using namespace faiss_ext::test;
namespace sel = faiss_ext::gpu::select;

namespace {

uint64_t hostKey(float v, uint32_t idx) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (uint64_t(u) << 32) | idx;
}

enum class Pattern { Random, AllEqual, Ascending, Descending, FewValues };

std::vector<float> makeRows(int64_t rows, int64_t n, Pattern p, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-10.f, 10.f);
    std::vector<float> v(rows * n);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
            float x;
            switch (p) {
                case Pattern::Random: x = u(rng); break;
                case Pattern::AllEqual: x = 1.5f; break;
                case Pattern::Ascending: x = float(j); break;
                case Pattern::Descending: x = float(n - j); break;
                default: x = float(rng() % 3); break;
            }
            v[r * n + j] = x;
        }
    }
    return v;
}

void runSelect(int64_t rows, int64_t n, int64_t k, Pattern p, int warpPerRow, bool keySource,
               bool prefilter) {
    auto v = makeRows(rows, n, p, kSeed + n + k);
    float* dv;
    uint64_t *dkeys = nullptr, *out, *a1, *a2;
    ASSERT_EQ(cudaMalloc((void**)&dv, sizeof(float) * rows * n), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&out, sizeof(uint64_t) * rows * k), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&a1, sizeof(uint64_t) * rows * n), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&a2, sizeof(uint64_t) * rows * n), cudaSuccess);
    cudaMemcpy(dv, v.data(), sizeof(float) * rows * n, cudaMemcpyHostToDevice);
    faiss_ext::test::syncAfterHostCopy();
    std::vector<uint64_t> keys(rows * n);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) keys[r * n + j] = hostKey(v[r * n + j], uint32_t(j));
    sel::SelectArgs a;
    if (keySource) {
        ASSERT_EQ(cudaMalloc((void**)&dkeys, sizeof(uint64_t) * rows * n), cudaSuccess);
        cudaMemcpy(dkeys, keys.data(), sizeof(uint64_t) * rows * n, cudaMemcpyHostToDevice);
        faiss_ext::test::syncAfterHostCopy();
        a.keys = dkeys;
        a.keyStride = n;
    } else {
        a.dist = dv;
        a.ld = n;
    }
    a.n = n;
    a.rows = rows;
    a.k = k;
    a.out = out;
    a.outStride = k;
    a.aux1 = a1;
    a.aux2 = a2;
    a.auxStride = n;
    uint64_t* pivots = nullptr;
    unsigned long long* counts = nullptr;
    if (prefilter && !keySource) {
        ASSERT_EQ(cudaMalloc((void**)&pivots, sizeof(uint64_t) * rows), cudaSuccess);
        ASSERT_EQ(cudaMalloc((void**)&counts, sizeof(unsigned long long) * rows), cudaSuccess);
        sel::filterFloatRows(a, pivots, counts, 0);
        a.prefilteredCount = counts;
    }
    sel::quickMultiSelect(a, 0, warpPerRow);
    size_t tempBytes = sel::sortKeyRowsTempBytes(rows, k);
    void* temp = nullptr;
    if (tempBytes) {
        ASSERT_EQ(cudaMalloc((void**)&temp, tempBytes), cudaSuccess);
    }
    sel::sortKeyRows(out, rows, k, temp, tempBytes, 0);
    std::vector<uint64_t> got(rows * k);
    ASSERT_EQ(cudaMemcpy(got.data(), out, sizeof(uint64_t) * rows * k, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t r = 0; r < rows; ++r) {
        std::vector<uint64_t> row(keys.begin() + r * n, keys.begin() + (r + 1) * n);
        std::partial_sort(row.begin(), row.begin() + k, row.end());
        for (int64_t j = 0; j < k; ++j) {
            ASSERT_EQ(got[r * k + j], row[j])
                    << "row " << r << " rank " << j << " n=" << n << " k=" << k
                    << " pattern=" << int(p) << " warpPerRow=" << warpPerRow
                    << " keySource=" << keySource << " prefilter=" << prefilter
                    << " seed=" << kSeed;
        }
    }
    cudaFree(dv);
    cudaFree(out);
    cudaFree(a1);
    cudaFree(a2);
    if (dkeys) cudaFree(dkeys);
    if (temp) cudaFree(temp);
    if (pivots) cudaFree(pivots);
    if (counts) cudaFree(counts);
}

}  // namespace

TEST(QuickMultiSelect, GridOfShapesAndPatterns) {
    FAISS_EXT_REQUIRE_GPU();
    for (int warp : {1, 0}) {
        for (int source : {0, 1, 2}) {  // floats, floats prefiltered, keys
            bool keySource = source == 2, prefilter = source == 1;
            for (Pattern p : {Pattern::Random, Pattern::AllEqual, Pattern::Ascending,
                              Pattern::Descending, Pattern::FewValues}) {
                for (auto nk : std::vector<std::pair<int64_t, int64_t>>{
                             {1, 1}, {100, 1}, {100, 100}, {8192, 1}, {8192, 2}, {8192, 31},
                             {8192, 32}, {8192, 33}, {8192, 256}, {8192, 1024}, {8192, 2049},
                             {8192, 8192}, {100000, 10}, {100000, 4097}}) {
                    // Sanitizer-sized: one block per row, or two warps sharing a block.
                    int64_t rows = smallTests() ? (warp ? 2 : 1) : nk.first >= 100000 ? 3 : 7;
                    runSelect(rows, nk.first, nk.second, p, warp, keySource, prefilter);
                    if (HasFatalFailure()) return;
                }
            }
        }
    }
}

// A small grid that still takes every code path (both group shapes, all three
// sources, the filter's vector and tail loops, the multi-select passes and the
// stack), quick enough to run under compute-sanitizer racecheck.
TEST(QuickMultiSelect, SmallGridForSanitizers) {
    FAISS_EXT_REQUIRE_GPU();
    for (int warp : {1, 0}) {
        for (int source : {0, 1, 2}) {
            for (auto nk : std::vector<std::pair<int64_t, int64_t>>{
                         {40, 7}, {4099, 3}, {4099, 300}, {20000, 64}}) {
                runSelect(3, nk.first, nk.second, Pattern::Random, warp, source == 2, source == 1);
                runSelect(2, nk.first, nk.second, Pattern::FewValues, warp, source == 2,
                          source == 1);
                if (HasFatalFailure()) return;
            }
        }
    }
}
