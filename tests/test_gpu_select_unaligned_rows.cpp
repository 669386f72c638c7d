// Row selections over distance tiles whose rows hold a number of entries
// that is not a multiple of 4 (a gathered filter subset of 900,001 vectors,
// an index of 1,000,003): the rows start 16-byte aligned (ld padded to a
// multiple of 4) and the selections read them with float4 loads, the last
// 1-3 entries one by one. The padding between rows is poisoned with values
// smaller than any entry, so an entry read past a row's end would be kept.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "DeviceArray.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/impl/select/RadixSelectRows.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"

using namespace faiss_ext::gpu::select;
using namespace faiss_ext::test;

namespace {

struct UnalignedRows {
    int64_t rows, n, ld;
    std::vector<float> dist;    // rows x ld, padding poisoned
    std::vector<float> colAdd;  // n
};

UnalignedRows makeRows(int64_t rows, int64_t n, uint32_t seed) {
    UnalignedRows t{rows, n, (n + 3) / 4 * 4, {}, {}};
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.f, 100.f);
    t.dist.assign(size_t(rows * t.ld), -1e30f);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) t.dist[size_t(r * t.ld + j)] = u(rng);
    }
    t.colAdd.resize(size_t(n));
    for (float& c : t.colAdd) c = u(rng);
    return t;
}

/// The columns of the k smallest dist + colAdd of row r (ties: smaller column).
std::vector<uint32_t> smallestColumns(const UnalignedRows& t, int64_t r, int64_t k) {
    std::vector<std::pair<float, uint32_t>> v(size_t(t.n));
    for (int64_t j = 0; j < t.n; ++j) {
        v[size_t(j)] = {t.dist[size_t(r * t.ld + j)] + t.colAdd[size_t(j)], uint32_t(j)};
    }
    std::partial_sort(v.begin(), v.begin() + k, v.end());
    std::vector<uint32_t> cols(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) cols[size_t(i)] = v[size_t(i)].second;
    return cols;
}

/// The rows and column terms of t on the device.
struct DeviceRows {
    DeviceArray<float> dist, colAdd;
    explicit DeviceRows(const UnalignedRows& t) : dist(t.dist.size()), colAdd(t.colAdd.size()) {
        if (dist.p) dist.upload(t.dist);
        if (colAdd.p) colAdd.upload(t.colAdd);
    }
    bool ok() const { return dist.p && colAdd.p; }
};

/// The columns of row r's k keys.
std::vector<uint32_t> columnsOf(const std::vector<uint64_t>& keys, int64_t r, int64_t k) {
    std::vector<uint32_t> cols(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) cols[size_t(i)] = uint32_t(keys[size_t(r * k + i)]);
    return cols;
}

std::string shape(int64_t n, int64_t k) {
    std::ostringstream s;
    s << "n " << n << " (ld " << (n + 3) / 4 * 4 << "), k " << k;
    return s.str();
}

}  // namespace

TEST(GpuSelectUnalignedRows, SampledThresholdKeysReadNothingPastARow) {
    FAISS_EXT_REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    const int64_t rows = sized<int64_t>(9, 3);
    for (int64_t n : {100001, 100002, 100003}) {
        const UnalignedRows t = makeRows(rows, n, uint32_t(n));
        const DeviceRows dev(t);
        ASSERT_TRUE(dev.ok());
        for (int64_t k : {10, 42}) {
            ASSERT_TRUE(sampledThresholdKeysApply(n, k)) << shape(n, k);
            DeviceArray<uint64_t> keys(size_t(rows * k));
            DeviceArray<uint8_t> flags(static_cast<size_t>(rows));
            const size_t bytes = sampledThresholdScratchBytes(rows, n, k);
            DeviceArray<char> scratch(bytes);
            ASSERT_TRUE(keys.p && flags.p && scratch.p) << shape(n, k);
            ASSERT_NO_THROW(sampledThresholdSelectKeys(dev.dist.p, t.ld, dev.colAdd.p, rows, n, k,
                                                       keys.p, flags.p, scratch.p, bytes,
                                                       nullptr));
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << shape(n, k);
            const std::vector<uint64_t> got = keys.download();
            const std::vector<uint8_t> f = flags.download();
            for (int64_t r = 0; r < rows; ++r) {
                ASSERT_EQ(f[size_t(r)], 0) << shape(n, k) << " row " << r << " flagged";
                EXPECT_EQ(columnsOf(got, r, k), smallestColumns(t, r, k))
                        << shape(n, k) << " row " << r;
            }
        }
    }
}

TEST(GpuSelectUnalignedRows, RadixSelectRowsReadNothingPastARow) {
    FAISS_EXT_REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    const int64_t rows = sized<int64_t>(9, 3);
    for (int64_t n : {5001, 5002, 5003}) {
        const UnalignedRows t = makeRows(rows, n, uint32_t(n));
        const DeviceRows dev(t);
        ASSERT_TRUE(dev.ok());
        for (int64_t k : {1, 10, 300}) {
            DeviceArray<uint64_t> keys(size_t(rows * k));
            DeviceArray<char> scratch(radixSelectScratchBytes(rows));
            ASSERT_TRUE(keys.p && scratch.p) << shape(n, k);
            ASSERT_NO_THROW(radixSelectRows(dev.dist.p, t.ld, dev.colAdd.p, 0, rows, n, k, keys.p,
                                            scratch.p, radixSelectScratchBytes(rows), nullptr));
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << shape(n, k);
            const std::vector<uint64_t> got = keys.download();
            for (int64_t r = 0; r < rows; ++r) {
                std::vector<uint32_t> cols = columnsOf(got, r, k);  // unsorted
                std::sort(cols.begin(), cols.end());
                std::vector<uint32_t> want = smallestColumns(t, r, k);
                std::sort(want.begin(), want.end());
                EXPECT_EQ(cols, want) << shape(n, k) << " row " << r;
            }
        }
    }
}
