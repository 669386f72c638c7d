// The cloner and the I/O for GpuIndexBiLevelLSH: factory twin ("BiLSH<L>x<M>
// ...") trained on the CPU -> GPU (configuration, model, vectors; tables
// rebuilt there) with the same candidates -> CPU twin identical to the
// original -> file -> GPU again; an untrained twin moved to the GPU trains
// there into the same model; FAISS's wrappers (IDMap, PCA) walked; a GPU
// index is written as its twin. Skipped without a GPU.
#include <faiss/IndexIDMap.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/FaissException.h>

#include <memory>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

namespace faiss_ext {
namespace {

using gpu::GpuIndexBiLevelLSH;
using gpu::StandardGpuResources;
using test::kSeed;
using idx_t = int64_t;

/// The index at the bottom of IDMap / PreTransform wrappers.
faiss::Index* leafOf(faiss::Index* idx) {
    while (true) {
        if (auto m = dynamic_cast<faiss::IndexIDMap*>(idx)) {
            idx = m->index;
        } else if (auto pt = dynamic_cast<faiss::IndexPreTransform*>(idx)) {
            idx = pt->index;
        } else {
            return idx;
        }
    }
}

/// (lims, ids) of getCandidates on either index type.
template <class IndexT>
std::pair<std::vector<idx_t>, std::vector<idx_t>> candidates(
    const IndexT* idx, const std::vector<float>& q, int k,
    const SearchParametersBiLevelLSH* params) {
    std::vector<idx_t> lims, ids;
    idx->getCandidates(idx_t(q.size() / idx->d), q.data(), k, &lims, &ids, params);
    return {lims, ids};
}

/// Expects the same candidates from a and b under a few search settings.
template <class A, class B>
void expectSameCandidates(const A* a, const B* b, const std::vector<float>& q,
                          const std::string& what) {
    SearchParametersBiLevelLSH wide;
    wide.nprobe = 8;
    wide.minCandidates = 50;
    for (const SearchParametersBiLevelLSH* p :
         {static_cast<const SearchParametersBiLevelLSH*>(nullptr),
          static_cast<const SearchParametersBiLevelLSH*>(&wide)}) {
        EXPECT_TRUE(candidates(a, q, 10, p) == candidates(b, q, 10, p))
            << what << (p ? " (nprobe 8)" : " (defaults)") << ", seed " << kSeed;
    }
}

void expectSameModel(const BiLevelLSHModel& a, const BiLevelLSHModel& b, const std::string& what) {
    EXPECT_EQ(a.d, b.d) << what;
    EXPECT_EQ(a.depth, b.depth) << what;
    EXPECT_TRUE(
        a.nodeRule == b.nodeRule && a.nodeVec == b.nodeVec && a.nodeThreshold == b.nodeThreshold &&
        a.leafMean == b.leafMean && a.leafWidth == b.leafWidth && a.leafOffset == b.leafOffset &&
        a.leafTrainCount == b.leafTrainCount && a.proj == b.proj && a.projBias == b.projBias)
        << what << ": models differ";
}

TEST(GpuClonerLsh, TwinRoundTripsThroughTheGpu) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24, n = 5000, nq = 100;
    std::unique_ptr<faiss::Index> made(index_factory(d, "BiLSH8x6_t3_w0.75"));
    auto* twin = dynamic_cast<IndexBiLevelLSH*>(made.get());
    ASSERT_NE(twin, nullptr);
    auto x = test::clusteredVectors(n, d, 30, kSeed);
    auto q = test::clusteredVectors(nq, d, 30, kSeed + 1);
    twin->train(n, x.data());
    twin->add(n, x.data());

    std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, twin));
    auto* lsh = dynamic_cast<GpuIndexBiLevelLSH*>(g.get());
    ASSERT_NE(lsh, nullptr);
    EXPECT_EQ(lsh->getDevice(), 0);
    EXPECT_EQ(lsh->ntotal, n);
    EXPECT_EQ(lsh->getBiLevelConfig().nTables, 8);
    EXPECT_EQ(lsh->getBiLevelConfig().nProjections, 6);
    EXPECT_EQ(lsh->getBiLevelConfig().treeDepth, 3);
    EXPECT_EQ(lsh->getBiLevelConfig().bucketWidth, 0.75f);
    expectSameModel(twin->getModel(), lsh->getModel(), "on the GPU");
    EXPECT_EQ(lsh->groupSizes(), twin->groupSizes());
    expectSameCandidates(twin, lsh, q, "twin vs GPU");

    std::unique_ptr<faiss::Index> back(gpu::index_gpu_to_cpu(g.get()));
    auto* cpu = dynamic_cast<IndexBiLevelLSH*>(back.get());
    ASSERT_NE(cpu, nullptr);
    EXPECT_EQ(cpu->ntotal, n);
    EXPECT_TRUE(cpu->getVectors() == twin->getVectors());
    expectSameModel(twin->getModel(), cpu->getModel(), "back on the CPU");
    expectSameCandidates(twin, cpu, q, "twin vs copy");
    const int k = 10;
    std::vector<float> Da(nq * k), Db(nq * k);
    std::vector<idx_t> Ia(nq * k), Ib(nq * k);
    twin->search(nq, q.data(), k, Da.data(), Ia.data());
    cpu->search(nq, q.data(), k, Db.data(), Ib.data());
    EXPECT_EQ(Ia, Ib);
    EXPECT_EQ(Da, Db);

    // written as its twin, read back, and onto the GPU again
    std::vector<uint8_t> fromGpu = serialize_index(g.get());
    EXPECT_EQ(fromGpu, serialize_index(twin));
    std::unique_ptr<faiss::Index> read(deserialize_index(fromGpu));
    std::unique_ptr<faiss::Index> again(gpu::index_cpu_to_gpu(&res, 0, read.get()));
    auto* lsh2 = dynamic_cast<GpuIndexBiLevelLSH*>(again.get());
    ASSERT_NE(lsh2, nullptr);
    expectSameCandidates(twin, lsh2, q, "twin vs GPU from the file");
}

TEST(GpuClonerLsh, UntrainedTwinTrainsOnTheGpuIntoTheSameModel) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16, n = 4000;
    std::unique_ptr<faiss::Index> cpu(index_factory(d, "BiLSH6x8_t4"));
    std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, cpu.get()));
    auto* lsh = dynamic_cast<GpuIndexBiLevelLSH*>(g.get());
    ASSERT_NE(lsh, nullptr);
    EXPECT_FALSE(lsh->is_trained);
    auto x = test::clusteredVectors(n, d, 20, kSeed);
    lsh->train(n, x.data());
    lsh->add(n, x.data());
    cpu->train(n, x.data());
    cpu->add(n, x.data());
    auto* twin = dynamic_cast<IndexBiLevelLSH*>(cpu.get());
    expectSameModel(twin->getModel(), lsh->getModel(), "trained on GPU vs CPU");
    expectSameCandidates(twin, lsh, test::clusteredVectors(50, d, 20, kSeed + 2),
                         "trained on GPU vs CPU");
}

TEST(GpuClonerLsh, WrappersAreWalked) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: L x n = 8 x 1000 keeps the table sorts past CUB's single tile
    // (> 4864); d = 16 after the PCA (<= heapMaxDim): the heap either way
    const int d = 32, k = 5;
    const int n = test::sized(3000, 1000), nq = test::sized(20, 10);
    std::unique_ptr<faiss::Index> cpu(index_factory(d, "IDMap,PCA16,BiLSH8x6_t2"));
    auto x = test::clusteredVectors(n, d, 20, kSeed);
    cpu->train(n, x.data());
    std::vector<idx_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = 10 * i + 3;
    cpu->add_with_ids(n, x.data(), ids.data());

    std::unique_ptr<faiss::Index> g(gpu::index_cpu_to_gpu(&res, 0, cpu.get()));
    ASSERT_NE(dynamic_cast<faiss::IndexIDMap*>(g.get()), nullptr);
    ASSERT_NE(dynamic_cast<GpuIndexBiLevelLSH*>(leafOf(g.get())), nullptr);
    std::vector<float> Dc(nq * k), Dg(nq * k);
    std::vector<idx_t> Ic(nq * k), Ig(nq * k);
    cpu->search(nq, x.data(), k, Dc.data(), Ic.data());
    g->search(nq, x.data(), k, Dg.data(), Ig.data());
    for (int i = 0; i < nq; ++i) EXPECT_EQ(Ig[size_t(i) * k], ids[i]) << "query " << i;
    for (size_t j = 0; j < Dc.size(); ++j) EXPECT_NEAR(Dg[j], Dc[j], 1e-3f + 1e-4f * Dc[j]);

    std::unique_ptr<faiss::Index> back(gpu::index_gpu_to_cpu(g.get()));
    ASSERT_NE(dynamic_cast<IndexBiLevelLSH*>(leafOf(back.get())), nullptr);
    std::vector<float> Db(nq * k);
    std::vector<idx_t> Ib(nq * k);
    back->search(nq, x.data(), k, Db.data(), Ib.data());
    EXPECT_EQ(Ib, Ic);
    EXPECT_EQ(Db, Dc);
}

}  // namespace
}  // namespace faiss_ext
