// The warp merge of the fused few-query path's chunk lists
// (impl/flat/FewQueryMerge.h), called directly on keys built here so that its
// shapes do not depend on the GPU's SM count: rows of n distinct keys
// (chunk lists as the fused kernel writes them: each chunk's slice sorted,
// short chunks padded with distinct keys near the maximum) must give the kk
// smallest of each row, sorted, exactly as a sort on the host does.
#include "TestUtils.h"

#include "faiss_ext/gpu/impl/flat/FewQueryMerge.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace faiss_ext::test;

namespace {

constexpr uint64_t kMaxKey = ~uint64_t(0);

/// rows x n keys: row r holds n distinct keys made of a random float-like
/// high half (few distinct values: many equal distances, ids break the
/// ties) and a distinct id, sorted within each chunk of kk keys; the last
/// `pads` keys of each row are pads as the kernel writes them.
std::vector<uint64_t> chunkLists(int64_t rows, int64_t n, int64_t kk, int64_t pads,
                                 std::mt19937_64& rng) {
    std::vector<uint64_t> keys(size_t(rows * n));
    for (int64_t r = 0; r < rows; ++r) {
        std::vector<uint32_t> ids(static_cast<size_t>(n));
        std::iota(ids.begin(), ids.end(), 0u);
        std::shuffle(ids.begin(), ids.end(), rng);
        uint64_t* row = keys.data() + r * n;
        for (int64_t j = 0; j < n; ++j) {
            row[j] = j >= n - pads ? kMaxKey - 1 - uint64_t(j)
                                   : (uint64_t(rng() % 7) << 32) | ids[size_t(j)];
        }
        for (int64_t c = 0; c < n; c += kk) std::sort(row + c, row + std::min(n, c + kk));
    }
    return keys;
}

/// warpMergeLists on the device against a host sort; "" when they agree.
std::string mergeMatchesSort(const std::vector<uint64_t>& keys, int64_t rows, int64_t n,
                             int64_t kk) {
    void* dKeys = nullptr;
    void* dOut = nullptr;
    std::vector<uint64_t> got(size_t(rows * kk));
    cudaError_t err = cudaMalloc(&dKeys, sizeof(uint64_t) * keys.size());
    if (err == cudaSuccess) err = cudaMalloc(&dOut, sizeof(uint64_t) * got.size());
    if (err == cudaSuccess) {
        err = cudaMemcpy(dKeys, keys.data(), sizeof(uint64_t) * keys.size(),
                         cudaMemcpyHostToDevice);
        faiss_ext::test::syncAfterHostCopy();
    }
    if (err == cudaSuccess) {
        faiss_ext::gpu::warpMergeLists(static_cast<const uint64_t*>(dKeys), rows, n, kk,
                                       static_cast<uint64_t*>(dOut), nullptr);
        err = cudaMemcpy(got.data(), dOut, sizeof(uint64_t) * got.size(), cudaMemcpyDeviceToHost);
    }
    cudaFree(dKeys);
    cudaFree(dOut);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    for (int64_t r = 0; r < rows; ++r) {
        std::vector<uint64_t> want(keys.begin() + r * n, keys.begin() + (r + 1) * n);
        std::partial_sort(want.begin(), want.begin() + kk, want.end());
        for (int64_t j = 0; j < kk; ++j) {
            if (got[size_t(r * kk + j)] != want[size_t(j)]) {
                return "row " + std::to_string(r) + " rank " + std::to_string(j);
            }
        }
    }
    return "";
}

TEST(GpuFewQueryMerge, EqualsHostSortOnGrid) {
    FAISS_EXT_REQUIRE_GPU();
    std::mt19937_64 rng(kSeed);
    for (int64_t kk : {1, 2, 10, 31, 32}) {
        // n: one key, under a warp, a warp, one more, many batches per warp.
        for (int64_t chunks : {int64_t(1), int64_t(2), int64_t(3), int64_t(33), int64_t(652)}) {
            for (int64_t rows : {1, 5, 32}) {
                const int64_t n = chunks * kk;
                const std::vector<uint64_t> keys = chunkLists(rows, n, kk, 0, rng);
                EXPECT_EQ(mergeMatchesSort(keys, rows, n, kk), "")
                        << "kk=" << kk << " chunks=" << chunks << " rows=" << rows;
            }
        }
    }
}

TEST(GpuFewQueryMerge, PadsOfShortChunksStayLast) {
    FAISS_EXT_REQUIRE_GPU();
    std::mt19937_64 rng(kSeed + 1);
    for (int64_t kk : {10, 32}) {
        const int64_t n = 40 * kk, pads = kk - 3;  // the last chunk holds 3 real keys
        const std::vector<uint64_t> keys = chunkLists(4, n, kk, pads, rng);
        EXPECT_EQ(mergeMatchesSort(keys, 4, n, kk), "") << "kk=" << kk;
    }
}

TEST(GpuFewQueryMerge, RejectsKAboveAWarpOrN) {
    FAISS_EXT_REQUIRE_GPU();
    EXPECT_ANY_THROW(faiss_ext::gpu::warpMergeLists(nullptr, 1, 100, 33, nullptr, nullptr));
    EXPECT_ANY_THROW(faiss_ext::gpu::warpMergeLists(nullptr, 1, 5, 6, nullptr, nullptr));
    EXPECT_ANY_THROW(faiss_ext::gpu::warpMergeLists(nullptr, 1, 5, 0, nullptr, nullptr));
}

}  // namespace
