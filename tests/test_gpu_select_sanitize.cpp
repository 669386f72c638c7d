// Small shapes of every selection mode, for compute-sanitizer runs
// (memcheck, racecheck, synccheck) over the new kernels: merge queue with
// hierarchical partition at every group size, TH-heap sampling and
// compaction, host-resident vectors, the k-NN graph and selectK.
#include "TestUtils.h"

#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuSelect.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <faiss/IndexFlat.h>

#include <algorithm>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::gpu;
using faiss_ext::test::compareKnn;
using faiss_ext::test::randomVectors;

TEST(SelectSanitize, EveryModeSmallShapes) {
    FAISS_EXT_REQUIRE_GPU();
    const int d = 8;
    const int64_t nb = 3000, nq = 5;
    auto xb = randomVectors(nb, d, 11);
    auto xq = randomVectors(nq, d, 12);
    faiss::IndexFlatL2 ref(d);
    ref.add(nb, xb.data());
    StandardGpuResources res;
    res.setTempMemory(size_t(8) << 20);  // several column tiles
    for (SelectAlgo algo : {SelectAlgo::QuickMultiSelect, SelectAlgo::MergeQueue, SelectAlgo::THHeap}) {
        for (int group : {2, 4, 8, 16}) {
            if (algo != SelectAlgo::MergeQueue && group != 4) continue;
            for (VectorStorage st : {VectorStorage::Device, VectorStorage::Host}) {
                GpuIndexQuickSelectFlatConfig cfg;
                cfg.selectAlgo = algo;
                cfg.mergeQueueGroup = group;
                cfg.thheapSampleFactor = 2;
                cfg.storage = st;
                GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, cfg);
                index.add(nb, xb.data());
                for (int64_t k : {int64_t(1), int64_t(33), int64_t(300)}) {
                    SCOPED_TRACE(std::string(selectAlgoName(algo)) + " G=" + std::to_string(group) +
                                 " storage=" + vectorStorageName(st) + " k=" + std::to_string(k));
                    std::vector<float> D(nq * k), refD(nq * k);
                    std::vector<int64_t> I(nq * k), refI(nq * k);
                    index.search(nq, xq.data(), k, D.data(), I.data());
                    ref.search(nq, xq.data(), k, refD.data(), refI.data());
                    EXPECT_EQ("", compareKnn(nq, k, D.data(), I.data(), refD.data(), refI.data(), false));
                }
                std::vector<int64_t> g(size_t(nb) * 4);
                index.knnGraph(4, true, nullptr, g.data());
                for (int64_t i = 0; i < nb; ++i) {
                    for (int j = 0; j < 4; ++j) EXPECT_NE(g[i * 4 + j], i);
                }
            }
        }
    }
    // selectK on a host matrix, smallest and largest.
    const int64_t rows = 3, n = 5000, k = 40;
    auto v = randomVectors(rows, int(n), 13);
    for (SelectAlgo algo : {SelectAlgo::QuickMultiSelect, SelectAlgo::MergeQueue, SelectAlgo::THHeap}) {
        for (bool largest : {false, true}) {
            std::vector<float> outV(rows * k);
            std::vector<int64_t> outI(rows * k);
            SelectKOptions o;
            o.algo = algo;
            selectK(&res, v.data(), rows, n, k, largest, outV.data(), outI.data(), o);
            for (int64_t r = 0; r < rows; ++r) {
                std::vector<float> row(v.begin() + r * n, v.begin() + (r + 1) * n);
                if (largest) {
                    std::sort(row.begin(), row.end(), std::greater<float>());
                } else {
                    std::sort(row.begin(), row.end());
                }
                for (int64_t j = 0; j < k; ++j) {
                    EXPECT_EQ(outV[r * k + j], row[j]) << selectAlgoName(algo) << " row " << r;
                    EXPECT_EQ(v[r * n + outI[r * k + j]], outV[r * k + j]);
                }
            }
        }
    }
}
