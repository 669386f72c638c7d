// Issue 22's pieces of Bi-level LSH on the GPU, against the CPU twin:
//   GpuLshWidths     widths from neighbour distances: training from device
//                    memory (rows gathered from the GPU) and from host memory
//                    give the CPU twin's model bit for bit
//   GpuLshE8         an E8 index: the CPU twin's model, bucket keys and
//                    candidates (Morton widening, several groups and margins)
//   GpuLshAutoTune   the GPU evaluator makes the CPU evaluator's choice with
//                    the same recall and candidates (the twins give the same
//                    candidates); train() with autotuneRecall tunes on the GPU
//                    to the CPU twin's configuration and model; the reported
//                    recall holds on other queries
// Skipped without a GPU. Seeds are fixed (test::kSeed) and printed.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "LshTestData.h"
#include "TestUtils.h"
#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

namespace faiss_ext {
namespace {

using gpu::GpuIndexBiLevelLSH;
using gpu::StandardGpuResources;
using idx_t = int64_t;
using test::kSeed;

/// n base rows and nq queries of one clustered distribution.
void splitClustered(int64_t n, int64_t nq, int d, uint64_t seed, std::vector<float>* x,
                    std::vector<float>* q) {
    const auto all = test::clusteredVectors(n + nq, d, 30, seed);
    x->assign(all.begin(), all.begin() + n * d);
    q->assign(all.begin() + n * d, all.end());
}

TEST(GpuLshWidths, DeviceAndHostTrainingGiveTheTwinsModel) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 40;
    for (int64_t n : {int64_t(3000), int64_t(30000)}) {  // all rows sampled; a sample
        SCOPED_TRACE("n " + std::to_string(n));
        std::vector<float> x, q;
        splitClustered(n, 10, d, kSeed + 31, &x, &q);
        BiLevelLSHConfig cfg;  // NeighbourDistance widths, depth 4
        IndexBiLevelLSH cpu(d, cfg);
        cpu.train(n, x.data());
        GpuIndexBiLevelLSH fromHost(&res, d, cfg);
        fromHost.train(n, x.data());
        EXPECT_EQ(lshtest::modelDifference(cpu.getModel(), fromHost.getModel()), "")
            << "seed " << kSeed;
        float* dx = nullptr;
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
        faiss_ext::test::syncAfterHostCopy();
        GpuIndexBiLevelLSH fromDevice(&res, d, cfg);
        fromDevice.train(n, dx);
        cudaFree(dx);
        EXPECT_EQ(lshtest::modelDifference(cpu.getModel(), fromDevice.getModel()), "")
            << "seed " << kSeed;
    }
}

TEST(GpuLshE8, SameModelKeysAndCandidatesAsTheTwin) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 48;
    const int64_t n = 20000, nq = 300;
    std::vector<float> x, q;
    splitClustered(n, nq, d, kSeed + 34, &x, &q);
    for (int M : {8, 16}) {
        SCOPED_TRACE("M " + std::to_string(M));
        BiLevelLSHConfig cfg;
        cfg.treeDepth = 3;
        cfg.nTables = 6;
        cfg.nProjections = M;
        cfg.lattice = lsh::kLatticeE8;
        IndexBiLevelLSH cpu(d, cfg);
        cpu.train(n, x.data());
        cpu.add(n, x.data());
        GpuIndexBiLevelLSH g(&res, d, cfg);
        g.train(n, x.data());
        g.add(n, x.data());
        EXPECT_EQ(lshtest::modelDifference(cpu.getModel(), g.getModel()), "") << "seed " << kSeed;
        EXPECT_EQ(g.numBucketKeys(), cpu.getTables().bucketKeys.size());
        for (int64_t minC : {int64_t(0), int64_t(200)}) {
            for (int gp : {1, 4}) {
                SearchParametersBiLevelLSH p;
                p.minCandidates = minC;
                p.groupProbes = gp;
                p.groupMargin = gp > 1 ? 0.05f : 0.f;
                std::vector<idx_t> lc, ic, lg, ig;
                cpu.getCandidates(nq, q.data(), 10, &lc, &ic, &p);
                g.getCandidates(nq, q.data(), 10, &lg, &ig, &p);
                EXPECT_EQ(lc, lg) << "minCandidates " << minC << ", groups " << gp;
                EXPECT_EQ(ic, ig) << "minCandidates " << minC << ", groups " << gp;
            }
        }
    }
}

TEST(GpuLshAutoTune, SameChoiceAsTheCpuEvaluatorAndTheRecallHolds) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32, k = 10;
    const int64_t n = 20000, nHeld = 1000, nOther = 1000;
    std::vector<float> x, rest;
    splitClustered(n, nHeld + nOther, d, kSeed + 32, &x, &rest);
    const std::vector<float> held(rest.begin(), rest.begin() + nHeld * d);
    const std::vector<float> other(rest.begin() + nHeld * d, rest.end());
    const BiLevelAutoTuneOptions opt = lshtest::smallTuneOptions(0.9);
    BiLevelTuneEvaluatorCpu cpuEval;
    gpu::GpuBiLevelLSHTuneEvaluator gpuEval(&res);
    const auto rc = autoTuneBiLevelLSH(d, n, x.data(), nHeld, held.data(), opt, &cpuEval);
    const auto rg = autoTuneBiLevelLSH(d, n, x.data(), nHeld, held.data(), opt, &gpuEval);
    std::printf("[gpu autotune] CPU evaluator: %s\n[gpu autotune] GPU evaluator: %s\n",
                rc.verdict.c_str(), rg.verdict.c_str());
    ASSERT_EQ(rc.points.size(), rg.points.size());
    for (size_t i = 0; i < rc.points.size(); ++i) {
        EXPECT_EQ(rc.points[i].recall, rg.points[i].recall) << "setting " << i;
        EXPECT_EQ(rc.points[i].candidates, rg.points[i].candidates) << "setting " << i;
    }
    EXPECT_TRUE(lshtest::sameTunedSettings(rc.config, rg.config));
    EXPECT_EQ(rc.recall, rg.recall);
    ASSERT_TRUE(rg.reachedTarget) << rg.verdict;

    GpuIndexBiLevelLSH index(&res, d, rg.config);
    index.train(n, x.data());
    index.add(n, x.data());
    std::vector<float> D(size_t(nOther) * k);
    std::vector<idx_t> I(size_t(nOther) * k), gt(size_t(nOther) * k);
    cpuEval.exactSearch(d, n, x.data(), nOther, other.data(), k, gt.data());
    index.search(nOther, other.data(), k, D.data(), I.data());  // the chosen defaults
    const double measured = recallAgainstExact(nOther, k, I.data(), gt.data());
    std::printf("[gpu autotune] reported recall %.4f, measured on %lld other queries %.4f\n",
                rg.recall, (long long)nOther, measured);
    EXPECT_NEAR(rg.recall, measured, 0.02) << "seed " << kSeed;
}

TEST(GpuLshAutoTune, TrainTunesToTheTwinsConfigurationAndModel) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    const int64_t n = 6000;
    std::vector<float> x, q;
    splitClustered(n, 10, d, kSeed + 33, &x, &q);
    BiLevelLSHConfig cfg;
    cfg.autotuneRecall = 0.9f;
    IndexBiLevelLSH cpu(d, cfg);
    cpu.train(n, x.data());
    GpuIndexBiLevelLSH g(&res, d, cfg);
    g.train(n, x.data());
    std::printf("[gpu autotune] train(): %s\n", g.getAutoTuneVerdict().c_str());
    EXPECT_EQ(cpu.getAutoTuneVerdict(), g.getAutoTuneVerdict());
    EXPECT_TRUE(lshtest::sameTunedSettings(cpu.getConfig(), g.getBiLevelConfig()));
    EXPECT_EQ(g.getBiLevelConfig().autotuneRecall, 0.9f);
    EXPECT_EQ(lshtest::modelDifference(cpu.getModel(), g.getModel()), "") << "seed " << kSeed;
}

}  // namespace
}  // namespace faiss_ext
