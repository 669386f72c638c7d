// bench_gnnd_schedules: the schedules of gnndBuildFromFile (issue 23) on one
// generated set written as a raw float32 file in chunks (so that sets larger
// than host memory can be made), k = 32, d = 128:
//   in-memory      GpuKnnGraphGNND::add of the whole set (sets that fit;
//                  --add-build one-shot / partitioned / auto)
//   allpairs<S>    gnndBuildFromFile, S contiguous shards, GGM of every pair
//   partitioned<S> gnndBuildFromFile, S k-means clusters (shardSize n / S),
//                  each vector in --overlap of them, one GNND build per cluster,
//                  then (--neighbour-merges M) GGM merges of adjacent clusters
//   partitioned    the same with the cluster count chosen from the device
//                  memory limit (--device-limit-gib)
// Recall@10 on --rows rows sampled (seeded) from the whole file, against
// exact search streamed over the file in chunks (GpuIndexQuickSelectFlat,
// exact). One JSON line per mode on stdout (DESIGN.md's bench schema, suite
// "graph"); progress on stderr.
//   1M comparisons:  bench_gnnd_schedules --n 1M --modes in-memory,allpairs4,allpairs8,partitioned8
//   50M, 8 GiB:      bench_gnnd_schedules --n 50M --modes partitioned --device-limit-gib 8
//   with merges:     ... --modes partitioned --device-limit-gib 8 --neighbour-merges 2
//   10M in memory:   bench_gnnd_schedules --n 10M --modes in-memory --add-build partitioned
#include "bench/AnnData.h"
#include "bench/BenchData.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace faiss_ext::gpu;
using namespace faiss_ext::bench;

namespace {

const char* kUsage = R"(bench_gnnd_schedules: gnndBuildFromFile's schedules on one generated set; JSON lines on stdout.
  --n N                 vectors (default 1M; 50M ...)
  --data NAME           clustered (1000 Gaussian centres, default) or hard (AnnData.h, full rank)
  --modes LIST          of in-memory, allpairs<S>, partitioned<S>, partitioned (default
                        in-memory,allpairs4,allpairs8,partitioned8)
  --overlap O           clusters per vector of the partitioned modes (default: the options' default, 3)
  --neighbour-merges M  partitioned modes: GGM merges per cluster with its adjacent clusters
                        (0 off; default -1, the options' Auto)
  --cluster-build B     partitioned modes: how clusters are built: auto (default), nn-descent, exact
  --exact-cluster-rows R  exact clusters: most vectors per cluster (default 0: the options' default)
  --add-build B         in-memory mode: how add builds: auto (default), one-shot, partitioned
  --device-limit-gib G  device memory limit of the file builds' resources (default: none)
  --build-degree K      list length of the builds (default 0: the file build's 2k, in memory k)
  --iterations I        GNND iterations at most (default 20)
  --rows R              rows sampled for recall@10 (default 2000)
  --workdir DIR         where the vector file and graphs go (default /tmp)
  --reuse               keep and reuse the vector file when it exists with the right size
  --verbose             the builds' progress lines
  --git                 print the commit compiled in and exit
)";

constexpr int kD = 128, kK = 32, kR = 10;
constexpr int64_t kChunk = 16 * kCentresBlockRows;  // rows generated / searched at a time

void progress(const char* fmt, const std::string& s, double secs) {
    std::fprintf(stderr, fmt, s.c_str(), secs);
    std::fflush(stderr);
}

/// Rows [r0, r0 + m) of the set.
std::vector<float> generateRows(const std::string& data, int64_t r0, int64_t m) {
    if (data == "hard") {
        HardSpec spec;
        spec.d = kD;
        return generateHardRows(spec, r0, m, 0).x;
    }
    std::vector<float> x(size_t(m) * kD);
    generateCentresRows(r0, m, kD, x.data());
    return x;
}

int64_t fileBytes(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : -1;
}

void writeSet(const std::string& path, const std::string& data, int64_t n) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + path);
    for (int64_t r0 = 0; r0 < n; r0 += kChunk) {
        const std::vector<float> x = generateRows(data, r0, std::min(kChunk, n - r0));
        if (std::fwrite(x.data(), sizeof(float), x.size(), f) != x.size()) {
            std::fclose(f);
            throw std::runtime_error("cannot write " + path + " (disk full?)");
        }
    }
    if (std::fclose(f) != 0) throw std::runtime_error("cannot write " + path);
}

/// Rows of the file (raw float32, kD), read one by one.
std::vector<float> readRows(const std::string& path, const std::vector<int64_t>& rows) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot read " + path);
    std::vector<float> q(rows.size() * kD);
    for (size_t i = 0; i < rows.size(); ++i) {
        if (fseeko(f, off_t(rows[i]) * kD * 4, SEEK_SET) != 0 ||
            std::fread(&q[i * kD], 4, kD, f) != size_t(kD)) {
            std::fclose(f);
            throw std::runtime_error("short read in " + path);
        }
    }
    std::fclose(f);
    return q;
}

/// Exact 10 nearest neighbours (self excluded) of the sampled rows: the
/// file searched in chunks by GpuIndexQuickSelectFlat, the chunks' top 11
/// merged by distance.
std::vector<int64_t> groundTruth(const std::string& path, int64_t n,
                                 const std::vector<int64_t>& rows, const std::vector<float>& q) {
    const size_t nq = rows.size();
    const int kk = kR + 1;
    std::vector<std::vector<std::pair<float, int64_t>>> best(nq);
    StandardGpuResources res;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot read " + path);
    std::vector<float> x, D(nq * kk);
    std::vector<int64_t> I(nq * kk);
    for (int64_t r0 = 0; r0 < n; r0 += kChunk) {
        const int64_t m = std::min(kChunk, n - r0);
        x.resize(size_t(m) * kD);
        if (std::fread(x.data(), 4, x.size(), f) != x.size()) {
            std::fclose(f);
            throw std::runtime_error("short read in " + path);
        }
        GpuIndexQuickSelectFlat flat(&res, kD);
        flat.add(m, x.data());
        const int kc = int(std::min<int64_t>(kk, m));
        flat.search(int64_t(nq), q.data(), kc, D.data(), I.data());
        for (size_t i = 0; i < nq; ++i) {
            for (int j = 0; j < kc; ++j)
                if (I[i * kc + j] >= 0) best[i].push_back({D[i * kc + j], r0 + I[i * kc + j]});
            std::sort(best[i].begin(), best[i].end());
            if (int(best[i].size()) > kk) best[i].resize(kk);
        }
    }
    std::fclose(f);
    std::vector<int64_t> gt(nq * kR, -1);
    for (size_t i = 0; i < nq; ++i) {
        int o = 0;
        for (const auto& e : best[i])
            if (e.second != rows[i] && o < kR) gt[i * kR + o++] = e.second;
    }
    return gt;
}

/// The first 10 entries of the sampled rows' lists in an ivecs graph file.
std::vector<int64_t> graphRows(const std::string& path, const std::vector<int64_t>& rows, int k) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot read " + path);
    std::vector<int32_t> row(size_t(k) + 1);
    std::vector<int64_t> out(rows.size() * kR);
    for (size_t i = 0; i < rows.size(); ++i) {
        if (fseeko(f, off_t(rows[i]) * (k + 1) * 4, SEEK_SET) != 0 ||
            std::fread(row.data(), 4, row.size(), f) != row.size()) {
            std::fclose(f);
            throw std::runtime_error("short read in " + path);
        }
        for (int j = 0; j < kR; ++j) out[i * kR + j] = row[1 + j];
    }
    std::fclose(f);
    return out;
}

/// Recall@10 of the graph's rows against the exact lists (ids; the
/// generated sets have no ties that matter at this scale).
double recall(const std::vector<int64_t>& got, const std::vector<int64_t>& gt) {
    double hit = 0;
    for (size_t i = 0; i < gt.size() / kR; ++i)
        for (int a = 0; a < kR; ++a)
            for (int b = 0; b < kR; ++b)
                if (got[i * kR + a] >= 0 && got[i * kR + a] == gt[i * kR + b]) {
                    hit++;
                    break;
                }
    return hit / double(gt.size());
}

struct Run {
    std::string method;
    double seconds = 0;
    std::vector<int64_t> ids;  ///< sampled rows x 10
    JsonLine params;
    /// What names the build apart from the mode (no timings): the report
    /// keeps the latest line per mode and setting.
    std::string setting;
};

/// "degree K, overlap O, clusters C, limit G, iterations I", as the lines of
/// bench/results/gnnd_schedules.jsonl name their builds.
std::string settingOf(int degree, int overlap, int clusters, double limitGib, int iterations) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "degree %d, overlap %d, clusters %d, limit %g, iterations %d",
                  degree, overlap, clusters, limitGib, iterations);
    return buf;
}

Run inMemory(const std::string& path, int64_t n, const GpuKnnGraphGNNDConfig& cfg) {
    std::vector<float> x(size_t(n) * kD);
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f || std::fread(x.data(), 4, x.size(), f) != x.size()) {
        if (f) std::fclose(f);
        throw std::runtime_error("cannot read " + path);
    }
    std::fclose(f);
    StandardGpuResources res;
    GpuKnnGraphGNND index(&res, kD, kK, faiss_ext::FlatMetric::L2, cfg);
    const double t0 = nowSeconds();
    index.add(n, x.data());
    Run r;
    r.method = "ours:gnnd-in-memory";
    r.seconds = nowSeconds() - t0;
    const int degree = cfg.buildDegree ? cfg.buildDegree : (kK + 31) / 32 * 32;
    r.params.integer("build_degree", degree);
    r.params.integer("max_iterations", cfg.maxIterations);
    r.params.str("add_build", addBuildName(index.getLastAddBuild()));
    r.setting = settingOf(degree, 0, 0, 0, cfg.maxIterations) + ", add " +
                addBuildName(index.getLastAddBuild());
    const std::vector<int> g = index.getGraphInt();
    r.ids.assign(g.begin(), g.end());  // n x kK; the sampled rows are taken by the caller
    return r;
}

GnndAddBuild parseAddBuild(const std::string& s) {
    for (GnndAddBuild b : {GnndAddBuild::Auto, GnndAddBuild::OneShot, GnndAddBuild::Partitioned})
        if (s == addBuildName(b)) return b;
    throw std::invalid_argument("--add-build: auto, one-shot or partitioned (got " + s + ")");
}

GnndClusterBuild parseClusterBuild(const std::string& s) {
    for (GnndClusterBuild b : {GnndClusterBuild::Auto, GnndClusterBuild::NNDescent,
                               GnndClusterBuild::Exact})
        if (s == clusterBuildName(b)) return b;
    throw std::invalid_argument("--cluster-build: auto, nn-descent or exact (got " + s + ")");
}

/// A file build with `base`'s options (overlap, neighbour merges, verbose,
/// work directory, config) and the mode's schedule and shard count.
Run fileBuild(const std::string& path, const std::string& graph, GnndFileSchedule schedule,
              int shards, double limitGib, const GnndFileBuildOptions& base) {
    StandardGpuResources res;
    if (limitGib > 0) res.setDeviceMemoryLimit(size_t(limitGib * double(size_t(1) << 30)));
    GnndFileBuildOptions opt = base;
    opt.schedule = schedule;
    const GpuKnnGraphGNNDConfig& cfg = opt.config;
    Run r;
    const double t0 = nowSeconds();
    const int64_t n = fileBytes(path) / (4 * kD);
    if (shards > 0) opt.shardSize = (n + shards - 1) / shards;
    const GnndFileBuildReport rep = gnndBuildFromFile({&res}, path, VectorFileFormat::RawFloat32,
                                                      kD, kK, faiss_ext::FlatMetric::L2, graph, opt);
    r.seconds = nowSeconds() - t0;
    r.method = std::string("ours:gnnd-file-") + fileScheduleName(rep.schedule);
    r.params.integer("shards", rep.shards).integer("merges", rep.merges);
    r.params.integer("clusters", rep.clusters).integer("overlap", rep.overlap);
    r.params.integer("neighbour_merges", rep.neighbourMerges).integer("merge_pairs", rep.mergePairs);
    r.params.integer("largest_cluster", rep.largestCluster).integer("build_degree", rep.buildDegree);
    r.params.num("device_limit_gib", limitGib).num("partition_s", rep.partitionSeconds);
    r.params.num("build_s", rep.buildSeconds).num("merge_s", rep.mergeSeconds);
    r.params.boolean("in_host_memory", rep.inHostMemory).integer("max_iterations", cfg.maxIterations);
    r.params.str("cluster_build", clusterBuildName(rep.clusterBuild));
    r.setting = settingOf(rep.buildDegree, rep.overlap, rep.clusters, limitGib, cfg.maxIterations);
    if (rep.clusterBuild == GnndClusterBuild::Exact) {
        r.params.integer("exact_cluster_rows",
                         opt.exactClusterRows ? opt.exactClusterRows : kExactClusterRows);
        r.setting += ", exact clusters";
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    int64_t n = 1000000, nRows = 2000;
    int overlap = GnndFileBuildOptions().overlap;
    int neighbourMerges = GnndFileBuildOptions().neighbourMerges;
    double limitGib = 0;
    GnndClusterBuild clusterBuild = GnndClusterBuild::Auto;
    int64_t exactRows = 0;
    bool reuse = false, verbose = false;
    std::string data = "clustered", workdir = "/tmp";
    std::vector<std::string> modes = {"in-memory", "allpairs4", "allpairs8", "partitioned8"};
    GpuKnnGraphGNNDConfig cfg;
    try {
        Args args(argc, argv, {"help", "git", "reuse", "verbose"});
        if (args.printedHelpOrGit(kUsage)) return 0;
        args.checkKnown({"help", "git", "n", "data", "modes", "overlap", "device-limit-gib", "rows",
                         "workdir", "reuse", "verbose", "build-degree", "iterations",
                         "neighbour-merges", "cluster-build", "exact-cluster-rows",
                         "add-build"});
        cfg.buildDegree = int(args.getInt("build-degree", 0));
        cfg.maxIterations = int(args.getInt("iterations", cfg.maxIterations));
        n = args.getInt("n", n);
        nRows = args.getInt("rows", nRows);
        overlap = int(args.getInt("overlap", overlap));
        neighbourMerges = int(args.getInt("neighbour-merges", neighbourMerges));
        limitGib = args.getDouble("device-limit-gib", 0);
        clusterBuild = parseClusterBuild(args.get("cluster-build", "auto"));
        exactRows = args.getInt("exact-cluster-rows", 0);
        cfg.addBuild = parseAddBuild(args.get("add-build", "auto"));
        data = args.get("data", data);
        workdir = args.get("workdir", workdir);
        reuse = args.has("reuse");
        verbose = args.has("verbose");
        if (args.has("modes")) modes = parseList(args.get("modes"));
        if (n < 1000 || nRows < 1 || nRows > n || (data != "clustered" && data != "hard"))
            throw std::invalid_argument("need --n >= 1000, 1 <= --rows <= n, --data clustered|hard");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_gnnd_schedules: %s\n%s", e.what(), kUsage);
        return 2;
    }
    if (getNumDevices() == 0) {
        std::fprintf(stderr, "skipped: no GPU\n");
        return 0;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    const std::string path = workdir + "/schedules_" + data + "_" + std::to_string(n) + ".f32";
    const std::string graph = workdir + "/schedules_graph.ivecs";
    double t = nowSeconds();
    if (!(reuse && fileBytes(path) == n * kD * 4)) {
        writeSet(path, data, n);
        progress("wrote %s in %.1f s\n", path, nowSeconds() - t);
    }
    std::vector<int64_t> rows(static_cast<size_t>(nRows));
    {
        std::mt19937_64 rng(3);
        for (auto& r : rows) r = int64_t(rng() % uint64_t(n));
    }
    t = nowSeconds();
    const std::vector<int64_t> gt = groundTruth(path, n, rows, readRows(path, rows));
    progress("exact ground truth of %s rows in %.1f s\n", std::to_string(nRows), nowSeconds() - t);
    GnndFileBuildOptions base;
    base.overlap = overlap;
    base.neighbourMerges = neighbourMerges;
    base.clusterBuild = clusterBuild;
    base.exactClusterRows = exactRows;
    base.verbose = verbose;
    base.workDir = workdir;
    base.config = cfg;
    int status = 0;
    for (const std::string& mode : modes) {
        try {
            Run r;
            if (mode == "in-memory") {
                r = inMemory(path, n, cfg);
                std::vector<int64_t> sampled(rows.size() * kR);
                const int stride = int(r.ids.size() / size_t(n));
                for (size_t i = 0; i < rows.size(); ++i)
                    for (int j = 0; j < kR; ++j)
                        sampled[i * kR + j] = r.ids[size_t(rows[i]) * stride + j];
                r.ids = std::move(sampled);
            } else {
                const bool allPairs = mode.rfind("allpairs", 0) == 0;
                const bool part = mode.rfind("partitioned", 0) == 0;
                if (!allPairs && !part) throw std::invalid_argument("unknown mode " + mode);
                const std::string digits = mode.substr(allPairs ? 8 : 11);
                const int shards = digits.empty() ? 0 : std::atoi(digits.c_str());
                r = fileBuild(path, graph, allPairs ? GnndFileSchedule::AllPairs
                                                    : GnndFileSchedule::Partitioned,
                              shards, limitGib, base);
                r.ids = graphRows(graph, rows, kK);
                std::remove(graph.c_str());
            }
            const double rc = recall(r.ids, gt);
            progress("%s done in %.2f s\n", mode, r.seconds);
            JsonLine j;
            j.str("suite", "gnnd-schedules").str("dataset", data == "hard" ? "hard-128" : "clustered-1000-centres");
            j.str("method", r.method).str("mode", mode).str("device", prop.name);
            j.str("setting", mode + ", " + r.setting);
            j.integer("n", n).integer("d", kD).integer("nq", nRows).integer("k", kK);
            j.raw("params", r.params.text()).num("seconds", r.seconds).num("recall", rc);
            j.str("recall_at", "10").str("git", gitCommit());
            std::printf("%s\n", j.text().c_str());
            std::fflush(stdout);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s: FAILED: %s\n", mode.c_str(), e.what());
            status = 1;
        }
    }
    if (!reuse) std::remove(path.c_str());
    return status;
}
