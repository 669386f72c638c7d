// bench_multi_gpu: the `multigpu` suite, search side (DESIGN.md, "Benchmarks").
// Exact k-NN search throughput of GpuIndexQuickSelectFlat on several GPUs
// through faiss_ext::gpu::index_cpu_to_gpu_multiple, in one process:
//   ours:quickselect-1gpu      one GpuIndexQuickSelectFlat on the first device
//                              of --devices holding all nb vectors
//   ours:quickselect-shards    faiss::IndexShards over --devices (slices of
//                              the vectors; every query goes to every shard)
//   ours:quickselect-replicas  faiss::IndexReplicas over --devices (full
//                              copies; the queries are split between them)
// Data: seeded clustered vectors (BenchData's generator, all host threads) or
// uniform ones, held in a faiss::IndexFlat from which the GPU indexes are
// copied (the copy time is reported as params.load_seconds). Queries and
// results stay on the host (the wrappers take host pointers). Each method:
// one warm-up search, then --reps timed searches, median reported. The
// shards' and replicas' ids are compared with the single GPU's
// (params.agreement: the fraction of (query, rank) positions with the same id
// or the same distance, i.e. ties aside; params.id_overlap: the fraction of
// the single GPU's ids found in the row) and params.speedup is the single
// GPU's seconds over the method's. JSON lines go to stdout and, with --out,
// are appended to that file; progress goes to stderr.
//
//   bench_multi_gpu [--nb 10M] [--d 128] [--nq 10k] [--k 10] [--devices 0,1]
//                   [--reps 3] [--data clustered|uniform] [--out FILE]
// Smoke test on one GPU: bench_multi_gpu --nb 100k --nq 1k --devices 0,0
#include "bench/BenchData.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <omp.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage = R"(bench_multi_gpu: exact k-NN search on one GPU, sharded and replicated over several; JSON lines.
  --nb N            base vectors (default 10M; k / M suffixes)
  --d D             dimension (default 128)
  --nq N            queries (default 10k)
  --k K             neighbours (default 10)
  --devices LIST    devices of the shards / replicas (default 0,1); a device may repeat
                    (0,0: a smoke test on one GPU); the single-GPU baseline uses the first
  --reps R          timed searches per method after one warm-up, median reported (default 3)
  --data KIND       clustered (default: BenchData's seeded mixture) or uniform in [0, 1)
  --seed S          seed of the data (default 1234)
  --methods LIST    of single, shards, replicas (default: all three; agreement needs single)
  --out FILE        also append the JSON lines to FILE (e.g. bench/results/multigpu.jsonl)
  --git             print the commit compiled in and exit
)";

/// n x d uniform floats in [0, 1) from `seed`, filled by all host threads
/// (deterministic whatever the thread count: one generator per row).
std::vector<float> uniformVectors(int64_t n, int d, uint64_t seed) {
    std::vector<float> x(size_t(n) * d);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull + uint64_t(i) * 0xBF58476D1CE4E5B9ull + 1;
        for (int j = 0; j < d; ++j) {
            // splitmix64
            s += 0x9E3779B97F4A7C15ull;
            uint64_t z = s;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            x[size_t(i) * d + j] = float(z >> 40) * (1.0f / float(1 << 24));
        }
    }
    return x;
}

std::string deviceName(int device) {
    cudaDeviceProp prop;
    FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    return prop.name;
}

/// "NVIDIA H200 x2" for two devices of one name, else the names joined by " + ".
std::string devicesName(const std::vector<int>& devices) {
    std::vector<std::string> names;
    for (int dev : devices) names.push_back(deviceName(dev));
    bool same = std::all_of(names.begin(), names.end(), [&](const std::string& s) { return s == names[0]; });
    if (names.size() == 1) return names[0];
    if (same) return names[0] + " x" + std::to_string(names.size());
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) out += (i ? " + " : "") + names[i];
    return out;
}

void syncAll(const std::vector<int>& devices) {
    for (int dev : std::set<int>(devices.begin(), devices.end())) {
        gpu::DeviceScope scope(dev);
        FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
    }
}

struct Timed {
    double seconds = 0;  ///< median of the timed runs
    std::vector<float> D;
    std::vector<int64_t> I;
};

/// One warm-up, then `reps` timed searches of all queries (host in, host out).
Timed timeSearch(const faiss::Index* index, const std::vector<int>& devices, int64_t nq,
                 const float* xq, int64_t k, int reps) {
    Timed t;
    t.D.resize(size_t(nq) * k);
    t.I.resize(size_t(nq) * k);
    index->search(nq, xq, k, t.D.data(), t.I.data());
    syncAll(devices);
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) {
        double t0 = nowSeconds();
        index->search(nq, xq, k, t.D.data(), t.I.data());
        syncAll(devices);
        times.push_back(nowSeconds() - t0);
    }
    t.seconds = median(times);
    return t;
}

/// Fraction of (query, rank) positions where `got` has the reference's id or
/// its distance (within a relative 1e-5: a tie).
double agreement(const Timed& got, const Timed& ref) {
    int64_t same = 0;
    for (size_t i = 0; i < ref.I.size(); ++i) {
        float a = got.D[i], b = ref.D[i];
        if (got.I[i] == ref.I[i] || std::fabs(a - b) <= 1e-5f * std::max(std::fabs(b), 1e-6f)) ++same;
    }
    return ref.I.empty() ? 1.0 : double(same) / double(ref.I.size());
}

/// Fraction of the reference's ids found in the same row of `got`.
double idOverlap(const Timed& got, const Timed& ref, int64_t nq, int64_t k) {
    int64_t hits = 0;
    for (int64_t q = 0; q < nq; ++q) {
        std::set<int64_t> row(got.I.begin() + q * k, got.I.begin() + (q + 1) * k);
        for (int64_t j = 0; j < k; ++j) hits += row.count(ref.I[q * k + j]);
    }
    return nq * k > 0 ? double(hits) / double(nq * k) : 1.0;
}

}  // namespace

int main(int argc, char** argv) {
    int failures = 0;
    try {
        Args args(argc, argv, {"help", "git"});
        if (args.printedHelpOrGit(kUsage)) return 0;
        args.checkKnown({"nb", "d", "nq", "k", "devices", "reps", "data", "seed", "methods", "out",
                         "help", "git"});
        const int64_t nb = args.getInt("nb", 10000000);
        const int d = int(args.getInt("d", 128));
        const int64_t nq = args.getInt("nq", 10000);
        const int64_t k = args.getInt("k", 10);
        const int reps = int(std::max<int64_t>(3, args.getInt("reps", 3)));
        const std::string dataKind = args.get("data", "clustered");
        const uint64_t seed = uint64_t(args.getInt("seed", 1234));
        std::vector<int> devices;
        for (int64_t dev : parseIntList(args.get("devices", "0,1"))) devices.push_back(int(dev));
        auto methods = parseList(args.get("methods", "single,shards,replicas"));
        auto wants = [&](const char* m) {
            return std::find(methods.begin(), methods.end(), m) != methods.end();
        };
        if (nb < 1 || d < 1 || nq < 1 || k < 1 || k > nb)
            throw std::invalid_argument("need nb, d, nq >= 1 and 1 <= k <= nb");
        if (devices.empty()) throw std::invalid_argument("--devices is empty");
        if (dataKind != "clustered" && dataKind != "uniform")
            throw std::invalid_argument("--data must be clustered or uniform");
        const int nGpus = gpu::getNumDevices();
        for (int dev : devices) {
            if (dev < 0 || dev >= nGpus) {
                throw std::invalid_argument("device " + std::to_string(dev) + " in --devices, but " +
                                            std::to_string(nGpus) + " GPU(s) are visible");
            }
        }
        std::unique_ptr<std::ofstream> out;
        if (args.has("out")) {
            out.reset(new std::ofstream(args.get("out"), std::ios::app));
            if (!*out) throw std::runtime_error("cannot open --out " + args.get("out"));
        }
        auto emit = [&](const JsonLine& j) {
            std::printf("%s\n", j.text().c_str());
            std::fflush(stdout);
            if (out) {
                *out << j.text() << "\n";
                out->flush();
            }
        };
        const std::string git = gitCommit();
        std::string devList;
        for (size_t i = 0; i < devices.size(); ++i) devList += (i ? "," : "") + std::to_string(devices[i]);

        // ---- data: generated on the host by all threads, kept in one IndexFlat
        double t0 = nowSeconds();
        faiss::IndexFlat flat(d, faiss::METRIC_L2);
        std::vector<float> xq;
        std::string dataset;
        if (dataKind == "clustered") {
            ClusteredSpec spec;
            spec.d = d;
            spec.latentDim = std::min(spec.latentDim, d);
            spec.clusters = defaultClusters(nb);
            spec.seed = seed;
            {
                Matrix base = generateClustered(spec, nb, 0);
                flat.add(nb, base.x.data());
            }
            xq = generateClustered(spec, nq, 1).x;
            dataset = "clustered";
        } else {
            {
                std::vector<float> base = uniformVectors(nb, d, seed);
                flat.add(nb, base.data());
            }
            xq = uniformVectors(nq, d, seed + 1);
            dataset = "uniform";
        }
        std::fprintf(stderr, "[bench_multi_gpu] %s nb=%lld d=%d nq=%lld k=%lld generated in %.1f s "
                     "(%d threads); devices %s\n", dataset.c_str(), (long long)nb, d, (long long)nq,
                     (long long)k, nowSeconds() - t0, omp_get_max_threads(), devList.c_str());

        auto head = [&](const std::string& method, const std::string& device,
                        const std::vector<int>& used) {
            JsonLine j;
            j.str("suite", "multigpu").str("dataset", dataset).str("method", method);
            j.str("device", device).integer("gpus", int64_t(used.size()));
            j.integer("nb", nb).integer("d", d).integer("nq", nq).integer("k", k);
            return j;
        };

        Timed single;
        bool haveSingle = false;
        const std::vector<int> first{devices[0]};
        if (wants("single")) {
            try {
                gpu::StandardGpuResources res;
                t0 = nowSeconds();
                gpu::GpuIndexQuickSelectFlatConfig cfg;
                cfg.device = devices[0];
                gpu::GpuIndexQuickSelectFlat index(&res, &flat, cfg);
                syncAll(first);
                const double load = nowSeconds() - t0;
                single = timeSearch(&index, first, nq, xq.data(), k, reps);
                haveSingle = true;
                JsonLine p;
                p.integer("reps", reps).str("io", "host").str("devices", std::to_string(devices[0]));
                p.num("load_seconds", load).str("load", "GpuIndexQuickSelectFlat(IndexFlat)");
                JsonLine j = head("ours:quickselect-1gpu", deviceName(devices[0]), first);
                j.raw("params", p.text()).num("seconds", single.seconds).num("qps", nq / single.seconds);
                j.str("git", git);
                emit(j);
                std::fprintf(stderr, "[bench_multi_gpu] 1 GPU (%d): load %.2f s, search %.4f s, %.0f q/s\n",
                             devices[0], load, single.seconds, nq / single.seconds);
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_multi_gpu] single GPU failed: %s\n", e.what());
            }
        }

        for (bool shard : {true, false}) {
            const char* name = shard ? "shards" : "replicas";
            if (!wants(name)) continue;
            try {
                std::vector<std::unique_ptr<gpu::StandardGpuResources>> res;
                std::vector<gpu::GpuResourcesProvider*> providers;
                for (size_t i = 0; i < devices.size(); ++i) {
                    res.emplace_back(new gpu::StandardGpuResources());
                    providers.push_back(res.back().get());
                }
                gpu::GpuMultipleClonerOptions opts;
                opts.shard = shard;
                t0 = nowSeconds();
                std::unique_ptr<faiss::Index> index(
                        gpu::index_cpu_to_gpu_multiple(providers, devices, &flat, &opts));
                syncAll(devices);
                const double load = nowSeconds() - t0;
                Timed t = timeSearch(index.get(), devices, nq, xq.data(), k, reps);
                JsonLine p;
                p.integer("reps", reps).str("io", "host").str("devices", devList);
                p.num("load_seconds", load).str("load", "index_cpu_to_gpu_multiple(IndexFlat)");
                p.str("wrapper", shard ? "faiss::IndexShards" : "faiss::IndexReplicas");
                double agree = NAN, overlap = NAN, speedup = NAN;
                if (haveSingle) {
                    agree = agreement(t, single);
                    overlap = idOverlap(t, single, nq, k);
                    speedup = single.seconds / t.seconds;
                    p.num("agreement", agree).num("id_overlap", overlap).num("speedup", speedup);
                    if (agree < 0.999) ++failures;  // exact search: only ties may differ
                }
                JsonLine j = head(std::string("ours:quickselect-") + name, devicesName(devices), devices);
                j.raw("params", p.text()).num("seconds", t.seconds).num("qps", nq / t.seconds);
                j.str("git", git);
                emit(j);
                std::fprintf(stderr,
                             "[bench_multi_gpu] %s over %s: load %.2f s, search %.4f s, %.0f q/s, "
                             "speedup %.2fx over 1 GPU, agreement %.5f (id overlap %.5f)\n",
                             name, devList.c_str(), load, t.seconds, nq / t.seconds, speedup, agree,
                             overlap);
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_multi_gpu] %s failed: %s\n", name, e.what());
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_multi_gpu: error: %s\n", e.what());
        return 2;
    }
    return failures ? 1 : 0;
}
