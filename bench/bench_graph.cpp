// bench_graph: the `graph` suite's C++ side (DESIGN.md, "Benchmarks";
// bench/README.md). Approximate k-NN graphs of one data set, in one process:
//   ours:knngraph-exact   the exact 10-NN graph on the GPU
//                         (GpuIndexQuickSelectFlat::knnGraph): the brute-force
//                         anchor, and the recall reference when no stored
//                         exact graph is given (checked on sampled rows
//                         against FAISS's exact CPU search)
//   ours:gnnd-k<K>-p<P>   GpuKnnGraphGNND, degree K, P samples per list and
//                         kind, one add from device memory
//   faiss-cpu:nndescent-K<K>-iter<I>
//                         faiss::IndexNNDescentFlat on the CPU, all cores
//                         (skipped when its estimated time passes --faiss-max)
//   ours:ggm-k<K>         GpuKnnGraphGNND: add the first half, then the second
//                         (GNND of the second half + GGM merge), against the
//                         one-shot build of the same configuration
//   ours:gnnd-ooc-k<K>    gnndBuildFromFile on the set written as a raw file,
//                         with a device memory limit that forces shards
// Each line: build seconds and recall@10 (ids in the first 10 of each list
// that are among the exact 10 nearest, ties counted by distance; the row
// itself and repeated ids never count), JSON on stdout, progress on stderr.
//
//   bench_graph (--base F | --gen N) [--dataset NAME] [--gt F.ivecs] [--ks 32,64]
//               [--samples 8,12,16,24,32] [--methods exact,ours,faiss,ggm,ooc] ...
#include "bench/BenchData.h"
#include "bench/BenchDevice.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexNNDescent.h>
#include <omp.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage = R"(bench_graph: the graph suite (approximate k-NN graphs) on one data set; JSON lines on stdout.
  --base F               vectors (.fvecs, .bvecs, .fbin, IDX[.gz]), or
  --gen N                N generated clustered vectors (bench/BenchData.h; the flat suite's set: --d, --seed)
  --d D                  dimension of --gen (default 128)
  --seed S               seed of --gen (default 1234)
  --n N                  at most N vectors of --base (default: all)
  --dataset NAME         name written in every line (default: clustered for --gen, else the file name)
  --gt F                 stored exact k-NN graph (.ivecs, self excluded, >= 10 columns, one row per vector);
                         without it the exact GPU graph is the reference
  --methods LIST         of exact, ours, faiss, ggm, ooc (default: exact,ours,faiss)
  --ks LIST              graph degrees of ours (default 32,64)
  --samples LIST         samples p of ours (default 8,12,16,24,32)
  --reps R               timed builds per setting of ours, median reported (default 1; one warm-up build first)
  --recall-rows N        rows scored (spread evenly), 0 = all (default 0)
  --faiss-K K            FAISS NN-Descent degree K (default 64)
  --faiss-iters LIST     FAISS NN-Descent iterations (default 10,20)
  --faiss-max S          skip a FAISS setting whose estimated time is above S seconds (default 600)
  --faiss-deadline T     also skip it when it would end after T (seconds since the epoch; run_suite's budget)
  --faiss-cost-file F    seconds per (vector x iteration x max(d, 32)) of FAISS NN-Descent per iteration
                         count, read at the start and updated after each FAISS run: how settings are
                         estimated across runs
  --ggm-k K              degree of the GGM comparison (default 32)
  --ooc-k K              degree of the out-of-core build (default 32)
  --ooc-shards S         shards the device memory limit of the out-of-core build aims at (default 4)
  --ooc-limit-mb M       that limit in MiB instead (default: from estimateMemory for S shards)
  --ooc-shard-size N     explicit shard size (default 0: the builder picks from the limit)
  --tmp DIR              folder for the out-of-core files (default /tmp)
  --git                  print the commit compiled in and exit
)";

constexpr int kRecallAt = 10;

std::string envOr(const char* name, const char* def) {
    const char* v = std::getenv(name);
    return v ? v : def;
}

void emit(const JsonLine& j) {
    std::printf("%s\n", j.text().c_str());
    std::fflush(stdout);
}

void syncDevice() {
    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
}

/// The data set and the recall reference.
struct Ctx {
    std::string dataset, git, gpuName, cpu;
    Matrix base;
    std::vector<int64_t> rows;   ///< rows scored
    std::vector<int64_t> ref;    ///< rows.size() x 10 exact neighbours (self excluded)
    std::string refKind;         ///< what `ref` is
    bool haveRef = false;
};

JsonLine head(const Ctx& c, const std::string& method, const std::string& algo, const std::string& device,
              int64_t k) {
    JsonLine j;
    j.str("suite", "graph").str("dataset", c.dataset).str("method", method).str("algo", algo);
    j.str("device", device).integer("nb", c.base.n).integer("d", c.base.d).integer("nq", c.base.n);
    j.integer("k", k);
    return j;
}

/// Recall@10 of a graph (ids: n x k, row i = list of vector i) on the scored rows.
double scoreGraph(const Ctx& c, const int* ids, int k) {
    if (!c.haveRef || k < kRecallAt) return NAN;
    const int64_t m = int64_t(c.rows.size());
    std::vector<int64_t> mine(size_t(m) * kRecallAt);
#pragma omp parallel for
    for (int64_t q = 0; q < m; ++q) {
        const int64_t row = c.rows[q];
        int64_t* out = mine.data() + size_t(q) * kRecallAt;
        for (int j = 0; j < kRecallAt; ++j) {
            int64_t id = ids[size_t(row) * k + j];
            if (id < 0 || id >= c.base.n || id == row || std::find(out, out + j, id) != out + j) id = -1;
            out[j] = id;
        }
    }
    const int d = c.base.d;
    auto l2 = [&](int64_t q, int64_t id) {
        const float* a = c.base.x.data() + size_t(c.rows[q]) * d;
        const float* b = c.base.x.data() + size_t(id) * d;
        double s = 0;
        for (int t = 0; t < d; ++t) {
            const double u = double(a[t]) - double(b[t]);
            s += u * u;
        }
        return s;
    };
    // Rows in chunks over the cores (each row has 10 reference ids, so the
    // chunks' recalls weigh by their row counts).
    const int64_t chunk = 8192;
    const int64_t nChunks = (m + chunk - 1) / chunk;
    double weighted = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : weighted)
    for (int64_t ci = 0; ci < nChunks; ++ci) {
        const int64_t q0 = ci * chunk, mq = std::min(chunk, m - q0);
        auto dist = [&](int64_t q, int64_t id) { return l2(q0 + q, id); };
        weighted += double(mq) * recallAtK(mq, kRecallAt, mine.data() + size_t(q0) * kRecallAt, kRecallAt,
                                           c.ref.data() + size_t(q0) * kRecallAt, kRecallAt, dist, false);
    }
    return weighted / double(m);
}

/// What one GNND build gave.
struct BuildResult {
    double seconds = NAN;
    double recall = NAN;
};

/// FAISS NN-Descent's cost model: seconds per (vector x iteration x
/// max(d, 32)), per iteration count (later iterations cost more, as the
/// candidate pools fill: 10 iterations took 4x the time of 5 on siftsmall).
using CostTable = std::map<int, double>;

/// Reads "iterations seconds-per-unit" lines (empty when absent).
CostTable readCosts(const std::string& path) {
    CostTable t;
    if (path.empty()) return t;
    std::ifstream f(path);
    int it = 0;
    double v = 0;
    while (f >> it >> v)
        if (it > 0 && v > 0 && std::isfinite(v)) t[it] = std::max(t[it], v);
    return t;
}

void writeCosts(const std::string& path, const CostTable& t) {
    if (path.empty()) return;
    std::ofstream f(path);
    for (const auto& [it, v] : t) f << it << " " << v << "\n";
}

/// FAISS NN-Descent's work, in the units of the cost table.
double faissWork(int64_t n, int iters, int d) {
    return double(n) * iters * std::max(d, 32);
}

/// Estimated seconds of a FAISS build (NaN without a measurement): the cost
/// at the same iteration count, else at the nearest smaller one scaled by
/// the ratio once more (quadratic in the iterations, an overestimate), else
/// at the nearest larger one; times 1.3 for margin.
double faissEstimate(const CostTable& t, int64_t n, int iters, int d) {
    if (t.empty()) return NAN;
    auto it = t.find(iters);
    double c;
    if (it != t.end()) {
        c = it->second;
    } else {
        auto up = t.upper_bound(iters);
        if (up != t.begin()) {
            auto lo = std::prev(up);
            c = lo->second * double(iters) / lo->first;
        } else {
            c = up->second;
        }
    }
    return 1.3 * c * faissWork(n, iters, d);
}

}  // namespace

int main(int argc, char** argv) {
    int failures = 0;
    try {
        Args args(argc, argv, {"help", "git"});
        if (args.printedHelpOrGit(kUsage)) return 0;
        args.checkKnown({"base", "gen", "d", "seed", "n", "dataset", "gt", "methods", "ks", "samples", "reps",
                         "recall-rows", "faiss-K", "faiss-iters", "faiss-max", "faiss-deadline", "faiss-cost-file", "ggm-k", "ooc-k",
                         "ooc-shards", "ooc-limit-mb", "ooc-shard-size", "tmp", "help", "git"});
        if (args.has("base") == args.has("gen")) throw std::invalid_argument("give one of --base and --gen (see --help)");

        Ctx c;
        c.git = gitCommit();
        c.cpu = cpuName();
        double t0 = nowSeconds();
        if (args.has("gen")) {
            ClusteredSpec spec;
            const int64_t n = args.getInt("gen", 100000);
            spec.d = int(args.getInt("d", 128));
            spec.seed = uint64_t(args.getInt("seed", 1234));
            spec.clusters = defaultClusters(n);
            c.base = generateClustered(spec, n, 0);
            c.dataset = args.get("dataset", "clustered");
        } else {
            c.base = readVectors(args.get("base"), args.getInt("n", 0));
            c.dataset = args.get("dataset", args.get("base"));
        }
        const int64_t n = c.base.n;
        const int d = c.base.d;
        std::fprintf(stderr, "[bench_graph] %s: n=%lld d=%d (%.1f s to load)\n", c.dataset.c_str(), (long long)n, d,
                     nowSeconds() - t0);
        auto methods = parseList(args.get("methods", "exact,ours,faiss"));
        auto wants = [&](const char* m) { return std::find(methods.begin(), methods.end(), m) != methods.end(); };
        const std::vector<int64_t> ks = parseIntList(args.get("ks", "32,64"));
        const std::vector<int64_t> samples = parseIntList(args.get("samples", "8,12,16,24,32"));
        const int reps = int(std::max<int64_t>(1, args.getInt("reps", 1)));
        if (n <= kRecallAt + 1) throw std::invalid_argument("the data set needs more than 11 vectors");

        // Rows scored.
        const int64_t recallRows = args.getInt("recall-rows", 0);
        const int64_t m = recallRows > 0 ? std::min(recallRows, n) : n;
        for (int64_t i = 0; i < m; ++i) c.rows.push_back(i * n / m);

        // A stored exact graph, when it matches the set.
        if (args.has("gt")) {
            try {
                IntMatrix gt = readIvecs(args.get("gt"));
                if (gt.n != n || gt.d < kRecallAt)
                    throw std::runtime_error("it is " + std::to_string(gt.n) + " x " + std::to_string(gt.d) +
                                             ", the set has " + std::to_string(n) + " rows and recall needs 10 columns");
                c.ref.resize(size_t(m) * kRecallAt);
                for (int64_t q = 0; q < m; ++q)
                    for (int j = 0; j < kRecallAt; ++j)
                        c.ref[size_t(q) * kRecallAt + j] = gt.x[size_t(c.rows[q]) * gt.d + j];
                c.refKind = "stored exact graph " + args.get("gt");
                c.haveRef = true;
            } catch (const std::exception& e) {
                std::fprintf(stderr, "[bench_graph] --gt not used: %s\n", e.what());
            }
        }

        // Without a GPU only FAISS runs, and only against a stored exact graph.
        const bool haveGpu = gpu::getNumDevices() > 0;
        if (!haveGpu && !(wants("faiss") && c.haveRef)) {
            std::fprintf(stderr, "[bench_graph] no GPU found: nothing to measure\n");
            return 0;
        }
        std::unique_ptr<gpu::StandardGpuResources> resPtr;
        std::unique_ptr<DeviceArray<float>> dXPtr;
        const float* dXp = nullptr;
        if (haveGpu) {
            FAISS_EXT_CUDA_CHECK(cudaSetDevice(0));
            cudaDeviceProp prop;
            FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
            c.gpuName = prop.name;
            resPtr.reset(new gpu::StandardGpuResources());
            dXPtr.reset(new DeviceArray<float>(c.base.x.size()));
            FAISS_EXT_CUDA_CHECK(cudaMemcpy(dXPtr->p, c.base.x.data(), c.base.x.size() * sizeof(float),
                                            cudaMemcpyHostToDevice));
            dXp = dXPtr->p;
        } else {
            std::fprintf(stderr, "[bench_graph] no GPU found: FAISS on the CPU only\n");
        }
        gpu::StandardGpuResources* resP = resPtr.get();

        // ---- The exact graph on the GPU: the brute-force anchor (and the reference) ----
        if (haveGpu && (wants("exact") || !c.haveRef)) {
            try {
                gpu::GpuIndexQuickSelectFlat flat(resP, d, FlatMetric::L2);
                flat.add(n, dXp);
                DeviceArray<int64_t> dI(size_t(n) * kRecallAt);
                {
                    // Warm-up on a slice (kernels, pool), then one timed run.
                    const int64_t w = std::min<int64_t>(n, 20000);
                    gpu::GpuIndexQuickSelectFlat warm(resP, d, FlatMetric::L2);
                    warm.add(w, dXp);
                    warm.knnGraph(std::min<int64_t>(kRecallAt, w - 1), true, nullptr, dI.p);
                    syncDevice();
                }
                t0 = nowSeconds();
                flat.knnGraph(kRecallAt, true, nullptr, dI.p);
                syncDevice();
                const double sec = nowSeconds() - t0;
                std::vector<int64_t> exact(size_t(n) * kRecallAt);
                FAISS_EXT_CUDA_CHECK(cudaMemcpy(exact.data(), dI.p, exact.size() * sizeof(int64_t),
                                                cudaMemcpyDeviceToHost));
                // Check the GPU graph against FAISS's exact CPU search on 64 rows.
                const int64_t nCheck = std::min<int64_t>(64, n);
                double check = NAN;
                {
                    faiss::IndexFlatL2 cpuIndex(d);
                    cpuIndex.add(n, c.base.x.data());
                    std::vector<float> q(size_t(nCheck) * d), D(size_t(nCheck) * (kRecallAt + 1));
                    std::vector<int64_t> I(size_t(nCheck) * (kRecallAt + 1)), cref(size_t(nCheck) * kRecallAt),
                            mine(size_t(nCheck) * kRecallAt);
                    std::vector<int64_t> checkRows;
                    for (int64_t i = 0; i < nCheck; ++i) {
                        checkRows.push_back(i * n / nCheck);
                        std::copy_n(c.base.x.data() + size_t(checkRows[i]) * d, d, q.data() + size_t(i) * d);
                        std::copy_n(exact.data() + size_t(checkRows[i]) * kRecallAt, kRecallAt,
                                    mine.data() + size_t(i) * kRecallAt);
                    }
                    cpuIndex.search(nCheck, q.data(), kRecallAt + 1, D.data(), I.data());
                    for (int64_t i = 0; i < nCheck; ++i) {
                        int o = 0;
                        for (int j = 0; j <= kRecallAt && o < kRecallAt; ++j)
                            if (I[size_t(i) * (kRecallAt + 1) + j] != checkRows[i])
                                cref[size_t(i) * kRecallAt + o++] = I[size_t(i) * (kRecallAt + 1) + j];
                    }
                    auto l2 = [&](int64_t qi, int64_t id) {
                        double s = 0;
                        for (int t = 0; t < d; ++t) {
                            const double u = double(q[size_t(qi) * d + t]) - double(c.base.x[size_t(id) * d + t]);
                            s += u * u;
                        }
                        return s;
                    };
                    check = recallAtK(nCheck, kRecallAt, mine.data(), kRecallAt, cref.data(), kRecallAt, l2, false);
                }
                if (!(check >= 0.999)) {
                    // With a stored float64 ground truth as the reference this is a
                    // finding about the FP32 GEMM-form exact graph (cancellation on data
                    // far from the origin, e.g. the point cloud), not a failed run.
                    if (!c.haveRef) ++failures;
                    std::fprintf(stderr, "[bench_graph] %s: the exact GPU graph disagrees with FAISS on %lld rows: %.4f\n",
                                 c.haveRef ? "note" : "error", (long long)nCheck, check);
                }
                std::vector<int> ids32(exact.begin(), exact.end());
                double recall = 1.0;
                if (c.haveRef) {
                    recall = scoreGraph(c, ids32.data(), kRecallAt);
                } else {
                    c.ref.resize(size_t(m) * kRecallAt);
                    for (int64_t q = 0; q < m; ++q)
                        std::copy_n(exact.data() + size_t(c.rows[q]) * kRecallAt, kRecallAt,
                                    c.ref.data() + size_t(q) * kRecallAt);
                    c.refKind = "exact GPU graph (GpuIndexQuickSelectFlat::knnGraph), checked against faiss-cpu "
                                "IndexFlatL2 on 64 rows";
                    c.haveRef = true;
                }
                JsonLine p;
                p.integer("reps", 1).str("io", "device").boolean("exclude_self", true);
                p.num("check_vs_faiss_cpu", check).integer("check_rows", nCheck);
                p.str("recall_ref", c.refKind).integer("recall_rows", m);
                JsonLine j = head(c, "ours:knngraph-exact", "exact", c.gpuName, kRecallAt);
                j.raw("params", p.text()).num("seconds", sec).num("recall", recall).str("git", c.git);
                emit(j);
                std::fprintf(stderr, "[bench_graph] exact 10-NN graph on the GPU: %.3f s (recall %.4f, check vs FAISS "
                             "%.4f)\n", sec, recall, check);
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_graph] exact graph failed: %s\n", e.what());
            }
        }
        if (!c.haveRef) throw std::runtime_error("no recall reference (no --gt and the exact graph failed)");
        std::fprintf(stderr, "[bench_graph] recall reference: %s, %lld rows\n", c.refKind.c_str(), (long long)m);

        // ---- Ours: GNND, sweep over k and p ----
        std::map<std::pair<int, int>, BuildResult> built;  // (k, p) -> result
        auto buildOurs = [&](int k, int p, bool emitLine) -> BuildResult {
            gpu::GpuKnnGraphGNNDConfig cfg;
            cfg.samples = p;
            std::vector<double> times;
            std::vector<int> graph;
            std::vector<gpu::GnndIterationStats> log;
            int buildDegree = 0;
            for (int r = 0; r < reps; ++r) {
                gpu::GpuKnnGraphGNND index(resP, d, k, FlatMetric::L2, cfg);
                syncDevice();
                t0 = nowSeconds();
                index.add(n, dXp);
                syncDevice();
                times.push_back(nowSeconds() - t0);
                if (r == reps - 1) {
                    graph = index.getGraphInt();
                    log = index.getBuildLog();
                    buildDegree = index.getBuildDegree();
                }
            }
            BuildResult br;
            br.seconds = median(times);
            br.recall = scoreGraph(c, graph.data(), k);
            if (emitLine) {
                double iterSec = 0;
                for (const auto& s : log) iterSec += s.seconds;
                JsonLine p2;
                p2.integer("samples", p).integer("build_degree", buildDegree).integer("reps", int64_t(times.size()));
                p2.integer("max_iterations", cfg.maxIterations).num("termination_threshold", cfg.terminationThreshold);
                p2.integer("iterations", int64_t(log.size()));
                p2.integer("last_updates", log.empty() ? 0 : log.back().updates).num("iteration_seconds", iterSec);
                p2.str("io", "device").integer("recall_at", kRecallAt).str("recall_ref", c.refKind);
                p2.integer("recall_rows", m);
                JsonLine j = head(c, "ours:gnnd-k" + std::to_string(k) + "-p" + std::to_string(p), "gnnd", c.gpuName, k);
                j.raw("params", p2.text()).num("seconds", br.seconds).num("recall", br.recall).str("git", c.git);
                emit(j);
                std::fprintf(stderr, "[bench_graph] ours k=%d p=%d: %.3f s, %zu iterations, recall@10 %.4f\n", k, p,
                             br.seconds, log.size(), br.recall);
            }
            return br;
        };
        if (haveGpu && (wants("ours") || wants("ggm"))) {
            try {
                // Warm-up: one small build (kernels, memory pool).
                gpu::GpuKnnGraphGNND warm(resP, d, 32);
                warm.add(std::min<int64_t>(n, 20000), dXp);
                syncDevice();
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_graph] warm-up build failed: %s\n", e.what());
            }
        }
        if (haveGpu && wants("ours")) {
            for (int64_t k : ks) {
                for (int64_t p : samples) {
                    try {
                        if (k >= n) throw std::invalid_argument("k >= n");
                        built[{int(k), int(p)}] = buildOurs(int(k), int(p), true);
                    } catch (const std::exception& e) {
                        ++failures;
                        std::fprintf(stderr, "[bench_graph] ours k=%lld p=%lld failed: %s\n", (long long)k,
                                     (long long)p, e.what());
                    }
                }
            }
        }

        // ---- GGM: half, then the other half, against the one-shot build ----
        if (haveGpu && wants("ggm")) {
            try {
                const int k = int(args.getInt("ggm-k", 32));
                gpu::GpuKnnGraphGNNDConfig cfg;
                auto it = built.find({k, cfg.samples});
                const BuildResult oneShot = it != built.end() ? it->second : buildOurs(k, cfg.samples, false);
                const int64_t half = n / 2;
                gpu::GpuKnnGraphGNND index(resP, d, k, FlatMetric::L2, cfg);
                syncDevice();
                t0 = nowSeconds();
                index.add(half, dXp);
                syncDevice();
                const double first = nowSeconds() - t0;
                const size_t before = index.getBuildLog().size();
                t0 = nowSeconds();
                index.add(n - half, dXp + size_t(half) * d);
                syncDevice();
                const double second = nowSeconds() - t0;
                double mergeSec = 0, build2Sec = 0;
                int mergeIters = 0;
                const auto& log = index.getBuildLog();
                for (size_t i = before; i < log.size(); ++i) {
                    if (log[i].merge) {
                        mergeSec += log[i].seconds;
                        ++mergeIters;
                    } else {
                        build2Sec += log[i].seconds;
                    }
                }
                const std::vector<int> graph = index.getGraphInt();
                const double recall = scoreGraph(c, graph.data(), k);
                JsonLine p;
                p.str("split", std::to_string(half) + "+" + std::to_string(n - half)).integer("samples", cfg.samples);
                p.num("first_add_seconds", first).num("second_add_seconds", second);
                p.num("merge_seconds", mergeSec).integer("merge_iterations", mergeIters);
                p.num("second_build_seconds", build2Sec);
                p.num("one_shot_seconds", oneShot.seconds).num("one_shot_recall", oneShot.recall);
                p.str("io", "device").integer("recall_at", kRecallAt).str("recall_ref", c.refKind);
                JsonLine j = head(c, "ours:ggm-k" + std::to_string(k), "ggm", c.gpuName, k);
                j.raw("params", p.text()).num("seconds", first + second).num("recall", recall).str("git", c.git);
                emit(j);
                std::fprintf(stderr, "[bench_graph] GGM k=%d: %.3f s + %.3f s (merge %.3f s, %d iterations), recall "
                             "%.4f; one shot %.3f s, recall %.4f\n", k, first, second, mergeSec, mergeIters, recall,
                             oneShot.seconds, oneShot.recall);
                if (mergeIters == 0) {
                    ++failures;
                    std::fprintf(stderr, "[bench_graph] GGM: no merge iteration in the build log\n");
                }
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_graph] GGM failed: %s\n", e.what());
            }
        }

        // ---- Out of core: the set from a raw file, a device memory limit forcing shards ----
        if (haveGpu && wants("ooc")) {
            const std::string tmp = args.get("tmp", envOr("TMPDIR", "/tmp"));
            const std::string vecPath = tmp + "/bench_graph_ooc_" + std::to_string(n) + ".f32";
            const std::string graphPath = tmp + "/bench_graph_ooc_" + std::to_string(n) + ".ivecs";
            try {
                const int k = int(args.getInt("ooc-k", 32));
                const int targetShards = int(std::max<int64_t>(2, args.getInt("ooc-shards", 4)));
                {
                    std::ofstream f(vecPath, std::ios::binary);
                    f.write(reinterpret_cast<const char*>(c.base.x.data()), c.base.x.size() * sizeof(float));
                    if (!f) throw std::runtime_error("cannot write " + vecPath);
                }
                gpu::GnndFileBuildOptions opt;
                opt.workDir = tmp;
                opt.schedule = gpu::GnndFileSchedule::AllPairs;  // this method measures the shard merges
                opt.shardSize = args.getInt("ooc-shard-size", 0);
                const int64_t shard = (n + targetShards - 1) / targetShards;
                size_t limit = 0;
                if (args.has("ooc-limit-mb")) {
                    limit = size_t(args.getDouble("ooc-limit-mb", 0) * (1 << 20));
                } else {
                    // What the merge of two shards of n / targetShards keeps resident
                    // (vectors and graphs: what the limit counts), plus 2%.
                    const auto e = gpu::GpuKnnGraphGNND::estimateMemory(2 * shard, d, k, opt.config);
                    limit = size_t(1.02 * double(e.vectors + e.graph));
                }
                gpu::StandardGpuResources oocRes;
                oocRes.setDeviceMemoryLimit(limit);
                t0 = nowSeconds();
                const gpu::GnndFileBuildReport rep = gpu::gnndBuildFromFile(
                        {&oocRes}, vecPath, gpu::VectorFileFormat::RawFloat32, d, k, FlatMetric::L2, graphPath, opt);
                const double wall = nowSeconds() - t0;
                int64_t gn = 0;
                int gk = 0;
                const std::vector<int> graph = gpu::readGraphIvecs(graphPath, &gn, &gk);
                if (gn != n || gk != k) throw std::runtime_error("the graph file is " + std::to_string(gn) + " x " +
                                                                 std::to_string(gk));
                const double recall = scoreGraph(c, graph.data(), k);
                auto it = built.find({k, opt.config.samples});
                JsonLine p;
                p.integer("shards", rep.shards).integer("shard_size", rep.shardSize).integer("merges", rep.merges);
                p.integer("target_shards", targetShards).integer("device_memory_limit", int64_t(limit));
                p.integer("data_bytes", int64_t(c.base.x.size() * sizeof(float)));
                p.num("build_seconds", rep.buildSeconds).num("merge_seconds", rep.mergeSeconds);
                p.num("wall_seconds", wall).str("format", "raw float32").str("io", "file (page cache warm)");
                p.integer("samples", opt.config.samples);
                p.num("one_shot_seconds", it != built.end() ? it->second.seconds : NAN);
                p.num("one_shot_recall", it != built.end() ? it->second.recall : NAN);
                p.integer("recall_at", kRecallAt).str("recall_ref", c.refKind);
                JsonLine j = head(c, "ours:gnnd-ooc-k" + std::to_string(k), "gnnd-ooc", c.gpuName, k);
                j.raw("params", p.text()).num("seconds", rep.totalSeconds).num("recall", recall).str("git", c.git);
                emit(j);
                std::fprintf(stderr, "[bench_graph] out of core k=%d: %d shards of %lld (%d merges) under a %.1f MiB "
                             "limit: %.3f s (build %.3f, merge %.3f, wall %.3f), recall %.4f\n", k, rep.shards,
                             (long long)rep.shardSize, rep.merges, limit / 1048576.0, rep.totalSeconds,
                             rep.buildSeconds, rep.mergeSeconds, wall, recall);
                if (rep.shards != targetShards)
                    std::fprintf(stderr, "[bench_graph] note: %d shards, not the %d aimed at (the builder sizes shards "
                                 "its own way; --ooc-limit-mb or --ooc-shard-size set it)\n", rep.shards, targetShards);
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_graph] out-of-core build failed: %s\n", e.what());
            }
            std::remove(vecPath.c_str());
            std::remove(graphPath.c_str());
        }

        // ---- FAISS NN-Descent on the CPU, all cores ----
        if (wants("faiss")) {
            const int K = int(args.getInt("faiss-K", 64));
            const double capSec = args.getDouble("faiss-max", 600);
            const double deadline = args.getDouble("faiss-deadline", 0);
            const std::string costFile = args.get("faiss-cost-file", "");
            CostTable costs = readCosts(costFile);
            for (int64_t iters : parseIntList(args.get("faiss-iters", "10,20"))) {
                if (K >= n) break;
                const std::string method = "faiss-cpu:nndescent-K" + std::to_string(K) + "-iter" + std::to_string(iters);
                JsonLine p;
                p.integer("K", K).integer("iter", iters).integer("S", 10).integer("R", 100).integer("L", K + 50);
                p.integer("omp_threads", omp_get_max_threads()).str("OMP_WAIT_POLICY", envOr("OMP_WAIT_POLICY", "unset"));
                const double est = faissEstimate(costs, n, int(iters), d);
                const double maxSec =
                        deadline > 0 ? std::min(capSec, deadline - double(std::time(nullptr))) : capSec;
                if (est > maxSec || maxSec <= 0) {
                    p.boolean("skipped", true).num("estimate_seconds", est).num("max_seconds", maxSec);
                    p.str("note", "estimated from earlier FAISS runs of the suite (time per vector x iteration x "
                                  "max(d, 32) at that iteration count, x1.3)");
                    JsonLine j = head(c, method, "faiss-nndescent", c.cpu, K);
                    j.raw("params", p.text()).null("seconds").null("recall").str("git", c.git);
                    emit(j);
                    std::fprintf(stderr, "[bench_graph] FAISS NN-Descent K=%d iter=%lld skipped: estimated %.0f s, "
                                 "allowed %.0f s (--faiss-max %.0f%s)\n", K, (long long)iters, est, maxSec, capSec,
                                 deadline > 0 ? " and the suite's deadline" : "");
                    continue;
                }
                try {
                    faiss::IndexNNDescentFlat index(d, K);
                    index.nndescent.S = 10;
                    index.nndescent.R = 100;
                    index.nndescent.L = K + 50;
                    index.nndescent.iter = int(iters);
                    index.nndescent.random_seed = 1234;
                    index.verbose = false;
                    std::fprintf(stderr, "[bench_graph] FAISS NN-Descent K=%d iter=%lld on %d threads%s...\n", K,
                                 (long long)iters, omp_get_max_threads(),
                                 std::isfinite(est) ? (" (estimated " + std::to_string(int(est)) + " s)").c_str() : "");
                    t0 = nowSeconds();
                    index.add(n, c.base.x.data());
                    const double sec = nowSeconds() - t0;
                    const double recall = scoreGraph(c, index.nndescent.final_graph.data(), K);
                    costs[int(iters)] = std::max(costs[int(iters)], sec / faissWork(n, int(iters), d));
                    writeCosts(costFile, costs);
                    p.num("estimate_seconds", est).integer("recall_at", kRecallAt).str("recall_ref", c.refKind);
                    p.str("blas", blasDescription());
                    JsonLine j = head(c, method, "faiss-nndescent", c.cpu, K);
                    j.raw("params", p.text()).num("seconds", sec).num("recall", recall).str("git", c.git);
                    emit(j);
                    std::fprintf(stderr, "[bench_graph] FAISS NN-Descent K=%d iter=%lld: %.2f s, recall@10 %.4f\n", K,
                                 (long long)iters, sec, recall);
                } catch (const std::exception& e) {
                    ++failures;
                    std::fprintf(stderr, "[bench_graph] FAISS NN-Descent failed: %s\n", e.what());
                }
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_graph: error: %s\n", e.what());
        return 2;
    }
    return failures ? 1 : 0;
}
