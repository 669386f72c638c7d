// bench_gnnd_devices: GNND k-NN graphs of one generated clustered set
// (N x 128, k = 32) built on one GPU and on several (issue 7):
//   * in-memory: GpuKnnGraphGNND::add on device 0 (one GPU, no shards), once
//     per build degree of --inmemory-degrees (0: k rounded up to 32; a larger
//     list length buys recall for time: the recall-matched one-GPU anchor);
//     with --split also the same add split over devices 0..G-1
//     (GpuKnnGraphGNND::setBuildDevices);
//   * file build: gnndBuildFromFile with the same shards on devices {0},
//     {0, 1}, ... (shard builds in parallel, the GGM merges of each
//     tournament round spread over the devices), and {0, 0} (two workers on
//     one GPU) as a control; once per shard store of --stores: "host"
//     (shards kept in host memory between merges) and / or "files" (shard
//     graph files in --workdir, hostMemoryBytes = 0).
// Recall@10 on 1000 sampled rows against exact search (GpuIndexQuickSelectFlat).
// Usage:
//   bench_gnnd_devices [--n N (1M; 10M, 200k ...)] [--shards S] [--gpus G] [--skip-inmemory]
//                      [--skip-same-gpu] [--workdir DIR] [--out results.jsonl]
//                      [--stores host,files] [--inmemory-degrees 0,64] [--verbose]
//                      [--split] [--file-degree K] [--skip-files]   (--split: the in-memory
//                      builds also split over the devices; with --shards 1 the file build's
//                      one shard too, GnndFileBuildOptions::splitOneShard)
// Results: docs/benchmarks.md ("Several GPUs").
#include "bench/BenchData.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace faiss_ext::gpu;
using faiss_ext::bench::Args;
using faiss_ext::bench::parseList;

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
}

/// N x D clustered vectors (1000 Gaussian centres; BenchData.h).
std::vector<float> generate(int64_t N, int D) {
    std::vector<float> X(size_t(N) * D);
    faiss_ext::bench::generateCentresRows(0, N, D, X.data());
    return X;
}

double recallAt10(const std::vector<int64_t>& rows, const std::vector<int64_t>& gt,
                  const int* graph, int stride) {
    double hit = 0;
    for (size_t i = 0; i < rows.size(); ++i)
        for (int a = 0; a < 10; ++a)
            for (int b = 0; b < 10; ++b)
                if (graph[size_t(rows[i]) * stride + a] == gt[i * 10 + b]) {
                    hit++;
                    break;
                }
    return hit / (rows.size() * 10.0);
}

const char* kUsage =
        "bench_gnnd_devices [--n N (1M; 10M, 200k ...)] [--shards S (4)] [--gpus G (all)]\n"
        "  [--skip-inmemory] [--skip-same-gpu] [--workdir DIR (/tmp)] [--out results.jsonl]\n"
        "  [--stores host,files (host)] [--inmemory-degrees 0,64 (0)] [--verbose]\n"
        "  [--split (in-memory builds, and one shard of a file build, split over the devices)]\n"
        "  [--file-degree K (0)] [--skip-files] [--git]\n";

}  // namespace

int main(int argc, char** argv) {
    int64_t N = 1000000;
    int shards = 4, gpus = -1;
    bool inMemory = true, sameGpu = true, verbose = false, split = false, files = true;
    int fileDegree = 0;
    std::string workdir = "/tmp", out;
    std::vector<std::string> stores = {"host"}, degrees = {"0"};
    try {
        Args args(argc, argv,
                  {"help", "git", "skip-inmemory", "skip-same-gpu", "verbose", "split", "skip-files"});
        if (args.printedHelpOrGit(kUsage)) return 0;
        args.checkKnown({"help", "git", "n", "shards", "gpus", "workdir", "out", "skip-inmemory",
                         "skip-same-gpu", "verbose", "stores", "inmemory-degrees", "split",
                         "file-degree", "skip-files"});
        N = args.getInt("n", N);
        shards = int(args.getInt("shards", shards));
        gpus = int(args.getInt("gpus", gpus));
        workdir = args.get("workdir", workdir);
        out = args.get("out", out);
        inMemory = !args.has("skip-inmemory");
        sameGpu = !args.has("skip-same-gpu");
        verbose = args.has("verbose");
        split = args.has("split");
        files = !args.has("skip-files");
        fileDegree = int(args.getInt("file-degree", 0));
        if (args.has("stores")) stores = parseList(args.get("stores"));
        if (args.has("inmemory-degrees")) degrees = parseList(args.get("inmemory-degrees"));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_gnnd_devices: %s\n", e.what());
        return 2;
    }
    if (N < 10000 || shards < 1) {
        std::fprintf(stderr, "need --n >= 10000 and --shards >= 1\n");
        return 2;
    }
    if (gpus != -1 && gpus < 1) {
        std::fprintf(stderr, "--gpus %d: need at least 1 (leave it out for all GPUs)\n", gpus);
        return 2;
    }
    for (const auto& st : stores) {
        if (st != "host" && st != "files") {
            std::fprintf(stderr, "--stores: '%s' is neither host nor files\n", st.c_str());
            return 2;
        }
    }
    for (const auto& dg : degrees) {
        const int v = std::atoi(dg.c_str());
        if (v < 0 || v % 32 != 0 || v > 1024 || (v > 0 && v < 32)) {
            std::fprintf(stderr, "--inmemory-degrees: '%s' is not 0 or a multiple of 32 in [32, 1024]\n",
                         dg.c_str());
            return 2;
        }
    }
    const int D = 128, k = 32;
    int ng = getNumDevices();
    if (ng == 0) {
        std::printf("skipped: no GPU\n");
        return 0;
    }
    if (gpus > ng) {
        std::fprintf(stderr, "--gpus %d: only %d GPU%s visible\n", gpus, ng, ng == 1 ? "" : "s");
        return 2;
    }
    if (gpus < 0) gpus = ng;
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    std::printf("GPUs: %d (%s), N = %lld, d = %d, k = %d, shards = %d\n", ng, prop.name,
                (long long)N, D, k, shards);
    double t0 = now();
    std::vector<float> X = generate(N, D);
    const std::string path = workdir + "/mg_base.f32";
    {
        FILE* f = std::fopen(path.c_str(), "wb");
        if (!f || std::fwrite(X.data(), 4, X.size(), f) != X.size()) {
            std::fprintf(stderr, "cannot write %s\n", path.c_str());
            return 1;
        }
        std::fclose(f);
    }
    std::printf("generated and wrote %s in %.1f s\n", path.c_str(), now() - t0);
    std::vector<int64_t> rows(1000);
    {
        std::mt19937 rng(3);
        for (auto& r : rows) r = int64_t(rng() % uint64_t(N));
    }
    std::vector<int64_t> gt(rows.size() * 10);
    {
        StandardGpuResources r;
        GpuIndexQuickSelectFlat flat(&r, D);
        flat.add(N, X.data());
        std::vector<float> q(rows.size() * D);
        for (size_t i = 0; i < rows.size(); ++i)
            std::copy(&X[size_t(rows[i]) * D], &X[size_t(rows[i]) * D] + D, &q[i * D]);
        std::vector<float> Dd(rows.size() * 11);
        std::vector<int64_t> Ii(rows.size() * 11);
        flat.search(rows.size(), q.data(), 11, Dd.data(), Ii.data());
        for (size_t i = 0; i < rows.size(); ++i) {
            int o = 0;
            for (int j = 0; j < 11 && o < 10; ++j)
                if (Ii[i * 11 + j] != rows[i]) gt[i * 10 + o++] = Ii[i * 11 + j];
        }
    }
    FILE* jf = out.empty() ? nullptr : std::fopen(out.c_str(), "a");
    auto record = [&](const std::string& mode, const std::string& devs, double build, double merge,
                      double total, double recall, int nShards, int buildDegree) {
        std::printf("%-12s devices {%s}: %d shard(s), build degree %d: build %.3f s, merges %.3f s, "
                    "total %.3f s, recall@10 %.4f\n",
                    mode.c_str(), devs.c_str(), nShards, buildDegree, build, merge, total, recall);
        std::fflush(stdout);
        if (jf) {
            std::fprintf(jf,
                         "{\"bench\": \"gnnd_devices\", \"gpu\": \"%s\", \"gpus_present\": %d, "
                         "\"mode\": \"%s\", \"devices\": \"%s\", \"n\": %lld, \"d\": %d, \"k\": %d, "
                         "\"build_degree\": %d, \"shards\": %d, \"build_s\": %.4f, \"merge_s\": %.4f, "
                         "\"total_s\": %.4f, \"recall_at_10\": %.5f, "
                         "\"dataset\": \"clustered-1000-centres\", \"git\": \"%s\"}\n",
                         prop.name, ng, mode.c_str(), devs.c_str(), (long long)N, D, k, buildDegree,
                         nShards, build, merge, total, recall, faiss_ext::bench::gitCommit().c_str());
            std::fflush(jf);
        }
    };
    std::vector<std::unique_ptr<StandardGpuResources>> res;
    for (int g = 0; g < gpus; ++g) res.emplace_back(new StandardGpuResources());
    std::vector<int> inMemoryGpus = {1};
    if (split && gpus > 1) inMemoryGpus.push_back(gpus);
    for (size_t di = 0; inMemory && di < degrees.size(); ++di) {
        for (int g : inMemoryGpus) {
            GpuKnnGraphGNNDConfig cfg;
            cfg.buildDegree = std::atoi(degrees[di].c_str());
            GpuKnnGraphGNND index(res[0].get(), D, k, faiss_ext::FlatMetric::L2, cfg);
            index.verbose = verbose;
            std::vector<GpuResourcesProvider*> extra;
            std::vector<int> extraDevs;
            std::string name = "0";
            for (int i = 1; i < g; ++i) {
                extra.push_back(res[i].get());
                extraDevs.push_back(i);
                name += "," + std::to_string(i);
            }
            index.setBuildDevices(extra, extraDevs);
            double t = now();
            index.add(N, X.data());
            double secs = now() - t;
            std::vector<int> G = index.getGraphInt();
            record(g > 1 ? "in-memory+split" : "in-memory", name, secs, 0, secs,
                   recallAt10(rows, gt, G.data(), k), 1,
                   cfg.buildDegree ? cfg.buildDegree : (k + 31) / 32 * 32);
        }
    }
    X.clear();
    X.shrink_to_fit();
    std::vector<std::vector<int>> devsets;
    for (int g = 1; files && g <= gpus; ++g) {
        std::vector<int> v;
        for (int i = 0; i < g; ++i) v.push_back(i);
        devsets.push_back(v);
    }
    if (files && sameGpu) devsets.push_back({0, 0});
    int status = 0;
    for (const auto& store : stores)
    for (auto& devs : devsets) {
        GnndFileBuildOptions opt;
        opt.devices = devs;
        opt.shardSize = (N + shards - 1) / shards;
        opt.workDir = workdir;
        opt.verbose = verbose;
        opt.hostMemoryBytes = store == "files" ? 0 : -1;
        opt.splitOneShard = split;
        opt.schedule = GnndFileSchedule::AllPairs;  // the shard merges on several devices
        opt.config.buildDegree = fileDegree;
        std::vector<GpuResourcesProvider*> providers;
        std::string name;
        for (size_t i = 0; i < devs.size(); ++i) {
            providers.push_back(res[devs[i]].get());
            name += (i ? "," : "") + std::to_string(devs[i]);
        }
        const std::string graph = workdir + "/mg_graph.ivecs";
        try {
            auto rep = gnndBuildFromFile(providers, path, VectorFileFormat::RawFloat32, D, k,
                                         faiss_ext::FlatMetric::L2, graph, opt);
            int64_t gn;
            int gk;
            auto G = readGraphIvecs(graph, &gn, &gk);
            std::string mode = rep.inHostMemory ? "file+host" : "file+shards";
            if (rep.buildDevices > 1) mode += "+split";
            record(mode, name, rep.buildSeconds, rep.mergeSeconds, rep.totalSeconds,
                   recallAt10(rows, gt, G.data(), gk), rep.shards, rep.buildDegree);
        } catch (const std::exception& e) {
            std::printf("devices {%s}: FAILED: %s\n", name.c_str(), e.what());
            status = 1;
        }
    }
    if (jf) std::fclose(jf);
    std::remove(path.c_str());
    std::remove((workdir + "/mg_graph.ivecs").c_str());
    return status;
}
