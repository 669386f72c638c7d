// remove_ids on GpuIndexQuickSelectFlat against faiss::IndexFlat doing the
// same removals (renumbering semantics), through faiss::IndexIDMap2 (ids
// kept), with host storage, adds after removals, and bad selectors.
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::GpuIndexQuickSelectFlatConfig;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

/// The stored vectors and a search of xq agree with the CPU index.
void expectSameAsCpu(const GpuIndexQuickSelectFlat& gpu, const faiss::IndexFlat& cpu,
                     const std::vector<float>& xq, int64_t k, const std::string& what) {
    ASSERT_EQ(gpu.ntotal, cpu.ntotal) << what;
    const int d = gpu.d;
    std::vector<float> ours(size_t(gpu.ntotal) * d), theirs(size_t(cpu.ntotal) * d);
    gpu.reconstruct_n(0, gpu.ntotal, ours.data());
    cpu.reconstruct_n(0, cpu.ntotal, theirs.data());
    EXPECT_EQ(ours, theirs) << what;
    const int64_t nq = int64_t(xq.size()) / d;
    std::vector<float> D(size_t(nq * k)), refD(size_t(nq * k));
    std::vector<int64_t> I(size_t(nq * k)), refI(size_t(nq * k));
    gpu.search(nq, xq.data(), k, D.data(), I.data());
    cpu.search(nq, xq.data(), k, refD.data(), refI.data());
    EXPECT_EQ(compareKnn(nq, k, D.data(), I.data(), refD.data(), refI.data(),
                         cpu.metric_type == faiss::METRIC_INNER_PRODUCT),
              "")
            << what;
}

void removeBoth(GpuIndexQuickSelectFlat& gpu, faiss::IndexFlat& cpu, const faiss::IDSelector& sel,
                const std::string& what) {
    const size_t ours = gpu.remove_ids(sel);
    const size_t theirs = cpu.remove_ids(sel);
    EXPECT_EQ(ours, theirs) << what;
}

}  // namespace

TEST(GpuRemoveIds, MatchesIndexFlatForEachSelectorAndStorage) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24;
    const int64_t n = 5000;
    const auto xb = clusteredVectors(n, d, 10, kSeed);
    const auto xq = clusteredVectors(40, d, 10, kSeed + 1);
    for (auto storage : {faiss_ext::gpu::VectorStorage::Device, faiss_ext::gpu::VectorStorage::Host}) {
        for (FlatMetric m : {FlatMetric::L2, FlatMetric::InnerProduct}) {
            GpuIndexQuickSelectFlatConfig cfg;
            cfg.storage = storage;
            GpuIndexQuickSelectFlat gpu(&res, d, m, cfg);
            faiss::IndexFlat cpu(d, faiss_ext::toFaissMetric(m));
            gpu.add(n, xb.data());
            cpu.add(n, xb.data());
            const std::string w = std::string(storage == faiss_ext::gpu::VectorStorage::Host
                                                      ? "host" : "device") +
                                  " " + faiss_ext::flatMetricName(m);
            faiss::IDSelectorRange range(100, 600);
            removeBoth(gpu, cpu, range, w + " range");
            expectSameAsCpu(gpu, cpu, xq, 10, w + " after range");
            std::vector<int64_t> ids{0, 7, 7, 4000, 99999, -3};
            faiss::IDSelectorArray array(ids.size(), ids.data());
            removeBoth(gpu, cpu, array, w + " array");
            expectSameAsCpu(gpu, cpu, xq, 10, w + " after array");
            std::vector<uint8_t> bits(size_t(n / 8 + 1));
            std::mt19937 rng(kSeed);
            for (auto& b : bits) b = uint8_t(rng() & rng());  // ~ a quarter of the bits
            faiss::IDSelectorBitmap bitmap(bits.size(), bits.data());
            removeBoth(gpu, cpu, bitmap, w + " bitmap");
            expectSameAsCpu(gpu, cpu, xq, 10, w + " after bitmap");
            faiss::IDSelectorRange nothing(n * 2, n * 3);
            removeBoth(gpu, cpu, nothing, w + " nothing");
            gpu.add(500, xb.data());  // adds after removals append
            cpu.add(500, xb.data());
            expectSameAsCpu(gpu, cpu, xq, 10, w + " after add");
            faiss::IDSelectorAll all;
            removeBoth(gpu, cpu, all, w + " all");
            EXPECT_EQ(gpu.ntotal, 0);
            gpu.add(300, xb.data());
            cpu.add(300, xb.data());
            expectSameAsCpu(gpu, cpu, xq, 5, w + " refilled");
        }
    }
}

TEST(GpuRemoveIds, IndexIDMap2KeepsIdsAcrossRemovals) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const int64_t n = 3000;
    const auto xb = clusteredVectors(n, d, 10, kSeed);
    std::vector<int64_t> ids(n);
    for (int64_t i = 0; i < n; ++i) ids[i] = 1000000 + 3 * i;
    GpuIndexQuickSelectFlat gpu(&res, d, FlatMetric::L2);
    faiss::IndexIDMap2 mapped(&gpu);
    mapped.add_with_ids(n, xb.data(), ids.data());
    faiss::IndexFlat cpuFlat(d, faiss::METRIC_L2);
    faiss::IndexIDMap2 cpu(&cpuFlat);
    cpu.add_with_ids(n, xb.data(), ids.data());
    faiss::IDSelectorRange gone(1000000 + 3 * 500, 1000000 + 3 * 1500);  // 1000 ids
    EXPECT_EQ(mapped.remove_ids(gone), 1000u);
    EXPECT_EQ(cpu.remove_ids(gone), 1000u);
    std::vector<float> D(n / 10 * 5), refD(n / 10 * 5);
    std::vector<int64_t> I(n / 10 * 5), refI(n / 10 * 5);
    // Queries apart from the stored vectors: a self match's distance is 0
    // only up to the GEMM form's rounding (|q|^2 + |x|^2 - 2 q.x).
    const auto xq = clusteredVectors(n / 10, d, 10, kSeed + 1);
    mapped.search(n / 10, xq.data(), 5, D.data(), I.data());
    cpu.search(n / 10, xq.data(), 5, refD.data(), refI.data());
    EXPECT_EQ(compareKnn(n / 10, 5, D.data(), I.data(), refD.data(), refI.data(), false), "");
    for (int64_t id : I) EXPECT_FALSE(gone.is_member(id)) << id;
    std::vector<float> v(d);
    mapped.reconstruct(1000000 + 3 * 2000, v.data());
    EXPECT_EQ(v, std::vector<float>(xb.begin() + 2000 * d, xb.begin() + 2001 * d));
}

TEST(GpuRemoveIds, BadSelectorLeavesTheIndexUnchanged) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8;
    const auto xb = clusteredVectors(400, d, 4, kSeed);
    GpuIndexQuickSelectFlat gpu(&res, d, FlatMetric::L2);
    gpu.add(400, xb.data());
    faiss::IDSelectorBitmap nullBitmap(10, nullptr);
    EXPECT_THROW(gpu.remove_ids(nullBitmap), faiss::FaissException);
    EXPECT_EQ(gpu.ntotal, 400);
    std::vector<float> back(size_t(400) * d);
    gpu.reconstruct_n(0, 400, back.data());
    EXPECT_EQ(back, xb);
}
