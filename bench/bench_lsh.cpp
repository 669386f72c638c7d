// The lsh suite (DESIGN.md, "Benchmarks"; run by bench/run_suite.sh lsh):
// recall@10 against queries/s of GpuIndexBiLevelLSH over a sweep of builds
// and search settings, with the anchors measured in the same run:
//   ours:exact               GpuIndexQuickSelectFlat (also the ground truth)
//   ours:bilsh-wq / -heap    GpuIndexBiLevelLSH, work queue / per-query heap
//   cpu-twin:1               IndexBiLevelLSH on one thread (same tables)
//   faiss-cpu:IndexLSH       FAISS's binary LSH, all cores (nbits sweep)
//   faiss-cpu:IndexHNSWFlat  HNSW M = 32, all cores (efSearch sweep)
// plus the work queue against the heap over k in {1, 10, 100, 500}.
// Queries and results live on the host for every method (transfers timed).
#include "bench/BenchData.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <faiss/IndexHNSW.h>
#include <faiss/IndexLSH.h>
#include <omp.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

struct Ctx {
    std::string dataset, git, gpu, cpu;
    Matrix base, query;
    std::vector<int64_t> gtI;  ///< nq x 10 exact (ours:exact)
    int reps = 3;
};

constexpr int kRecallK = 10;

double recall10(const Ctx& c, int64_t nq, const int64_t* I, int64_t k) {
    auto dist = [&](int64_t q, int64_t id) {
        double s = 0;
        const float* a = c.query.x.data() + size_t(q) * c.query.d;
        const float* b = c.base.x.data() + size_t(id) * c.base.d;
        for (int j = 0; j < c.base.d; ++j) {
            const double t = double(a[j]) - double(b[j]);
            s += t * t;
        }
        return s;
    };
    return recallAtK(nq, kRecallK, I, k, c.gtI.data(), kRecallK, dist, false);
}

JsonLine head(const Ctx& c, const std::string& method, const std::string& device, int64_t nq,
              int64_t k) {
    JsonLine j;
    j.str("suite", "lsh").str("dataset", c.dataset).str("method", method).str("device", device);
    j.integer("nb", c.base.n).integer("d", c.base.d).integer("nq", nq).integer("k", k);
    return j;
}

void emit(JsonLine& j, const Ctx& c) {
    j.str("git", c.git);
    std::cout << j.text() << std::endl;
}

/// Median seconds of reps runs of f (after one warm-up).
template <typename F>
double timeIt(int reps, F&& f) {
    f();
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const double t0 = nowSeconds();
        f();
        t.push_back(nowSeconds() - t0);
    }
    return median(t);
}

struct Build {
    int depth;
    float width;
    int L, M;
};

struct Setting {
    int gp, np;
    int64_t mc;
};

std::vector<Build> parseBuilds(const std::string& s) {
    // "d0w1.0L10M8,d2w1.0L10M8"
    std::vector<Build> out;
    for (const std::string& item : parseList(s)) {
        Build b{0, 1.f, 10, 8};
        if (std::sscanf(item.c_str(), "d%dw%fL%dM%d", &b.depth, &b.width, &b.L, &b.M) < 2)
            throw std::invalid_argument("bad --builds item '" + item + "' (dDEPTHwWIDTH[LlMm])");
        out.push_back(b);
    }
    return out;
}

std::vector<Setting> parseSettings(const std::string& s) {
    // "g1p1m0,g1p2m0"
    std::vector<Setting> out;
    for (const std::string& item : parseList(s)) {
        Setting st{1, 1, 0};
        long long mc = 0;
        if (std::sscanf(item.c_str(), "g%dp%dm%lld", &st.gp, &st.np, &mc) != 3)
            throw std::invalid_argument("bad --settings item '" + item + "' (gGROUPSpPROBESmMINCAND)");
        st.mc = mc;
        out.push_back(st);
    }
    return out;
}

std::string paramsOf(const Build& b, const Setting& s, const std::string& extra = "") {
    JsonLine p;
    p.integer("depth", b.depth).num("bucket_width", b.width).integer("L", b.L).integer("M", b.M);
    p.integer("group_probes", s.gp).integer("nprobe", s.np).integer("min_candidates", s.mc);
    if (!extra.empty()) p.str("note", extra);
    return p.text();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args args(argc, argv, {"help", "git"});
        if (args.printedHelpOrGit(
                    "bench_lsh (--base F --query F [--max-nq N] | --gen N [--nq Q (10000)] [--d D (128)]\n"
                    "          [--seed S (1234)]) [--dataset NAME] [--builds d0w1L10M8,...]\n"
                    "          [--settings g1p1m0,...] [--nq-cpu 200] [--hnsw-max-nb 2000000]\n"
                    "          [--hnsw-ef 16,32,64,128,256] [--lsh-nbits 64,256,1024]\n"
                    "          [--wq-k 1,10,100,500] [--reps 3]\n"))
            return 0;
        args.checkKnown({"help", "git", "base", "query", "gen", "nq", "dataset", "builds",
                         "settings", "nq-cpu", "hnsw-max-nb", "lsh-nbits", "wq-k", "reps", "max-nq",
                         "d", "seed", "hnsw-ef"});
        Ctx c;
        c.git = gitCommit();
        c.cpu = cpuName();
        c.reps = int(args.getInt("reps", 3));
        cudaDeviceProp prop;
        FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        c.gpu = prop.name;
        if (args.has("gen")) {
            ClusteredSpec spec;
            spec.d = int(args.getInt("d", 128));
            spec.seed = uint64_t(args.getInt("seed", 1234));
            const int64_t n = args.getInt("gen", 1000000);
            spec.clusters = defaultClusters(n);
            c.base = generateClustered(spec, n, 0);
            c.query = generateClustered(spec, args.getInt("nq", 10000), 1);
            c.dataset = args.get("dataset", "clustered-" + std::to_string(n / 1000) + "k");
        } else {
            c.base = readVectors(args.get("base"));
            c.query = readVectors(args.get("query"), args.getInt("max-nq", 0));
            c.dataset = args.get("dataset", args.get("base"));
        }
        const int64_t nb = c.base.n, nq = c.query.n;
        const int d = c.base.d;
        const float* xb = c.base.x.data();
        const float* xq = c.query.x.data();
        std::fprintf(stderr, "bench_lsh: %s nb %lld nq %lld d %d on %s / %s\n", c.dataset.c_str(),
                     (long long)nb, (long long)nq, d, c.gpu.c_str(), c.cpu.c_str());
        gpu::StandardGpuResources res;

        // ---- exact GPU anchor and ground truth ----
        double exactQps = 0;
        {
            gpu::GpuIndexQuickSelectFlat ex(&res, d);
            ex.add(nb, xb);
            c.gtI.resize(size_t(nq) * kRecallK);
            std::vector<float> D(size_t(nq) * kRecallK);
            const double s = timeIt(c.reps, [&] { ex.search(nq, xq, kRecallK, D.data(), c.gtI.data()); });
            exactQps = nq / s;
            JsonLine j = head(c, "ours:exact", c.gpu, nq, kRecallK);
            j.raw("params", JsonLine().str("io", "host").text());
            j.num("seconds", s).num("qps", exactQps).num("recall", 1.0);
            emit(j, c);
        }

        const std::vector<Build> builds =
            parseBuilds(args.get("builds", "d0w1.0L10M8,d2w1.0L10M8"));
        const std::vector<Setting> settings =
            parseSettings(args.get("settings", "g1p1m0,g1p2m0,g1p3m0,g1p4m0,g1p6m0,g2p2m0,g2p4m0"));
        const int64_t nqCpu = std::min<int64_t>(nq, args.getInt("nq-cpu", 200));
        std::vector<int64_t> I(size_t(nq) * kRecallK);
        std::vector<float> D(size_t(nq) * kRecallK);
        Build wqBuild = builds.front();
        Setting wqSetting = settings.front();
        double bestAt90 = -1;
        for (const Build& b : builds) {
            BiLevelLSHConfig cfg;
            cfg.treeDepth = b.depth;
            cfg.bucketWidth = b.width;
            cfg.nTables = b.L;
            cfg.nProjections = b.M;
            if ((int64_t(1) << b.depth) > nb) continue;
            gpu::GpuIndexBiLevelLSH g(&res, d, cfg);
            double t0 = nowSeconds();
            g.train(nb, xb);
            const double tTrain = nowSeconds() - t0;
            t0 = nowSeconds();
            g.add(nb, xb);
            const double tAdd = nowSeconds() - t0;
            {
                JsonLine j = head(c, "ours:bilsh-build", c.gpu, 0, 0);
                JsonLine p;
                p.integer("depth", b.depth).num("bucket_width", b.width).integer("L", b.L).integer("M", b.M);
                p.num("train_seconds", tTrain).num("add_seconds", tAdd);
                p.integer("bucket_keys", int64_t(g.numBucketKeys())).num("cuckoo_load", g.cuckooLoad());
                j.raw("params", p.text()).num("seconds", tTrain + tAdd);
                emit(j, c);
            }
            IndexBiLevelLSH twin(d, cfg);
            g.copyTo(&twin);
            for (const Setting& st : settings) {
                if (st.gp > (1 << b.depth)) continue;
                SearchParametersBiLevelLSH sp;
                sp.groupProbes = st.gp;
                sp.nprobe = st.np;
                sp.minCandidates = st.mc;
                sp.shortList = BiLevelShortList::WorkQueue;
                const double s = timeIt(c.reps, [&] { g.search(nq, xq, kRecallK, D.data(), I.data(), &sp); });
                const double rec = recall10(c, nq, I.data(), kRecallK);
                std::vector<int64_t> lims, ids;
                const int64_t nc = std::min<int64_t>(nq, 1000);
                g.getCandidates(nc, xq, kRecallK, &lims, &ids, &sp);
                const double candPerQuery = double(lims[nc]) / double(nc);
                {
                    JsonLine j = head(c, "ours:bilsh-wq", c.gpu, nq, kRecallK);
                    j.raw("params", paramsOf(b, st));
                    j.num("seconds", s).num("qps", nq / s).num("recall", rec);
                    j.num("candidates_per_query", candPerQuery).num("speedup_vs_exact", (nq / s) / exactQps);
                    emit(j, c);
                }
                if (rec >= 0.9 && nq / s > bestAt90) {
                    bestAt90 = nq / s;
                    wqBuild = b;
                    wqSetting = st;
                }
                // the CPU twin on one thread, same tables, nqCpu queries evenly
                // spaced over the query set (the first ones of a scan are not typical)
                {
                    const int64_t stride = nq / nqCpu;
                    std::vector<float> sub(size_t(nqCpu) * d);
                    for (int64_t i = 0; i < nqCpu; ++i)
                        std::copy(xq + size_t(i * stride) * d, xq + size_t(i * stride + 1) * d,
                                  sub.begin() + size_t(i) * d);
                    const int saved = omp_get_max_threads();
                    omp_set_num_threads(1);
                    std::vector<int64_t> Ic(size_t(nqCpu) * kRecallK);
                    std::vector<float> Dc(size_t(nqCpu) * kRecallK);
                    const double t1 = nowSeconds();
                    twin.search(nqCpu, sub.data(), kRecallK, Dc.data(), Ic.data(), &sp);
                    const double sc = nowSeconds() - t1;
                    omp_set_num_threads(saved);
                    // score against the GPU index's results of the same queries' rows
                    int64_t same = 0;
                    for (int64_t i = 0; i < nqCpu; ++i)
                        for (int j = 0; j < kRecallK; ++j)
                            same += Ic[size_t(i) * kRecallK + j] == I[size_t(i * stride) * kRecallK + j];
                    JsonLine j = head(c, "cpu-twin:1", c.cpu, nqCpu, kRecallK);
                    j.raw("params", paramsOf(b, st, "one thread, same tables as the GPU index, "
                                                    "queries evenly spaced"));
                    j.num("seconds", sc).num("qps", nqCpu / sc);
                    j.num("same_ids_as_gpu", double(same) / double(nqCpu * kRecallK));
                    emit(j, c);
                }
            }
        }

        // ---- work queue against the per-query heap over k ----
        {
            BiLevelLSHConfig cfg;
            cfg.treeDepth = wqBuild.depth;
            cfg.bucketWidth = wqBuild.width;
            cfg.nTables = wqBuild.L;
            cfg.nProjections = wqBuild.M;
            gpu::GpuIndexBiLevelLSH g(&res, d, cfg);
            g.train(nb, xb);
            g.add(nb, xb);
            for (int64_t k : parseIntList(args.get("wq-k", "1,10,100,500"))) {
                if (k > nb) continue;
                std::vector<int64_t> Ik(size_t(nq) * k);
                std::vector<float> Dk(size_t(nq) * k);
                for (auto mode : {BiLevelShortList::Heap, BiLevelShortList::WorkQueue}) {
                    SearchParametersBiLevelLSH sp;
                    sp.groupProbes = wqSetting.gp;
                    sp.nprobe = wqSetting.np;
                    sp.minCandidates = wqSetting.mc;
                    sp.shortList = mode;
                    const double s = timeIt(c.reps, [&] { g.search(nq, xq, k, Dk.data(), Ik.data(), &sp); });
                    JsonLine j = head(c, mode == BiLevelShortList::Heap ? "ours:bilsh-heap" : "ours:bilsh-wq",
                                      c.gpu, nq, k);
                    j.raw("params", paramsOf(wqBuild, wqSetting, "short-list comparison"));
                    j.num("seconds", s).num("qps", nq / s);
                    if (k >= kRecallK) j.num("recall", recall10(c, nq, Ik.data(), k));
                    emit(j, c);
                }
            }
        }

        // ---- FAISS CPU anchors, all cores ----
        omp_set_num_threads(omp_get_num_procs());
        for (int64_t nbits : parseIntList(args.get("lsh-nbits", "64,256,1024"))) {
            faiss::IndexLSH lsh(d, int(nbits), true, true);
            // thresholds from at most 100k vectors: FAISS sorts all n values of
            // every bit on one thread (1M x 1024 bits: ~100 s and 8 GB)
            const int64_t nTrain = std::min<int64_t>(nb, 100000);
            double t0 = nowSeconds();
            lsh.train(nTrain, xb);
            lsh.add(nb, xb);
            const double tb = nowSeconds() - t0;
            const double s = timeIt(1, [&] { lsh.search(nq, xq, kRecallK, D.data(), I.data()); });
            JsonLine j = head(c, "faiss-cpu:IndexLSH", c.cpu, nq, kRecallK);
            j.raw("params", JsonLine().integer("nbits", nbits).boolean("rotate", true)
                                .boolean("train_thresholds", true).integer("train_n", nTrain)
                                .num("build_seconds", tb)
                                .integer("threads", omp_get_max_threads()).text());
            j.num("seconds", s).num("qps", nq / s).num("recall", recall10(c, nq, I.data(), kRecallK));
            emit(j, c);
        }
        if (nb <= args.getInt("hnsw-max-nb", 2000000)) {
            faiss::IndexHNSWFlat hnsw(d, 32);
            const double t0 = nowSeconds();
            hnsw.add(nb, xb);
            const double tb = nowSeconds() - t0;
            for (int64_t ef : parseIntList(args.get("hnsw-ef", "16,32,64,128,256"))) {
                hnsw.hnsw.efSearch = int(ef);
                const double s = timeIt(1, [&] { hnsw.search(nq, xq, kRecallK, D.data(), I.data()); });
                JsonLine j = head(c, "faiss-cpu:IndexHNSWFlat", c.cpu, nq, kRecallK);
                j.raw("params", JsonLine().integer("M", 32).integer("efConstruction", 40)
                                    .integer("efSearch", ef).num("build_seconds", tb)
                                    .integer("threads", omp_get_max_threads()).text());
                j.num("seconds", s).num("qps", nq / s).num("recall", recall10(c, nq, I.data(), kRecallK));
                emit(j, c);
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "bench_lsh: " << e.what() << std::endl;
        return 1;
    }
}
