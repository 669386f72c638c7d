// index_cpu_to_gpu_multiple: replicas (faiss::IndexReplicas) and shards
// (faiss::IndexShards) of our GPU indexes on several devices. Sharded and
// replicated searches give the results of one GPU index and of faiss::IndexFlat
// (ties aside); adds through the wrappers work as FAISS's wrappers allow;
// index_gpu_to_cpu gives the input back; bad arguments throw before anything
// is built, and a copy that fails frees those already made.
//
// Each case runs twice: on devices {0, 1} (skipped visibly below 2 GPUs) and
// on device 0 listed twice (one GPU suffices), each entry with its own
// StandardGpuResources.
#include "TestUtils.h"

#include "faiss_ext/CpuConvertible.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexReplicas.h>
#include <faiss/IndexShards.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace faiss_ext::test;
using faiss_ext::gpu::GpuMultipleClonerOptions;
using faiss_ext::gpu::GpuResourcesProvider;
using faiss_ext::gpu::StandardGpuResources;
using faiss_ext::gpu::index_cpu_to_gpu;
using faiss_ext::gpu::index_cpu_to_gpu_multiple;
using faiss_ext::gpu::index_gpu_to_cpu;

namespace {

struct Result {
    std::vector<float> D;
    std::vector<int64_t> I;
};

Result searchAll(const faiss::Index* idx, const std::vector<float>& xq, int64_t nq, int64_t k) {
    Result r{std::vector<float>(nq * k), std::vector<int64_t>(nq * k)};
    idx->search(nq, xq.data(), k, r.D.data(), r.I.data());
    return r;
}

/// What faiss::IndexReplicas does with 2 members: the first half of the
/// queries on one, the second half on the other, each as its own batch. For
/// approximate indexes whose per-query seeds depend on the position in the
/// batch (GNND), this is the single-GPU result a 2-way IndexReplicas must
/// reproduce exactly.
Result searchInHalves(const faiss::Index* idx, const std::vector<float>& xq, int64_t nq,
                      int64_t k) {
    const int64_t half = (nq + 1) / 2;
    std::vector<float> q1(xq.begin(), xq.begin() + half * idx->d);
    std::vector<float> q2(xq.begin() + half * idx->d, xq.begin() + nq * idx->d);
    Result a = searchAll(idx, q1, half, k), b = searchAll(idx, q2, nq - half, k);
    a.D.insert(a.D.end(), b.D.begin(), b.D.end());
    a.I.insert(a.I.end(), b.I.begin(), b.I.end());
    return a;
}

/// Recall@k of (I) against the exact top k of `exact` (an IndexFlat search
/// (refD)), a returned id counting when its exact squared L2 distance is at
/// most the k-th exact one (ties count).
double recallL2(const std::vector<float>& xb, const std::vector<float>& xq, int d, int64_t nq,
                int64_t k, const Result& got, const Result& exact) {
    int64_t hits = 0;
    for (int64_t q = 0; q < nq; ++q) {
        const float kth = exact.D[q * k + k - 1];
        for (int64_t j = 0; j < k; ++j) {
            int64_t id = got.I[q * k + j];
            if (id < 0) continue;
            double s = 0;
            for (int c = 0; c < d; ++c) {
                double t = double(xq[q * d + c]) - xb[id * d + c];
                s += t * t;
            }
            if (s <= kth * (1 + 1e-5) + 1e-6) ++hits;
        }
    }
    return double(hits) / double(nq * k);
}

/// The device lists a case runs on, and why it is skipped (or "").
struct Devices {
    std::vector<int> ids;
    std::string skip;
};

Devices twoGpus() {
    int n = faiss_ext::gpu::getNumDevices();
    if (n < 2) return {{0, 1}, "needs 2 GPUs (" + std::to_string(n) + " visible)"};
    return {{0, 1}, ""};
}

Devices gpuZeroTwice() {
    if (!haveGpu()) return {{0, 0}, "needs a GPU (none visible)"};
    return {{0, 0}, ""};
}

#define FAISS_EXT_REQUIRE(devs)                               \
    do {                                                      \
        if (!(devs).skip.empty()) GTEST_SKIP() << (devs).skip; \
    } while (0)

/// One StandardGpuResources per entry of the device list.
struct ResourcesPerDevice {
    std::vector<std::unique_ptr<StandardGpuResources>> owned;
    std::vector<GpuResourcesProvider*> providers;
    explicit ResourcesPerDevice(size_t n) {
        for (size_t i = 0; i < n; ++i) {
            owned.emplace_back(new StandardGpuResources());
            providers.push_back(owned.back().get());
        }
    }
};

GpuMultipleClonerOptions shardOptions(bool shard) {
    GpuMultipleClonerOptions o;
    o.shard = shard;
    return o;
}

/// The flat cases: factory string, metric, whether larger is better.
struct FlatCase {
    const char* desc;
    faiss::MetricType metric;
    bool ip;
};
const FlatCase kFlatCases[] = {
    {"QSFlat", faiss::METRIC_L2, false},
    {"QSFlat", faiss::METRIC_INNER_PRODUCT, true},
    {"QSFlatCosine", faiss::METRIC_L2, true},
    {"IDMap,QSFlat", faiss::METRIC_L2, false},
    {"IDMap2,QSFlat", faiss::METRIC_INNER_PRODUCT, true},
};

/// Sharded and replicated flat indexes against IndexFlat and one GPU index,
/// and index_gpu_to_cpu back to the input.
void checkFlatSearchAndRoundTrip(const std::vector<int>& devices) {
    const int d = 32;
    const int64_t nb = 6001, nq = 50;  // odd nb: shards of unequal sizes
    auto xb = clusteredVectors(nb, d, 20, kSeed);
    auto xq = clusteredVectors(nq, d, 20, kSeed + 1);
    std::vector<int64_t> ids(nb);
    for (int64_t i = 0; i < nb; ++i) ids[i] = 5000 + 3 * i;
    ResourcesPerDevice res(devices.size());
    StandardGpuResources single;
    for (const FlatCase& c : kFlatCases) {
        for (bool shard : {true, false}) {
            SCOPED_TRACE(std::string(c.desc) + (c.ip ? " IP" : " L2") +
                         (shard ? " shard" : " replicate") + ", seed " + std::to_string(kSeed));
            std::unique_ptr<faiss::Index> cpu(faiss_ext::index_factory(d, c.desc, c.metric));
            if (std::string(c.desc).rfind("IDMap", 0) == 0) {
                cpu->add_with_ids(nb, xb.data(), ids.data());
            } else {
                cpu->add(nb, xb.data());
            }
            std::unique_ptr<faiss::Index> one(index_cpu_to_gpu(&single, 0, cpu.get()));
            GpuMultipleClonerOptions opts = shardOptions(shard);
            std::unique_ptr<faiss::Index> multi(
                    index_cpu_to_gpu_multiple(res.providers, devices, cpu.get(), &opts));
            ASSERT_EQ(multi->ntotal, nb);
            if (shard) {
                auto sh = dynamic_cast<faiss::IndexShards*>(multi.get());
                ASSERT_NE(sh, nullptr);
                ASSERT_EQ(sh->count(), 2);
                EXPECT_EQ(sh->at(0)->ntotal, nb / 2);
                EXPECT_EQ(sh->at(1)->ntotal, nb - nb / 2);
            } else {
                auto rep = dynamic_cast<faiss::IndexReplicas*>(multi.get());
                ASSERT_NE(rep, nullptr);
                ASSERT_EQ(rep->count(), 2);
                EXPECT_EQ(rep->at(1)->ntotal, nb);
            }
            for (int64_t k : {1, 10, 100}) {
                SCOPED_TRACE("k " + std::to_string(k));
                Result rc = searchAll(cpu.get(), xq, nq, k);
                Result r1 = searchAll(one.get(), xq, nq, k);
                Result rm = searchAll(multi.get(), xq, nq, k);
                EXPECT_EQ(compareKnn(nq, k, rm.D.data(), rm.I.data(), rc.D.data(), rc.I.data(),
                                     c.ip),
                          "");
                EXPECT_EQ(compareKnn(nq, k, rm.D.data(), rm.I.data(), r1.D.data(), r1.I.data(),
                                     c.ip),
                          "");
            }
            // back to the CPU: one index equal to the input
            std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(multi.get()));
            ASSERT_EQ(back->ntotal, nb);
            const faiss::Index* inner = back.get();
            if (auto m = dynamic_cast<const faiss::IndexIDMap*>(back.get())) {
                auto cm = dynamic_cast<const faiss::IndexIDMap*>(cpu.get());
                ASSERT_NE(cm, nullptr);
                EXPECT_EQ(typeid(*m), typeid(*cm));
                EXPECT_EQ(m->id_map, cm->id_map);
                inner = m->index;
            }
            if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(inner)) {
                EXPECT_EQ(pt->chain.size(), 1u);
                inner = pt->index;
            }
            auto flat = dynamic_cast<const faiss::IndexFlat*>(inner);
            ASSERT_NE(flat, nullptr) << "index_gpu_to_cpu gave " << typeid(*inner).name();
            EXPECT_EQ(flat->ntotal, nb);
            Result rb = searchAll(back.get(), xq, nq, 10);
            Result rc = searchAll(cpu.get(), xq, nq, 10);
            EXPECT_EQ(compareKnn(nq, 10, rb.D.data(), rb.I.data(), rc.D.data(), rc.I.data(), c.ip),
                      "");
            if (inner == back.get() || dynamic_cast<const faiss::IndexIDMap*>(back.get())) {
                // plain flat storage: the very same vectors come back
                auto cpuFlat = dynamic_cast<const faiss::IndexFlat*>(
                        dynamic_cast<const faiss::IndexIDMap*>(cpu.get())
                                ? dynamic_cast<const faiss::IndexIDMap*>(cpu.get())->index
                                : cpu.get());
                ASSERT_NE(cpuFlat, nullptr);
                EXPECT_EQ(flat->codes, cpuFlat->codes);
            }
        }
    }
}

/// Adds through the wrappers: an empty sharded flat index takes one add
/// (IndexShards with successive ids takes only one); a sharded IndexIDMap and
/// a replicated flat index take adds at any time.
void checkAdds(const std::vector<int>& devices) {
    const int d = 16;
    const int64_t nb = 3000, nq = 40, k = 10;
    auto xb = clusteredVectors(2 * nb, d, 12, kSeed + 2);
    auto xq = clusteredVectors(nq, d, 12, kSeed + 3);
    ResourcesPerDevice res(devices.size());
    SCOPED_TRACE("seed " + std::to_string(kSeed + 2));

    {  // sharded flat, empty at the start
        faiss::IndexFlat cpu(d, faiss::METRIC_L2);
        GpuMultipleClonerOptions opts = shardOptions(true);
        std::unique_ptr<faiss::Index> multi(
                index_cpu_to_gpu_multiple(res.providers, devices, &cpu, &opts));
        ASSERT_EQ(multi->ntotal, 0);
        Result empty = searchAll(multi.get(), xq, nq, k);
        EXPECT_EQ(empty.I, std::vector<int64_t>(nq * k, -1));
        multi->add(nb, xb.data());
        cpu.add(nb, xb.data());
        ASSERT_EQ(multi->ntotal, nb);
        auto sh = dynamic_cast<faiss::IndexShards*>(multi.get());
        ASSERT_NE(sh, nullptr);
        EXPECT_EQ(sh->at(0)->ntotal + sh->at(1)->ntotal, nb);
        Result rc = searchAll(&cpu, xq, nq, k), rm = searchAll(multi.get(), xq, nq, k);
        EXPECT_EQ(compareKnn(nq, k, rm.D.data(), rm.I.data(), rc.D.data(), rc.I.data(), false), "");
        // FAISS's rule for successive ids: a second add is refused, nothing changes
        EXPECT_THROW(multi->add(nb, xb.data() + nb * d), faiss::FaissException);
        EXPECT_EQ(multi->ntotal, nb);
    }
    {  // sharded IndexIDMap: add_with_ids and add after the copy
        faiss::IndexIDMap cpu(new faiss::IndexFlat(d, faiss::METRIC_L2));
        cpu.own_fields = true;
        std::vector<int64_t> ids(2 * nb);
        for (int64_t i = 0; i < 2 * nb; ++i) ids[i] = 100000 - 7 * i;
        cpu.add_with_ids(nb, xb.data(), ids.data());
        GpuMultipleClonerOptions opts = shardOptions(true);
        std::unique_ptr<faiss::Index> multi(
                index_cpu_to_gpu_multiple(res.providers, devices, &cpu, &opts));
        auto sh = dynamic_cast<faiss::IndexShards*>(multi.get());
        ASSERT_NE(sh, nullptr);
        EXPECT_FALSE(sh->successive_ids);
        ASSERT_NE(dynamic_cast<faiss::IndexIDMap*>(sh->at(0)), nullptr);
        multi->add_with_ids(nb / 2, xb.data() + nb * d, ids.data() + nb);
        cpu.add_with_ids(nb / 2, xb.data() + nb * d, ids.data() + nb);
        ASSERT_EQ(multi->ntotal, cpu.ntotal);
        Result rc = searchAll(&cpu, xq, nq, k), rm = searchAll(multi.get(), xq, nq, k);
        EXPECT_EQ(compareKnn(nq, k, rm.D.data(), rm.I.data(), rc.D.data(), rc.I.data(), false), "");
        // back to the CPU: the same vectors and ids, possibly in another order
        // (IndexShards splits an add over the shards)
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(multi.get()));
        auto bm = dynamic_cast<faiss::IndexIDMap*>(back.get());
        ASSERT_NE(bm, nullptr);
        ASSERT_EQ(bm->ntotal, cpu.ntotal);
        std::vector<int64_t> a = bm->id_map, b = cpu.id_map;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b);
        Result rb = searchAll(back.get(), xq, nq, k);
        EXPECT_EQ(compareKnn(nq, k, rb.D.data(), rb.I.data(), rc.D.data(), rc.I.data(), false), "");
    }
    {  // replicated flat: adds go to every copy
        faiss::IndexFlat cpu(d, faiss::METRIC_INNER_PRODUCT);
        cpu.add(nb, xb.data());
        std::unique_ptr<faiss::Index> multi(
                index_cpu_to_gpu_multiple(res.providers, devices, &cpu, nullptr));
        ASSERT_NE(dynamic_cast<faiss::IndexReplicas*>(multi.get()), nullptr);
        multi->add(nb, xb.data() + nb * d);
        cpu.add(nb, xb.data() + nb * d);
        auto rep = static_cast<faiss::IndexReplicas*>(multi.get());
        EXPECT_EQ(rep->at(0)->ntotal, 2 * nb);
        EXPECT_EQ(rep->at(1)->ntotal, 2 * nb);
        Result rc = searchAll(&cpu, xq, nq, k), rm = searchAll(multi.get(), xq, nq, k);
        EXPECT_EQ(compareKnn(nq, k, rm.D.data(), rm.I.data(), rc.D.data(), rc.I.data(), true), "");
    }
}

/// Bi-level LSH: replicas give one GPU index's results exactly; shards (same
/// model, sliced vectors) reach at least its recall; both come back equal to
/// the CPU twin.
void checkBiLevelLSH(const std::vector<int>& devices) {
    const int d = 32;
    const int64_t nb = 8000, nq = 60, k = 10;
    auto xb = clusteredVectors(nb, d, 16, kSeed + 4);
    auto xq = clusteredVectors(nq, d, 16, kSeed + 5);
    SCOPED_TRACE("seed " + std::to_string(kSeed + 4));
    std::unique_ptr<faiss::Index> cpu(faiss_ext::index_factory(d, "BiLSH8x8_t3"));
    cpu->train(nb, xb.data());
    cpu->add(nb, xb.data());
    faiss::IndexFlat exact(d, faiss::METRIC_L2);
    exact.add(nb, xb.data());
    Result re = searchAll(&exact, xq, nq, k);

    ResourcesPerDevice res(devices.size());
    StandardGpuResources single;
    std::unique_ptr<faiss::Index> one(index_cpu_to_gpu(&single, 0, cpu.get()));
    Result r1 = searchAll(one.get(), xq, nq, k);
    const double recallOne = recallL2(xb, xq, d, nq, k, r1, re);

    for (bool shard : {false, true}) {
        SCOPED_TRACE(shard ? "shard" : "replicate");
        GpuMultipleClonerOptions opts = shardOptions(shard);
        std::unique_ptr<faiss::Index> multi(
                index_cpu_to_gpu_multiple(res.providers, devices, cpu.get(), &opts));
        ASSERT_EQ(multi->ntotal, nb);
        Result rm = searchAll(multi.get(), xq, nq, k);
        if (shard) {
            ASSERT_NE(dynamic_cast<faiss::IndexShards*>(multi.get()), nullptr);
            // each shard's candidates include the full index's in its slice
            EXPECT_GE(recallL2(xb, xq, d, nq, k, rm, re), recallOne - 1e-9)
                    << "one GPU: " << recallOne;
        } else {
            ASSERT_NE(dynamic_cast<faiss::IndexReplicas*>(multi.get()), nullptr);
            Result rh = searchInHalves(one.get(), xq, nq, k);
            EXPECT_EQ(rm.I, rh.I);
            EXPECT_EQ(rm.D, rh.D);
        }
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(multi.get()));
        auto lsh = dynamic_cast<faiss_ext::IndexBiLevelLSH*>(back.get());
        ASSERT_NE(lsh, nullptr) << typeid(*back).name();
        auto twin = static_cast<faiss_ext::IndexBiLevelLSH*>(cpu.get());
        EXPECT_EQ(lsh->getVectors(), twin->getVectors());
        Result rb = searchAll(back.get(), xq, nq, k), rc = searchAll(cpu.get(), xq, nq, k);
        EXPECT_EQ(rb.I, rc.I);
    }
}

/// GNND: replicas only; each copy holds the same graph.
void checkGnndReplicas(const std::vector<int>& devices) {
    const int d = 16;
    const int64_t nb = 3000, nq = 40, k = 10;
    auto xb = clusteredVectors(nb, d, 10, kSeed + 6);
    auto xq = clusteredVectors(nq, d, 10, kSeed + 7);
    SCOPED_TRACE("seed " + std::to_string(kSeed + 6));
    ResourcesPerDevice res(devices.size());
    StandardGpuResources single;
    faiss_ext::gpu::GpuKnnGraphGNND built(&single, d, 16);
    built.add(nb, xb.data());
    std::unique_ptr<faiss::Index> cpu(index_gpu_to_cpu(&built));
    auto nnd = dynamic_cast<faiss::IndexNNDescentFlat*>(cpu.get());
    ASSERT_NE(nnd, nullptr);
    std::unique_ptr<faiss::Index> one(index_cpu_to_gpu(&single, 0, cpu.get()));

    std::unique_ptr<faiss::Index> multi(
            index_cpu_to_gpu_multiple(res.providers, devices, cpu.get(), nullptr));
    auto rep = dynamic_cast<faiss::IndexReplicas*>(multi.get());
    ASSERT_NE(rep, nullptr);
    Result rm = searchAll(multi.get(), xq, nq, k);
    Result rh = searchInHalves(one.get(), xq, nq, k);
    EXPECT_EQ(rm.I, rh.I);
    EXPECT_EQ(rm.D, rh.D);

    std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(multi.get()));
    auto bn = dynamic_cast<faiss::IndexNNDescentFlat*>(back.get());
    ASSERT_NE(bn, nullptr) << typeid(*back).name();
    EXPECT_EQ(bn->ntotal, nb);
    EXPECT_EQ(bn->nndescent.final_graph, nnd->nndescent.final_graph);

    GpuMultipleClonerOptions opts = shardOptions(true);
    EXPECT_THROW(index_cpu_to_gpu_multiple(res.providers, devices, cpu.get(), &opts),
                 faiss::FaissException);
    EXPECT_THROW(index_cpu_to_gpu_multiple(res.providers, devices, &built, &opts),
                 faiss::FaissException);
}

/// A provider that fails: the copy on it throws after the others are built.
class FailingProvider : public GpuResourcesProvider {
public:
    std::shared_ptr<faiss_ext::gpu::GpuResources> getResources() override {
        throw std::runtime_error("FailingProvider: no resources (test)");
    }
};

/// The copy on the second device fails: the first is freed, the error comes
/// through.
void checkFailureFreesEarlierCopies(const std::vector<int>& devices) {
    const int d = 64;
    const int64_t nb = 400000;  // 100 MiB of vectors per full copy
    auto xb = randomVectors(nb, d, kSeed + 8);
    faiss::IndexFlat cpu(d, faiss::METRIC_L2);
    cpu.add(nb, xb.data());
    StandardGpuResources good;
    FailingProvider bad;
    {  // warm the resources (streams, handles, pools) up first
        std::unique_ptr<faiss::Index> warm(index_cpu_to_gpu(&good, devices[0], &cpu));
    }
    // this process's own allocations (getDeviceMemoryStats counts no other
    // process, so a GPU shared with other jobs does not disturb the check)
    const auto before = faiss_ext::gpu::getDeviceMemoryStats(devices[0]);
    for (bool shard : {false, true}) {
        SCOPED_TRACE(shard ? "shard" : "replicate");
        GpuMultipleClonerOptions opts = shardOptions(shard);
        EXPECT_THROW(index_cpu_to_gpu_multiple({&good, &bad}, devices, &cpu, &opts),
                     std::exception);
        const auto after = faiss_ext::gpu::getDeviceMemoryStats(devices[0]);
        // the copy (100 MiB) or shard (50 MiB) is gone: the same resident
        // allocations as before
        EXPECT_EQ(after.allocatedBytes, before.allocatedBytes);
        EXPECT_EQ(after.allocations, before.allocations);
    }
    {  // the measure sees a copy that succeeds (so the check above can fail)
        std::unique_ptr<faiss::Index> ok(index_cpu_to_gpu(&good, devices[0], &cpu));
        EXPECT_GE(faiss_ext::gpu::getDeviceMemoryStats(devices[0]).allocatedBytes,
                  before.allocatedBytes + size_t(nb) * d * sizeof(float));
    }
}

/// A stand-in for a GPU flat index (no GPU needed): a CpuConvertible
/// IndexFlat whose CPU twin is a faiss::IndexFlat copy.
struct FakeGpuFlat : faiss::IndexFlat, faiss_ext::CpuConvertible {
    FakeGpuFlat(int d, faiss::MetricType metric, int64_t n, const float* x)
            : faiss::IndexFlat(d, metric) {
        add(n, x);
    }
    faiss::Index* copyToCpuIndex() const override {
        auto twin = new faiss::IndexFlat(d, metric_type);
        twin->add(ntotal, get_xb());
        return twin;
    }
};

/// An IndexShards (owning, not threaded) of `parts`.
std::unique_ptr<faiss::IndexShards> shardsOf(int d, bool successiveIds,
                                             std::vector<faiss::Index*> parts) {
    std::unique_ptr<faiss::IndexShards> sh(new faiss::IndexShards(d, false, successiveIds));
    sh->own_fields = true;
    for (faiss::Index* p : parts) sh->add_shard(p);
    return sh;
}

}  // namespace

// ------------------------------------------------ index_gpu_to_cpu (no GPU needed)

TEST(GpuMulti, IndexGpuToCpuMergesShardsAndReplicas) {
    const int d = 6;
    const int64_t nb = 90, nq = 7, k = 5;
    auto xb = randomVectors(nb, d, kSeed);
    auto xq = randomVectors(nq, d, kSeed + 1);
    std::vector<int64_t> ids(nb);
    for (int64_t i = 0; i < nb; ++i) ids[i] = 1000 - 3 * i;
    faiss::IndexFlat ref(d, faiss::METRIC_L2);
    ref.add(nb, xb.data());
    const int64_t cut[] = {0, 30, 61, nb};  // three shards of unequal sizes
    auto slice = [&](int i, faiss::MetricType metric) {
        return new FakeGpuFlat(d, metric, cut[i + 1] - cut[i], xb.data() + cut[i] * d);
    };
    SCOPED_TRACE("seed " + std::to_string(kSeed));

    {  // flat shards with successive ids -> one IndexFlat, vectors in shard order
        auto sh = shardsOf(d, true, {slice(0, faiss::METRIC_L2), slice(1, faiss::METRIC_L2),
                                     slice(2, faiss::METRIC_L2)});
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(sh.get()));
        auto flat = dynamic_cast<faiss::IndexFlat*>(back.get());
        ASSERT_NE(flat, nullptr) << typeid(*back).name();
        ASSERT_EQ(flat->ntotal, nb);
        EXPECT_EQ(std::vector<float>(flat->get_xb(), flat->get_xb() + nb * d), xb);
        Result a = searchAll(sh.get(), xq, nq, k), b = searchAll(back.get(), xq, nq, k);
        EXPECT_EQ(a.I, b.I);
    }
    {  // IndexIDMap shards (ids their own) -> one IndexIDMap(IndexFlat), ids in shard order
        std::vector<faiss::Index*> parts;
        for (int i = 0; i < 3; ++i) {
            auto m = new faiss::IndexIDMap();
            m->index = slice(i, faiss::METRIC_INNER_PRODUCT);
            m->own_fields = true;
            m->d = d;
            m->metric_type = faiss::METRIC_INNER_PRODUCT;
            m->ntotal = m->index->ntotal;
            m->id_map.assign(ids.begin() + cut[i], ids.begin() + cut[i + 1]);
            parts.push_back(m);
        }
        auto sh = shardsOf(d, false, parts);
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(sh.get()));
        auto m = dynamic_cast<faiss::IndexIDMap*>(back.get());
        ASSERT_NE(m, nullptr) << typeid(*back).name();
        EXPECT_EQ(m->id_map, ids);
        ASSERT_NE(dynamic_cast<faiss::IndexFlat*>(m->index), nullptr);
        EXPECT_EQ(m->index->ntotal, nb);
        Result a = searchAll(sh.get(), xq, nq, k), b = searchAll(back.get(), xq, nq, k);
        EXPECT_EQ(a.I, b.I);
    }
    {  // cosine-like shards: the same transform around flat shards -> one IndexPreTransform
        std::vector<faiss::Index*> parts;
        for (int i = 0; i < 3; ++i) {
            auto pt = new faiss::IndexPreTransform(new faiss::NormalizationTransform(d, 2.0f),
                                                   slice(i, faiss::METRIC_INNER_PRODUCT));
            pt->own_fields = true;
            pt->ntotal = pt->index->ntotal;
            parts.push_back(pt);
        }
        auto sh = shardsOf(d, true, parts);
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(sh.get()));
        auto pt = dynamic_cast<faiss::IndexPreTransform*>(back.get());
        ASSERT_NE(pt, nullptr) << typeid(*back).name();
        EXPECT_EQ(pt->chain.size(), 1u);
        EXPECT_EQ(pt->ntotal, nb);
        Result a = searchAll(sh.get(), xq, nq, k), b = searchAll(back.get(), xq, nq, k);
        EXPECT_EQ(a.I, b.I);
    }
    {  // shards that cannot be merged (flat without successive ids: their labels
       // overlap; different transforms) stay an IndexShards of CPU copies
        auto sh = shardsOf(d, false, {slice(0, faiss::METRIC_L2), slice(1, faiss::METRIC_L2)});
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(sh.get()));
        auto bs = dynamic_cast<faiss::IndexShards*>(back.get());
        ASSERT_NE(bs, nullptr) << typeid(*back).name();
        ASSERT_EQ(bs->count(), 2);
        EXPECT_EQ(typeid(*bs->at(0)), typeid(faiss::IndexFlat));
        EXPECT_FALSE(bs->successive_ids);
        Result a = searchAll(sh.get(), xq, nq, k), b = searchAll(back.get(), xq, nq, k);
        EXPECT_EQ(a.I, b.I);

        auto p0 = new faiss::IndexPreTransform(new faiss::NormalizationTransform(d, 2.0f),
                                               slice(0, faiss::METRIC_L2));
        auto p1 = new faiss::IndexPreTransform(new faiss::NormalizationTransform(d, 1.0f),
                                               slice(1, faiss::METRIC_L2));
        for (auto p : {p0, p1}) {
            p->own_fields = true;
            p->ntotal = p->index->ntotal;
        }
        auto sh2 = shardsOf(d, true, {p0, p1});
        std::unique_ptr<faiss::Index> back2(index_gpu_to_cpu(sh2.get()));
        EXPECT_NE(dynamic_cast<faiss::IndexShards*>(back2.get()), nullptr);
    }
    {  // replicas -> a copy of the first
        faiss::IndexReplicas rep(d, false);
        rep.own_fields = true;
        rep.addIndex(new FakeGpuFlat(d, faiss::METRIC_L2, nb, xb.data()));
        rep.addIndex(new FakeGpuFlat(d, faiss::METRIC_L2, nb, xb.data()));
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(&rep));
        auto flat = dynamic_cast<faiss::IndexFlat*>(back.get());
        ASSERT_NE(flat, nullptr) << typeid(*back).name();
        EXPECT_EQ(flat->ntotal, nb);
        Result a = searchAll(&ref, xq, nq, k), b = searchAll(back.get(), xq, nq, k);
        EXPECT_EQ(a.I, b.I);
    }
    {  // an IndexShards with no GPU index in it is copied as it is
        auto sh = shardsOf(d, true, {new faiss::IndexFlat(d), new faiss::IndexFlat(d)});
        std::unique_ptr<faiss::Index> back(index_gpu_to_cpu(sh.get()));
        EXPECT_NE(dynamic_cast<faiss::IndexShards*>(back.get()), nullptr);
    }
}

// ------------------------------------------------ arguments (no GPU needed)

TEST(GpuMulti, ArgumentErrorsThrowBeforeAnything) {
    const int d = 8;
    faiss::IndexFlat flat(d, faiss::METRIC_L2);
    auto xb = randomVectors(100, d, kSeed);
    flat.add(100, xb.data());
    StandardGpuResources r0, r1;
    GpuMultipleClonerOptions shard = shardOptions(true);
    auto throwsWith = [](const std::string& part, auto&& call) {
        try {
            call();
        } catch (const faiss::FaissException& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
            return;
        }
        ADD_FAILURE() << "no exception; expected one saying '" << part << "'";
    };
    throwsWith("2 resources providers for 1 devices",
               [&] { index_cpu_to_gpu_multiple({&r0, &r1}, {0}, &flat, nullptr); });
    throwsWith("1 resources providers for 2 devices",
               [&] { index_cpu_to_gpu_multiple({&r0}, {0, 1}, &flat, &shard); });
    throwsWith("no devices", [&] { index_cpu_to_gpu_multiple({}, {}, &flat, nullptr); });
    throwsWith("null index", [&] { index_cpu_to_gpu_multiple({&r0, &r1}, {0, 1}, nullptr, nullptr); });
    throwsWith("is null", [&] { index_cpu_to_gpu_multiple({&r0, nullptr}, {0, 1}, &flat, nullptr); });
    throwsWith("same object on the same device 0",
               [&] { index_cpu_to_gpu_multiple({&r0, &r0}, {0, 0}, &flat, nullptr); });

    // what cannot be sharded is refused before any device is touched
    faiss::IndexNNDescentFlat nnd(d, 8);
    throwsWith("cannot be sharded",
               [&] { index_cpu_to_gpu_multiple({&r0, &r1}, {0, 1}, &nnd, &shard); });
    faiss::IndexHNSWFlat hnsw(d, 8);
    throwsWith("cannot be sharded",
               [&] { index_cpu_to_gpu_multiple({&r0, &r1}, {0, 1}, &hnsw, &shard); });
    faiss::IndexIDMap idmapHnsw(&hnsw);
    throwsWith("cannot be sharded",
               [&] { index_cpu_to_gpu_multiple({&r0, &r1}, {0, 1}, &idmapHnsw, &shard); });

    // bad devices
    const int n = faiss_ext::gpu::getNumDevices();
    EXPECT_THROW(index_cpu_to_gpu_multiple({&r0, &r1}, {0, n}, &flat, nullptr),
                 faiss::FaissException);
    EXPECT_THROW(index_cpu_to_gpu_multiple({&r0, &r1}, {-1, 0}, &flat, &shard),
                 faiss::FaissException);
}

TEST(GpuMulti, OneDeviceIsIndexCpuToGpu) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 8;
    faiss::IndexFlat flat(d, faiss::METRIC_L2);
    auto xb = randomVectors(100, d, kSeed);
    flat.add(100, xb.data());
    StandardGpuResources r0;
    GpuMultipleClonerOptions shard = shardOptions(true);
    std::unique_ptr<faiss::Index> g(index_cpu_to_gpu_multiple({&r0}, {0}, &flat, &shard));
    EXPECT_NE(dynamic_cast<faiss_ext::gpu::GpuIndexQuickSelectFlat*>(g.get()), nullptr);
}

// ------------------------------------------------ two GPUs, and GPU 0 twice

namespace {

/// One check of the file, run on the devices of a DeviceList.
struct Check {
    const char* name;
    void (*run)(const std::vector<int>& devices);
};

/// A device list a check runs on: {0, 1} or {0, 0}, and why it skips.
struct DeviceList {
    const char* name;
    Devices (*get)();
};

void PrintTo(const Check& c, std::ostream* os) { *os << c.name; }
void PrintTo(const DeviceList& l, std::ostream* os) { *os << l.name; }

const Check kChecks[] = {
        {"Flat", checkFlatSearchAndRoundTrip},
        {"Adds", checkAdds},
        {"BiLevelLSH", checkBiLevelLSH},
        {"GnndReplicas", checkGnndReplicas},
        {"FailureFreesEarlierCopies", checkFailureFreesEarlierCopies},
};

const DeviceList kDeviceLists[] = {
        {"TwoGpus", twoGpus},            // skipped visibly below 2 GPUs
        {"GpuZeroTwice", gpuZeroTwice},  // one GPU suffices
};

/// Every check on every device list: GpuMulti/OnDevices.Check/<check>_<devices>,
/// e.g. GpuMulti/OnDevices.Check/Flat_TwoGpus.
class OnDevices : public ::testing::TestWithParam<std::tuple<Check, DeviceList>> {};

TEST_P(OnDevices, Check) {
    const Check& check = std::get<0>(GetParam());
    Devices devs = std::get<1>(GetParam()).get();
    FAISS_EXT_REQUIRE(devs);
    check.run(devs.ids);
}

INSTANTIATE_TEST_SUITE_P(GpuMulti, OnDevices,
                         ::testing::Combine(::testing::ValuesIn(kChecks),
                                            ::testing::ValuesIn(kDeviceLists)),
                         [](const ::testing::TestParamInfo<OnDevices::ParamType>& info) {
                             return std::string(std::get<0>(info.param).name) + "_" +
                                    std::get<1>(info.param).name;
                         });

}  // namespace
