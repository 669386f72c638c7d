// bench_filter: filtered exact search (SearchParameters::sel) on
// GpuIndexQuickSelectFlat at several selectivities, random and
// attribute-like (first coordinate above a quantile: correlated with the
// query's region), against the unfiltered search of the same queries, plus
// the host cost of turning each selector type into the GPU's bitmap.
// One JSON line per measurement (suite "filter"; schema in DESIGN.md).
// Device queries (copied once); medians of --reps timed runs after a warm-up.
// Correctness: --check queries are compared with faiss::IndexFlat searching
// with the same selector (recall@k against that exact filtered answer).
#include "BenchData.h"
#include "BenchDevice.h"
#include "BenchUtil.h"

#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <faiss/IndexFlat.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage =
        "bench_filter --base B.fbin --query Q.fbin [--nq 10000] [--k 10] [--metric l2|ip]\n"
        "             [--sel 100,1000,10000,50000,90000,100000 (per 100k)] [--reps 5] [--check 100]\n"
        "             [--dataset NAME] [--graph] [--normalize]   (--graph: also GpuIndexSearchGraph at its\n"
        "             defaults; --normalize: unit vectors, for --metric ip;\n"
        "             --remove: also the time of remove_ids of 1% and 10% of the vectors)\n"
        "             [--precision auto|fp32|tf32-bounded|bf16x3-bounded]   (the exact index's\n"
        "             distance precision; bounded ones add certified / fallback counts)\n"
        "             [--algo auto|qms|mq|thheap]   (its k-selection)\n";

/// A user subclass: only is_member can read it (the generic path's cost).
struct BitmapBehindIsMember : faiss::IDSelector {
    const faiss::IDSelectorBitmap* inner;
    explicit BitmapBehindIsMember(const faiss::IDSelectorBitmap* s) : inner(s) {}
    bool is_member(idx_t id) const override { return inner->is_member(id); }
};

/// The bitmap of the ids a filter keeps: `random` keeps a hashed fraction,
/// else the vectors whose first coordinate is in the top `fraction`.
std::vector<uint8_t> filterBitmap(const Matrix& xb, double fraction, bool random) {
    std::vector<uint8_t> bits(size_t((xb.n + 7) / 8), 0);
    float threshold = 0.f;
    if (!random && fraction < 1.0) {
        std::vector<float> first(size_t(xb.n));
        for (int64_t i = 0; i < xb.n; ++i) first[i] = xb.x[size_t(i) * xb.d];
        const size_t pos = size_t(double(xb.n) * (1.0 - fraction));
        std::nth_element(first.begin(), first.begin() + pos, first.end());
        threshold = first[pos];
    }
    for (int64_t i = 0; i < xb.n; ++i) {
        bool keep;
        if (fraction >= 1.0) {
            keep = true;
        } else if (random) {
            const uint64_t h = (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull;
            keep = double(h >> 11) / double(uint64_t(1) << 53) < fraction;
        } else {
            keep = xb.x[size_t(i) * xb.d] >= threshold;
        }
        if (keep) bits[size_t(i >> 3)] |= uint8_t(1u << (i & 7));
    }
    return bits;
}

/// Recall@k of I against the exact filtered answer refI (ids < 0 skipped).
double recallAgainst(const std::vector<int64_t>& I, const std::vector<int64_t>& refI, int64_t nq,
                     int k) {
    int64_t hits = 0, total = 0;
    for (int64_t q = 0; q < nq; ++q) {
        const int64_t* row = I.data() + size_t(q) * k;
        for (int j = 0; j < k; ++j) {
            const int64_t r = refI[size_t(q) * k + j];
            if (r < 0) continue;
            ++total;
            hits += std::find(row, row + k, r) != row + k;
        }
    }
    return total ? double(hits) / double(total) : 1.0;
}

/// Median seconds of one search of all queries (device queries, host results).
double timeSearch(const faiss::Index& index, const float* dq, int64_t nq, int k,
                  const faiss::SearchParameters* p, int reps, std::vector<int64_t>* I) {
    std::vector<float> D(size_t(nq) * k);
    I->resize(size_t(nq) * k);
    index.search(nq, dq, k, D.data(), I->data(), p);  // warm-up (GEMM tuning, pools)
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const double t0 = nowSeconds();
        index.search(nq, dq, k, D.data(), I->data(), p);
        t.push_back(nowSeconds() - t0);
    }
    return median(t);
}

/// Recall@k of the first nCheck rows of I against faiss::IndexFlat with the
/// same selector (1.0 means every checked query equals the exact answer).
double checkRecall(const Matrix& xb, const Matrix& xq, faiss::MetricType metric, int k,
                   const faiss::SearchParameters* p, const std::vector<int64_t>& I,
                   int64_t nCheck) {
    if (nCheck <= 0) return -1;
    faiss::IndexFlat flat(xb.d, metric);
    flat.add(xb.n, xb.x.data());
    std::vector<float> refD(size_t(nCheck) * k);
    std::vector<int64_t> refI(size_t(nCheck) * k);
    flat.search(nCheck, xq.x.data(), k, refD.data(), refI.data(), p);
    int64_t hits = 0, total = 0;
    for (int64_t q = 0; q < nCheck; ++q) {
        for (int j = 0; j < k; ++j) {
            const int64_t r = refI[size_t(q) * k + j];
            if (r < 0) continue;
            ++total;
            const int64_t* row = I.data() + size_t(q) * k;
            hits += std::find(row, row + k, r) != row + k;
        }
    }
    return total ? double(hits) / double(total) : 1.0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args a(argc, argv, {"graph", "normalize", "remove", "help", "git"});
        if (a.printedHelpOrGit(kUsage)) return 0;
        a.checkKnown({"base", "query", "nq", "k", "metric", "sel", "reps", "check", "dataset", "graph", "normalize", "remove",
                      "precision", "algo"});
        Matrix xb = readVectors(a.get("base"));
        Matrix xq = readVectors(a.get("query"), a.getInt("nq", 10000));
        if (a.has("normalize")) {
            faiss_ext::prepareVectors(FlatMetric::Cosine, xb.n, xb.d, xb.x.data());
            faiss_ext::prepareVectors(FlatMetric::Cosine, xq.n, xq.d, xq.x.data());
        }
        const int k = int(a.getInt("k", 10));
        const int reps = int(a.getInt("reps", 5));
        const int64_t nCheck = std::min<int64_t>(a.getInt("check", 100), xq.n);
        const bool ip = a.get("metric", "l2") == "ip";
        const faiss::MetricType metric = ip ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2;
        const std::string dataset = a.get("dataset", a.get("base"));

        gpu::StandardGpuResources res;
        gpu::GpuIndexQuickSelectFlatConfig config;
        config.distancePrecision =
                gpu::distancePrecisionFromName(a.get("precision", "auto").c_str());
        config.selectAlgo = gpu::selectAlgoFromName(a.get("algo", "auto").c_str());
        gpu::GpuIndexQuickSelectFlat index(&res, xb.d, metric, config);
        index.add(xb.n, xb.x.data());
        DeviceArray<float> dq(size_t(xq.n) * xq.d);
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(dq.p, xq.x.data(), sizeof(float) * xq.x.size(),
                                        cudaMemcpyHostToDevice));
        std::unique_ptr<gpu::GpuIndexSearchGraph> graph;
        double graphBuild = 0;
        if (a.has("graph")) {
            const double t0 = nowSeconds();
            graph.reset(new gpu::GpuIndexSearchGraph(&res, xb.d, ip ? FlatMetric::InnerProduct
                                                                    : FlatMetric::L2));
            graph->add(xb.n, xb.x.data());
            graphBuild = nowSeconds() - t0;
        }
        cudaDeviceProp prop;
        FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

        auto line = [&](const std::string& method, double seconds, JsonLine params) {
            JsonLine j;
            j.str("suite", "filter").str("method", method).str("device", prop.name)
                    .str("dataset", dataset).integer("nb", xb.n).integer("d", xb.d)
                    .integer("nq", xq.n).integer("k", k).raw("params", params.text())
                    .num("seconds", seconds);
            return j;
        };
        std::vector<int64_t> I;
        index.resetBoundedStats();
        const double base = timeSearch(index, dq.p, xq.n, k, nullptr, reps, &I);
        const gpu::BoundedSearchStats baseRoutes = index.getBoundedStats();
        std::cout << line("ours:unfiltered", base,
                          JsonLine().str("metric", ip ? "ip" : "l2")
                                  .str("precision", gpu::distancePrecisionName(
                                                            index.resolveDistancePrecision(xq.n, k)))
                                  .integer("certified_queries", baseRoutes.certifiedQueries)
                                  .integer("fallback_queries", baseRoutes.fallbackQueries))
                             .num("qps", xq.n / base).num("recall", 1.0).str("git", gitCommit())
                             .text()
                  << std::endl;
        if (graph) {
            std::vector<int64_t> G;
            const double g = timeSearch(*graph, dq.p, xq.n, k, nullptr, reps, &G);
            std::cout << line("ours:graph-unfiltered", g,
                              JsonLine().str("metric", ip ? "ip" : "l2")
                                      .num("build_seconds", graphBuild))
                                 .num("qps", xq.n / g).num("recall", recallAgainst(G, I, xq.n, k))
                                 .str("git", gitCommit()).text()
                      << std::endl;
        }
        for (bool random : {true, false}) {
            for (int64_t per100k : parseIntList(a.get("sel", "100,1000,10000,50000,90000,100000"))) {
                const double fraction = double(per100k) / 1e5;
                std::vector<uint8_t> bits = filterBitmap(xb, fraction, random);
                faiss::IDSelectorBitmap bitmap(bits.size(), bits.data());
                BitmapBehindIsMember generic(&bitmap);
                faiss::SearchParameters p;
                p.sel = &bitmap;
                index.resetBoundedStats();
                const double s = timeSearch(index, dq.p, xq.n, k, &p, reps, &I);
                const gpu::BoundedSearchStats routes = index.getBoundedStats();
                const double recall = checkRecall(xb, xq, metric, k, &p, I, nCheck);
                // The host cost of the selector's bitmap (once per search).
                auto hostCost = [&](const faiss::IDSelector* sel) {
                    std::vector<double> t;
                    int64_t kept = 0;
                    for (int r = 0; r < 5; ++r) {
                        const double t0 = nowSeconds();
                        gpu::IdSelection sl(sel, xb.n);
                        t.push_back(nowSeconds() - t0);
                        kept = sl.count();
                    }
                    return std::make_pair(median(t), kept);
                };
                const auto bitmapCost = hostCost(&bitmap);
                const auto genericCost = hostCost(&generic);
                JsonLine params;
                params.str("metric", ip ? "ip" : "l2").str("filter", random ? "random" : "attribute")
                        .num("selectivity", fraction).integer("selected", bitmapCost.second)
                        .num("selection_seconds_bitmap", bitmapCost.first)
                        .num("selection_seconds_is_member", genericCost.first)
                        .num("unfiltered_qps", xq.n / base).integer("recall_checked_queries", nCheck)
                        .str("precision", gpu::distancePrecisionName(
                                                  index.resolveDistancePrecision(xq.n, k)))
                        .str("algo", gpu::selectAlgoName(config.selectAlgo))
                        .integer("certified_queries", routes.certifiedQueries)
                        .integer("fallback_queries", routes.fallbackQueries);
                std::cout << line("ours:filtered", s, params).num("qps", xq.n / s)
                                     .num("recall", recall).str("git", gitCommit()).text()
                          << std::endl;
                if (graph) {
                    // The graph at its defaults (the automatic switch
                    // included), recall against the exact filtered answer.
                    std::vector<int64_t> G;
                    const double g = timeSearch(*graph, dq.p, xq.n, k, &p, reps, &G);
                    JsonLine gp;
                    gp.str("metric", ip ? "ip" : "l2").str("filter", random ? "random" : "attribute")
                            .num("selectivity", fraction).integer("selected", bitmapCost.second)
                            .num("exact_filtered_qps", xq.n / s);
                    std::cout << line("ours:graph-filtered", g, gp).num("qps", xq.n / g)
                                         .num("recall", recallAgainst(G, I, xq.n, k))
                                         .str("git", gitCommit()).text()
                              << std::endl;
                }
            }
        }
        if (a.has("remove")) {
            for (double fraction : {0.01, 0.1}) {
                gpu::GpuIndexQuickSelectFlat fresh(&res, xb.d, metric);
                fresh.add(xb.n, xb.x.data());
                std::vector<uint8_t> bits = filterBitmap(xb, fraction, true);
                faiss::IDSelectorBitmap gone(bits.size(), bits.data());
                const double t0 = nowSeconds();
                const size_t removed = fresh.remove_ids(gone);
                const double t = nowSeconds() - t0;
                JsonLine params;
                params.num("fraction", fraction).integer("removed", int64_t(removed))
                        .integer("left", fresh.ntotal);
                std::cout << line("ours:remove_ids", t, params).str("git", gitCommit()).text()
                          << std::endl;
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "bench_filter: " << e.what() << "\n" << kUsage;
        return 1;
    }
}
