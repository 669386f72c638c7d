// The whole path of a user on the GPU: factory string -> CPU twin -> GPU
// (cloner, through IndexIDMap / IndexPreTransform) -> search -> save -> load
// -> GPU again, with the same results at every step; plain FAISS files read
// back; a file of another metric is refused with a clear error.
#include "TestUtils.h"

#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/impl/FaissException.h>
#include <faiss/index_io.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace faiss_ext::test;
using faiss_ext::gpu::StandardGpuResources;

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

}  // namespace

TEST(GpuClonerIO, FactoryToGpuSaveLoadRoundTrips) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24;
    const int64_t nb = 3000, nq = 25, k = 12;
    auto xb = clusteredVectors(nb, d, 10, kSeed);
    auto xq = clusteredVectors(nq, d, 10, kSeed + 1);
    std::vector<int64_t> ids(nb);
    for (int64_t i = 0; i < nb; ++i) ids[i] = 1000 + 7 * i;
    for (const char* desc : {"IDMap,QSFlat", "IDMap,QSFlatCosine", "IDMap,QSFlatPearson",
                             "IDMap,PCA16,QSFlat"}) {
        SCOPED_TRACE(desc);
        std::unique_ptr<faiss::Index> cpu(faiss_ext::index_factory(d, desc, faiss::METRIC_L2));
        if (!cpu->is_trained) cpu->train(nb, xb.data());
        cpu->add_with_ids(nb, xb.data(), ids.data());
        std::unique_ptr<faiss::Index> gpu(faiss_ext::gpu::index_cpu_to_gpu(&res, 0, cpu.get()));
        Result rc = searchAll(cpu.get(), xq, nq, k);
        Result rg = searchAll(gpu.get(), xq, nq, k);
        bool ip = std::string(desc).find("Cosine") != std::string::npos ||
                  std::string(desc).find("Pearson") != std::string::npos;
        EXPECT_EQ(compareKnn(nq, k, rg.D.data(), rg.I.data(), rc.D.data(), rc.I.data(), ip), "");

        // Saved from the GPU (as its CPU twin), loaded, moved to the GPU again.
        std::vector<uint8_t> bytes = faiss_ext::serialize_index(gpu.get());
        std::unique_ptr<faiss::Index> loaded(faiss_ext::deserialize_index(bytes));
        std::unique_ptr<faiss::Index> gpu2(faiss_ext::gpu::index_cpu_to_gpu(&res, 0, loaded.get()));
        Result rl = searchAll(loaded.get(), xq, nq, k);
        Result rg2 = searchAll(gpu2.get(), xq, nq, k);
        EXPECT_EQ(rg2.I, rg.I);
        EXPECT_EQ(rg2.D, rg.D);
        EXPECT_EQ(compareKnn(nq, k, rl.D.data(), rl.I.data(), rc.D.data(), rc.I.data(), ip), "");

        // And back to the CPU through the cloner.
        std::unique_ptr<faiss::Index> back(faiss_ext::gpu::index_gpu_to_cpu(gpu.get()));
        Result rb = searchAll(back.get(), xq, nq, k);
        EXPECT_EQ(compareKnn(nq, k, rb.D.data(), rb.I.data(), rc.D.data(), rc.I.data(), ip), "");
    }
}

TEST(GpuClonerIO, PlainFaissFileReadsBackToGpu) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const int64_t nb = 500, nq = 9, k = 5;
    auto xb = randomVectors(nb, d, kSeed);
    auto xq = randomVectors(nq, d, kSeed + 2);
    faiss::IndexFlatIP flat(d);
    flat.add(nb, xb.data());
    std::string path = ::testing::TempDir() + "faiss_ext_plain_flat.index";
    faiss::write_index(&flat, path.c_str());
    std::unique_ptr<faiss::Index> loaded(faiss_ext::read_index(path.c_str()));
    std::unique_ptr<faiss::Index> gpu(faiss_ext::gpu::index_cpu_to_gpu(&res, 0, loaded.get()));
    Result rf = searchAll(&flat, xq, nq, k);
    Result rg = searchAll(gpu.get(), xq, nq, k);
    EXPECT_EQ(compareKnn(nq, k, rg.D.data(), rg.I.data(), rf.D.data(), rf.I.data(), true), "");
    std::remove(path.c_str());
}

TEST(GpuClonerIO, OtherMetricFileIsAClearError) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    faiss::IndexFlat l1(8, faiss::METRIC_L1);
    auto xb = randomVectors(10, 8, kSeed);
    l1.add(10, xb.data());
    std::vector<uint8_t> bytes = faiss_ext::serialize_index(&l1);
    std::unique_ptr<faiss::Index> loaded(faiss_ext::deserialize_index(bytes));
    faiss_ext::gpu::GpuClonerOptions opts;
    opts.requireGpu = true;
    EXPECT_THROW(faiss_ext::gpu::index_cpu_to_gpu(&res, 0, loaded.get(), &opts),
                 faiss::FaissException);
    faiss_ext::gpu::GpuIndexQuickSelectFlat gpu(&res, 8);
    EXPECT_THROW(gpu.copyFrom(loaded.get()), faiss::FaissException);
    EXPECT_EQ(gpu.ntotal, 0);
}
