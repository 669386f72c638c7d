// bench_flat: the `flat` suite's C++ side (DESIGN.md, "Benchmarks").
// On one data set it measures, in one process:
//   faiss-cpu:IndexFlatL2  FAISS's exact CPU search, all cores, the process's
//                          BLAS (OpenBLAS); large cases on a query subset
//                          within a time budget, extrapolated (params.nq_timed)
//   floor:cublas-sgemm     cuBLAS SGEMM of the same shapes alone (the floor);
//                          floor:cublas-sgemm-tf32 the same in TF32 when
//                          --precision includes a bounded precision or auto;
//                          floor:cublas-bf16x3 the split-row BF16 GEMM of the
//                          BF16x3 path when it includes bf16x3-bounded or auto
//   ours:quickselect       faiss_ext::gpu::GpuIndexQuickSelectFlat (FP32 distances)
//   ours:quickselect-tf32-bounded, ours:quickselect-bf16x3-bounded,
//   ours:quickselect-auto  the same index with DistancePrecision::TF32Bounded,
//                          BF16x3Bounded or Auto (params.resolved: what Auto chose)
//                          (--precision): params carry the certified / fallback
//                          query counts and, when fp32 ran too, the share of
//                          queries whose ids equal FP32's exactly
// and prints one JSON object a line on stdout (progress goes to stderr).
// Recall of ours is measured against FAISS's exact CPU result on the first
// --recall-nq queries (not against ours: that would be circular), which is
// also written out (--ref-out) so bench/torch_flat.py scores torch the same way.
//
//   bench_flat --base B --query Q --dataset NAME [--k 1,10,100,1024,4096]
//              [--methods faiss-cpu,floor,ours] [--reps 3] [--cpu-budget 3]
//              [--recall-nq 256] [--ref-out PREFIX] [--precision fp32,tf32-bounded]
//              [--single-query N]
// --single-query N adds, per k, the latency of one-query searches: the
// median of N calls of search(1 query) (each synchronised), as a line with
// nq 1 and params.mode "single-query" (ours, FP32); for k <= 1024 a second
// line, params.mode "single-query-split", splits it: the fused few-query
// kernel and the merge of its lists (CUDA events), the whole select call
// (bench/FewQuerySplit.h; it copies the vectors to the GPU once more).
#include "bench/BenchData.h"
#include "bench/BenchDevice.h"
#include "bench/BenchUtil.h"
#include "bench/FewQuerySplit.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPath.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidates.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidatesWgmma.h"
#include "faiss_ext/gpu/impl/flat/SplitBf16.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"

#include <faiss/IndexFlat.h>
#include <omp.h>

#include <dlfcn.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage = R"(bench_flat: the flat suite (exact k-NN) on one data set; JSON lines on stdout.
  --base F --query F   vectors (.fvecs, .bvecs, .fbin, IDX[.gz])
  --dataset NAME       name written in every line (default: the base file's name)
  --suite NAME         suite written in every line (default flat; flat-few-queries for the
                       few-query / large-k shapes beside torch and FAISS GPU)
  --nq N               at most N queries (default: all)
  --k LIST             k values (default 1,10,100,1024,4096; those > nb are dropped)
  --methods LIST       of faiss-cpu, floor, ours (default: all three)
  --reps R             timed GPU runs after one warm-up, median reported (default 3)
  --cpu-budget S       seconds per k for the CPU anchor; past it, a query subset
                       is timed and qps extrapolated (default 3)
  --recall-nq N        queries scored for recall (default 256)
  --ref-out PREFIX     write the exact reference ids to PREFIX.ivecs (recall-nq x max k)
  --floor-mem-gib G    distance tile of the GEMM floor, GiB (default 4; the floor is the
                       fastest of full-row and 1,024 / 4,096-query tiles in it)
  --precision LIST     distance precisions of ours: fp32, tf32-bounded, bf16x3-bounded, auto
                       (a -unfused suffix: the fused candidates off; -mma: fused by
                       the mma.sync kernel, not Hopper's warpgroup one; then -sN: the
                       fused thresholds' shared sample forced to N vectors, a power
                       of two in 1024..16384, e.g. auto-s4096)
                       (default fp32)
  --single-query N     also time N one-query searches per k (median latency; ours)
                       and split it: fused kernel, merge, the rest (k <= 1024)
  --storage S          where ours keeps the vectors: device (default) or host (pinned host
                       memory, streamed through the GPU by each search; method names
                       then end in "+host-storage")
  --git                print the commit compiled in and exit
)";

/// How a bounded precision takes its candidates (a suffix of its name).
enum class FusedMode { Default, Unfused, MmaSync };

const char* fusedModeSuffix(FusedMode m) {
    return m == FusedMode::Unfused ? "-unfused" : m == FusedMode::MmaSync ? "-mma" : "";
}

/// Strips a trailing "-sN" from a precision name and returns N (0 where
/// there is none); N must be a shared-sample size the library takes.
int64_t takeSharedSamplesSuffix(std::string& name) {
    const size_t at = name.rfind("-s");
    if (at == std::string::npos || at + 2 == name.size() ||
        name.find_first_not_of("0123456789", at + 2) != std::string::npos)
        return 0;
    const int64_t n = std::stoll(name.substr(at + 2));
    const bool power = n >= 1024 && n <= gpu::select::kSharedSampleMaxSamples && (n & (n - 1)) == 0;
    if (!power)
        throw std::invalid_argument("--precision " + name + ": -sN takes a power of two in 1024.." +
                                    std::to_string(gpu::select::kSharedSampleMaxSamples));
    name.resize(at);
    return n;
}

struct Common {
    std::string suite = "flat", dataset, git;
    int64_t nb, nq;
    int d;
};

JsonLine head(const Common& c, const std::string& method, const std::string& device, int64_t k) {
    JsonLine j;
    j.str("suite", c.suite).str("dataset", c.dataset).str("method", method).str("device", device);
    j.integer("nb", c.nb).integer("d", c.d).integer("nq", c.nq);
    if (k > 0) j.integer("k", k);
    else j.null("k");
    return j;
}

void emit(const JsonLine& j) {
    std::printf("%s\n", j.text().c_str());
    std::fflush(stdout);
}

/// Sets OpenBLAS's thread count when OpenBLAS is the BLAS; false otherwise.
bool setBlasThreads(int n) {
    using SetFn = void (*)(int);
    auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (!set) return false;
    set(n);
    return true;
}

/// One tile shape of the GEMM floor: rows queries x cols vectors.
struct FloorTile {
    int64_t rows = 1;
    int64_t cols = 1;
};

/// The floor's tile shapes within `gib` GiB of distances: full rows, then
/// 1,024 and 4,096 queries a tile with the columns that fit (where full
/// rows hold fewer queries than that).
std::vector<FloorTile> floorTileShapes(int64_t nq, int64_t nb, double gib) {
    const double floats = gib * double(1ull << 30) / 4.0;
    std::vector<FloorTile> shapes;
    const int64_t fullRows = std::max<int64_t>(1, std::min<int64_t>(nq, int64_t(floats / double(nb))));
    shapes.push_back({fullRows, nb});
    for (int64_t rows : {int64_t(1024), int64_t(4096)}) {
        rows = std::min(rows, nq);
        if (rows <= fullRows) continue;
        const int64_t cols = std::max<int64_t>(1024, int64_t(floats / double(rows)) / 4 * 4);
        shapes.push_back({rows, std::min(nb, cols)});
    }
    return shapes;
}

/// Median seconds of `reps` calls of run (which synchronises), after one
/// untimed warm-up call.
template <class Run>
double medianRunSeconds(Run& run, int reps) {
    run();
    std::vector<double> times;
    for (int r = 0; r < std::max(1, reps); ++r) {
        const double t0 = nowSeconds();
        run();
        times.push_back(nowSeconds() - t0);
    }
    return median(times);
}

/// Median seconds of `reps` GEMMs of all queries against all vectors in
/// tiles of shape t (after one warm-up), column major as cuBLAS wants:
/// C (cols x rows) = B^T (cols x d) * Q (d x rows).
double medianFloorSeconds(cublasHandle_t h, const float* dB, const float* dQ, float* dC, int64_t nq,
                          int64_t nb, int d, const FloorTile& t, int reps) {
    auto run = [&]() {
        const float alpha = 1.f, beta = 0.f;
        for (int64_t q0 = 0; q0 < nq; q0 += t.rows) {
            const int tq = int(std::min(t.rows, nq - q0));
            for (int64_t c0 = 0; c0 < nb; c0 += t.cols) {
                const int tc = int(std::min(t.cols, nb - c0));
                FAISS_EXT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, tc, tq, d, &alpha,
                                                   dB + size_t(c0) * d, d, dQ + size_t(q0) * d, d,
                                                   &beta, dC, tc));
            }
        }
        FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
    };
    return medianRunSeconds(run, reps);
}

/// The BF16x3 floor: the split-precision GEMM of the BF16x3 bounded path
/// (gpu::gemmDotProductsBf16x3, what the search calls: one BF16 GEMM over
/// rows of 3 dPad) over the same tile shapes, the operands split once
/// beforehand; one JSON line with the fastest shape ("tflops" counts the
/// FP32-equivalent 2 nb nq d).
void emitBf16x3Floor(const Common& c, const std::string& gpuDevice, const float* dB,
                     const float* dQ, float* dC, const std::vector<FloorTile>& shapes, int reps) {
    const int dPad = gpu::bf16PaddedDim(c.d);
    const size_t row = 3 * size_t(dPad);
    DeviceArray<gpu::Bf16Bits> bSplit(size_t(c.nb) * row), qSplit(size_t(c.nq) * row);
    gpu::splitRowsBf16(dB, c.nb, c.d, gpu::SplitSide::Corpus, bSplit.p, nullptr);
    gpu::splitRowsBf16(dQ, c.nq, c.d, gpu::SplitSide::Queries, qSplit.p, nullptr);
    cublasHandle_t h;
    FAISS_EXT_CUBLAS_CHECK(cublasCreate(&h));
    FloorTile best;
    double sec = 0;
    for (const FloorTile& t : shapes) {
        auto run = [&]() {
            for (int64_t q0 = 0; q0 < c.nq; q0 += t.rows) {
                const int64_t tq = std::min(t.rows, c.nq - q0);
                for (int64_t c0 = 0; c0 < c.nb; c0 += t.cols) {
                    const int64_t tc = std::min(t.cols, c.nb - c0);
                    gpu::gemmDotProductsBf16x3(h, qSplit.p + size_t(q0) * row, tq,
                                               bSplit.p + size_t(c0) * row, tc, dPad, 1.f, dC,
                                               tc);
                }
            }
            FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
        };
        // (the warm-up call also runs cuBLASLt's tuning of the shapes)
        const double s = medianRunSeconds(run, reps);
        std::fprintf(stderr, "[bench_flat] floor (bf16x3) tile %lld x %lld: %.4f s\n",
                     (long long)t.rows, (long long)t.cols, s);
        if (sec == 0 || s < sec) {
            sec = s;
            best = t;
        }
    }
    cublasDestroy(h);
    JsonLine p;
    p.integer("tile_nq", best.rows).integer("tile_nb", best.cols).integer("reps", reps);
    p.integer("tile_shapes_tried", int64_t(shapes.size()));
    p.str("math", "bf16x3 (one CUBLAS_COMPUTE_32F GEMM over rows of BF16 splits, k = 3 dPad)");
    p.num("tflops", 2.0 * c.nb * c.nq * c.d / sec / 1e12).str("io", "device");
    JsonLine j = head(c, "floor:cublas-bf16x3", gpuDevice, 0);
    j.raw("params", p.text()).num("seconds", sec).num("qps", c.nq / sec).null("recall");
    j.str("git", c.git);
    emit(j);
    std::fprintf(stderr, "[bench_flat] floor (bf16x3): %.4f s\n", sec);
}

/// Median seconds of `calls` one-query searches (query i % nq of the device
/// queries dQ), each synchronised: the latency a single caller sees.
double singleQueryLatency(const gpu::GpuIndexQuickSelectFlat& index, const float* dQ, int64_t nq,
                          int d, int64_t k, int calls) {
    DeviceArray<float> dD{size_t(k)};
    DeviceArray<int64_t> dI{size_t(k)};
    index.search(1, dQ, k, dD.p, dI.p);  // warm-up
    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> times;
    for (int i = 0; i < calls; ++i) {
        const double t0 = nowSeconds();
        index.search(1, dQ + size_t(i % nq) * d, k, dD.p, dI.p);
        FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
        times.push_back(nowSeconds() - t0);
    }
    return median(times);
}

/// The --single-query line of ours at k.
void emitSingleQuery(const Common& c, const std::string& device, int64_t k, int calls,
                     double sec) {
    Common one = c;
    one.nq = 1;
    JsonLine p;
    p.str("mode", "single-query").integer("calls", calls).str("io", "device");
    p.str("precision", "fp32").str("latency", "median of the calls");
    JsonLine j = head(one, "ours:quickselect", device, k);
    j.raw("params", p.text()).num("seconds", sec).num("qps", 1.0 / sec).null("recall");
    j.str("git", c.git);
    emit(j);
    std::fprintf(stderr, "[bench_flat] ours single-query k=%lld: %.4f ms (median of %d)\n",
                 (long long)k, sec * 1e3, calls);
}

/// The --single-query split at k (bench/FewQuerySplit.h): the fused kernel,
/// the merge and the whole select call, beside the search's latency `sec`.
void emitSingleQuerySplit(const Common& c, const std::string& device, int64_t k, int calls,
                          double sec, const FewQuerySplit& s) {
    Common one = c;
    one.nq = 1;
    JsonLine p;
    p.str("mode", "single-query-split").integer("calls", calls).str("io", "device");
    p.num("search-ms", sec * 1e3).num("kernel-ms", s.kernelMs).num("merge-ms", s.mergeMs);
    p.num("select-ms", s.selectMs).str("latency", "median of the calls, each part separately");
    JsonLine j = head(one, "ours:fused-few-query", device, k);
    j.raw("params", p.text()).num("seconds", s.kernelMs / 1e3).null("qps").null("recall");
    j.str("git", c.git);
    emit(j);
    std::fprintf(stderr,
                 "[bench_flat] ours single-query k=%lld split: search %.4f ms = fused kernel "
                 "%.4f + merge %.4f + the rest of the select call %.4f + outside it %.4f ms\n",
                 (long long)k, sec * 1e3, s.kernelMs, s.mergeMs,
                 s.selectMs - s.kernelMs - s.mergeMs, sec * 1e3 - s.selectMs);
}

std::string envOr(const char* name, const char* def) {
    const char* v = std::getenv(name);
    return v && *v ? v : def;
}

}  // namespace

int main(int argc, char** argv) {
    int failures = 0;
    try {
        Args args(argc, argv, {"help", "git"});
        if (args.printedHelpOrGit(kUsage)) return 0;
        args.checkKnown({"base", "query", "dataset", "suite", "nq", "k", "methods", "reps", "cpu-budget",
                         "recall-nq", "ref-out", "floor-mem-gib", "precision", "single-query", "storage",
                         "help", "git"});
        if (!args.has("base") || !args.has("query"))
            throw std::invalid_argument("--base and --query are required (see --help)");

        double t0 = nowSeconds();
        Matrix base = readVectors(args.get("base"));
        Matrix query = readVectors(args.get("query"), args.getInt("nq", 0));
        if (base.d != query.d) throw std::invalid_argument("base and query dimensions differ");
        Common c;
        c.dataset = args.get("dataset", args.get("base"));
        c.suite = args.get("suite", "flat");
        c.git = gitCommit();
        c.nb = base.n;
        c.nq = query.n;
        c.d = base.d;
        const int d = c.d;
        std::fprintf(stderr, "[bench_flat] %s: nb=%lld nq=%lld d=%d (read in %.1f s)\n",
                     c.dataset.c_str(), (long long)c.nb, (long long)c.nq, d, nowSeconds() - t0);

        std::vector<int64_t> ks;
        for (int64_t k : parseIntList(args.get("k", "1,10,100,1024,4096")))
            if (k >= 1 && k <= c.nb) ks.push_back(k);
        if (ks.empty()) throw std::invalid_argument("no k in --k is within 1..nb");
        const int64_t kMax = *std::max_element(ks.begin(), ks.end());
        auto methods = parseList(args.get("methods", "faiss-cpu,floor,ours"));
        auto wants = [&](const char* m) {
            return std::find(methods.begin(), methods.end(), m) != methods.end();
        };
        const int reps = int(std::max<int64_t>(1, args.getInt("reps", 3)));
        const double cpuBudget = args.getDouble("cpu-budget", 3.0);
        const int64_t nRecall = std::min<int64_t>(c.nq, args.getInt("recall-nq", 256));
        const int singleCalls = int(std::max<int64_t>(0, args.getInt("single-query", 0)));
        const std::string storage = args.get("storage", "device");
        if (storage != "device" && storage != "host")
            throw std::invalid_argument("--storage " + storage + ": device or host");
        const bool hostStorage = storage == "host";
        // A "-unfused" suffix (tf32-bounded-unfused, auto-unfused) runs the
        // precision with the fused candidates off: the distance tiles
        // written and filtered, as before the fused kernel. A "-mma" suffix
        // keeps them fused but multiplied by the mma.sync kernel where the
        // warpgroup one would serve (Hopper).
        std::vector<gpu::DistancePrecision> precisions;
        std::vector<FusedMode> fusedModes;
        std::vector<int64_t> sharedSamples;  // 0: the library's default
        for (std::string name : parseList(args.get("precision", "fp32"))) {
            sharedSamples.push_back(takeSharedSamplesSuffix(name));
            FusedMode mode = FusedMode::Default;
            for (const FusedMode m : {FusedMode::Unfused, FusedMode::MmaSync}) {
                const std::string suffix = fusedModeSuffix(m);
                if (name.size() > suffix.size() &&
                    name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
                    name.resize(name.size() - suffix.size());
                    mode = m;
                }
            }
            precisions.push_back(gpu::distancePrecisionFromName(name.c_str()));
            fusedModes.push_back(mode);
        }

        // Exact reference on the recall subset: FAISS on the CPU, at kMax.
        // (OpenMP's idle threads spinning against OpenBLAS's took 168 s for
        // 256 queries of a 10M set on 16 cores; PASSIVE must be set before
        // the process starts, so it is only said here.)
        if (!std::getenv("OMP_WAIT_POLICY") && c.nb * nRecall > (int64_t(1) << 30)) {
            std::fprintf(stderr,
                         "[bench_flat] note: OMP_WAIT_POLICY is unset; the CPU reference of "
                         "%lld queries over %lld vectors may crawl (export "
                         "OMP_WAIT_POLICY=PASSIVE)\n",
                         (long long)nRecall, (long long)c.nb);
        }
        faiss::IndexFlatL2 cpuIndex(d);
        cpuIndex.add(c.nb, base.x.data());
        std::vector<int64_t> refI(size_t(nRecall) * kMax);
        {
            std::vector<float> refD(size_t(nRecall) * kMax);
            t0 = nowSeconds();
            cpuIndex.search(nRecall, query.x.data(), kMax, refD.data(), refI.data());
            std::fprintf(stderr, "[bench_flat] exact reference: %lld queries, k=%lld (%.1f s)\n",
                         (long long)nRecall, (long long)kMax, nowSeconds() - t0);
        }
        if (args.has("ref-out")) {
            const std::string prefix = args.get("ref-out");
            std::vector<int32_t> ids(refI.begin(), refI.end());
            writeIvecs(prefix + ".ivecs", nRecall, int(kMax), ids.data());
        }
        auto l2 = [&](int64_t q, int64_t id) {
            const float* a = query.x.data() + q * d;
            const float* b = base.x.data() + id * d;
            double s = 0;
            for (int j = 0; j < d; ++j) {
                double t = double(a[j]) - double(b[j]);
                s += t * t;
            }
            return s;
        };

        const std::string cpuDevice = cpuName();
        const int ompThreads = omp_get_max_threads();

        // ---- FAISS IndexFlatL2 on the CPU ----
        // FAISS runs its heaps with OpenMP and its GEMMs with OpenBLAS's own
        // threads; the two fight when both use all cores (untuned, 1M x 128
        // gave ~150 queries/s on the GPU machine). For each k, a probe on a
        // few queries tries three settings and the fastest is timed.
        if (wants("faiss-cpu")) {
            const int nThreads = std::max(1, ompThreads);
            const std::vector<std::pair<int, int>> settings = {
                    {nThreads, nThreads}, {1, nThreads}, {nThreads, 1}};  // (omp, blas)
            for (int64_t k : ks) {
                try {
                    const int64_t nProbe = std::min<int64_t>(c.nq, 64);
                    std::vector<float> D(size_t(c.nq) * k);
                    std::vector<int64_t> I(size_t(c.nq) * k);
                    double bestProbe = 1e300;
                    std::pair<int, int> best = settings[0];
                    JsonLine probes;
                    cpuIndex.search(nProbe, query.x.data(), k, D.data(), I.data());  // warm-up
                    for (auto st : settings) {
                        if (!setBlasThreads(st.second) && st.second != nThreads) continue;
                        omp_set_num_threads(st.first);
                        t0 = nowSeconds();
                        cpuIndex.search(nProbe, query.x.data(), k, D.data(), I.data());
                        const double tp = std::max(1e-6, nowSeconds() - t0);
                        probes.num("omp" + std::to_string(st.first) + "_blas" + std::to_string(st.second),
                                   nProbe / tp);
                        if (tp < bestProbe) {
                            bestProbe = tp;
                            best = st;
                        }
                    }
                    omp_set_num_threads(best.first);
                    setBlasThreads(best.second);
                    int64_t nTimed = std::min<int64_t>(
                            c.nq, std::max<int64_t>(nProbe, int64_t(nProbe * cpuBudget / bestProbe)));
                    t0 = nowSeconds();
                    cpuIndex.search(nTimed, query.x.data(), k, D.data(), I.data());
                    const double t = nowSeconds() - t0;
                    const double qps = nTimed / t;
                    JsonLine p;
                    p.integer("nq_timed", nTimed).boolean("extrapolated", nTimed < c.nq);
                    p.num("seconds_timed", t).integer("reps", 1);
                    p.integer("omp_threads", best.first).integer("blas_threads", best.second);
                    p.raw("probe_qps", probes.text());
                    p.str("OMP_NUM_THREADS", envOr("OMP_NUM_THREADS", "unset"));
                    p.str("OPENBLAS_NUM_THREADS", envOr("OPENBLAS_NUM_THREADS", "unset"));
                    p.str("OMP_WAIT_POLICY", envOr("OMP_WAIT_POLICY", "unset"));
                    p.str("blas", blasDescription());
                    p.str("note", "exact; the recall reference itself");
                    JsonLine j = head(c, "faiss-cpu:IndexFlatL2", cpuDevice, k);
                    j.raw("params", p.text()).num("seconds", c.nq / qps).num("qps", qps);
                    j.null("recall").str("git", c.git);
                    emit(j);
                    std::fprintf(stderr, "[bench_flat] faiss-cpu k=%lld: %lld queries in %.2f s, %.0f q/s "
                                 "(omp %d, blas %d threads)\n", (long long)k, (long long)nTimed, t, qps,
                                 best.first, best.second);
                } catch (const std::exception& e) {
                    ++failures;
                    std::fprintf(stderr, "[bench_flat] faiss-cpu k=%lld failed: %s\n", (long long)k, e.what());
                }
            }
            omp_set_num_threads(nThreads);
            setBlasThreads(nThreads);
        }

        const int nGpus = gpu::getNumDevices();
        if ((wants("floor") || wants("ours")) && nGpus == 0) {
            std::fprintf(stderr, "[bench_flat] no GPU found: floor and ours skipped\n");
            return failures ? 1 : 0;
        }
        std::string gpuDevice = "none";
        if (nGpus > 0) {
            cudaDeviceProp prop;
            FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
            gpuDevice = prop.name;
            FAISS_EXT_CUDA_CHECK(cudaSetDevice(0));
        }

        // ---- The floor: cuBLAS SGEMM of the same shapes, tiled over queries ----
        if (wants("floor")) {
            try {
                const double gib = args.getDouble("floor-mem-gib", 4.0);
                const std::vector<FloorTile> shapes = floorTileShapes(c.nq, c.nb, gib);
                size_t tileFloats = 0;
                for (const FloorTile& t : shapes) tileFloats = std::max(tileFloats, size_t(t.rows) * t.cols);
                DeviceArray<float> dB(size_t(c.nb) * d), dQ(size_t(c.nq) * d), dC(tileFloats);
                FAISS_EXT_CUDA_CHECK(cudaMemcpy(dB.p, base.x.data(), base.x.size() * 4, cudaMemcpyHostToDevice));
                FAISS_EXT_CUDA_CHECK(cudaMemcpy(dQ.p, query.x.data(), query.x.size() * 4, cudaMemcpyHostToDevice));
                // FP32, and TF32 (the bounded precisions' reference GEMM) when
                // one of them is benchmarked.
                const bool tf32Too =
                        std::any_of(precisions.begin(), precisions.end(), [](gpu::DistancePrecision x) {
                            return gpu::isBoundedPrecision(x) || x == gpu::DistancePrecision::Auto;
                        });
                for (bool tf32 : {false, true}) {
                    if (tf32 && !tf32Too) continue;
                    cublasHandle_t h;
                    FAISS_EXT_CUBLAS_CHECK(cublasCreate(&h));
                    FAISS_EXT_CUBLAS_CHECK(
                            cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
                    // The floor is the fastest of the tile shapes (full rows,
                    // and 2-D tiles of 1,024 / 4,096 queries where full rows
                    // leave few queries a tile).
                    FloorTile best;
                    double sec = 0;
                    for (const FloorTile& t : shapes) {
                        const double s = medianFloorSeconds(h, dB.p, dQ.p, dC.p, c.nq, c.nb, d, t, reps);
                        std::fprintf(stderr, "[bench_flat] floor%s tile %lld x %lld: %.4f s\n",
                                     tf32 ? " (tf32)" : "", (long long)t.rows, (long long)t.cols, s);
                        if (sec == 0 || s < sec) {
                            sec = s;
                            best = t;
                        }
                    }
                    cublasDestroy(h);
                    JsonLine p;
                    p.integer("tile_nq", best.rows).integer("tile_nb", best.cols).integer("reps", reps);
                    p.integer("tile_shapes_tried", int64_t(shapes.size()));
                    p.str("math", tf32 ? "tf32 (CUBLAS_TF32_TENSOR_OP_MATH)" : "fp32 (CUBLAS_DEFAULT_MATH)");
                    p.num("tflops", 2.0 * c.nb * c.nq * d / sec / 1e12).str("io", "device");
                    JsonLine j = head(c, tf32 ? "floor:cublas-sgemm-tf32" : "floor:cublas-sgemm",
                                      gpuDevice, 0);
                    j.raw("params", p.text()).num("seconds", sec).num("qps", c.nq / sec).null("recall");
                    j.str("git", c.git);
                    emit(j);
                    std::fprintf(stderr, "[bench_flat] floor%s: %.4f s (%.1f TFLOP/s)\n",
                                 tf32 ? " (tf32)" : "", sec, 2.0 * c.nb * c.nq * d / sec / 1e12);
                }
                if (std::any_of(precisions.begin(), precisions.end(), [](gpu::DistancePrecision x) {
                        return x == gpu::DistancePrecision::BF16x3Bounded ||
                               x == gpu::DistancePrecision::Auto;
                    })) {
                    emitBf16x3Floor(c, gpuDevice, dB.p, dQ.p, dC.p, shapes, reps);
                }
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_flat] floor failed: %s\n", e.what());
            }
        }

        // ---- Ours: GpuIndexQuickSelectFlat, device arrays in and out ----
        if (wants("ours")) {
            try {
                gpu::StandardGpuResources res;
                gpu::GpuIndexQuickSelectFlatConfig config;
                config.storage = hostStorage ? gpu::VectorStorage::Host : gpu::VectorStorage::Device;
                gpu::GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2, config);
                t0 = nowSeconds();
                index.add(c.nb, base.x.data());
                FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
                const double addSec = nowSeconds() - t0;
                DeviceArray<float> dQ(size_t(c.nq) * d);
                FAISS_EXT_CUDA_CHECK(cudaMemcpy(dQ.p, query.x.data(), query.x.size() * 4, cudaMemcpyHostToDevice));
                for (int64_t k : ks) {
                    if (singleCalls > 0) {
                        try {
                            const double sec = singleQueryLatency(index, dQ.p, c.nq, d, k, singleCalls);
                            emitSingleQuery(c, gpuDevice, k, singleCalls, sec);
                            if (k <= gpu::kFewQueryMaxK && k <= c.nb) {
                                emitSingleQuerySplit(c, gpuDevice, k, singleCalls, sec,
                                                     timeFewQuerySplit(base.x.data(), c.nb, d, dQ.p,
                                                                       c.nq, k, singleCalls));
                            }
                        } catch (const std::exception& e) {
                            ++failures;
                            std::fprintf(stderr, "[bench_flat] single-query k=%lld failed: %s\n",
                                         (long long)k, e.what());
                        }
                    }
                    std::vector<int64_t> fp32Ids;  // FP32's ids at this k, when it ran
                    for (size_t pi = 0; pi < precisions.size(); ++pi) {
                        const gpu::DistancePrecision precision = precisions[pi];
                        // Auto reports its routes too (TF32, then BF16x3, then FP32).
                        const bool bounded = gpu::isBoundedPrecision(precision) ||
                                             precision == gpu::DistancePrecision::Auto;
                        const FusedMode fusedMode = fusedModes[pi];
                        const int64_t samples = sharedSamples[pi];
                        const std::string method =
                                (bounded ? std::string("ours:quickselect-") +
                                                   gpu::distancePrecisionName(precision)
                                         : std::string("ours:quickselect")) +
                                fusedModeSuffix(fusedMode) +
                                (samples ? "-s" + std::to_string(samples) : std::string()) +
                                (hostStorage ? "+host-storage" : "");
                        gpu::setFusedCandidatesEnabled(fusedMode != FusedMode::Unfused);
                        gpu::setFusedWgmmaEnabled(fusedMode != FusedMode::MmaSync);
                        // (only when asked: the A/B scripts run this binary over
                        // libraries older than the hook)
                        if (samples) gpu::select::setSharedSampleSize(samples);
                        try {
                            gpu::SearchParametersQuickSelectFlat sp;
                            sp.distancePrecision = precision;
                            DeviceArray<float> dD(size_t(c.nq) * k);
                            DeviceArray<int64_t> dI(size_t(c.nq) * k);
                            // The warm-up (timed apart: the first search builds the
                            // copies a bounded precision keeps, e.g. the residual copy)
                            t0 = nowSeconds();
                            index.search(c.nq, dQ.p, k, dD.p, dI.p, &sp);
                            FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
                            const double firstSec = nowSeconds() - t0;
                            index.resetBoundedStats();
                            std::vector<double> times;
                            for (int r = 0; r < reps; ++r) {
                                t0 = nowSeconds();
                                index.search(c.nq, dQ.p, k, dD.p, dI.p, &sp);
                                FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
                                times.push_back(nowSeconds() - t0);
                            }
                            const gpu::BoundedSearchStats stats = index.getBoundedStats();
                            const double sec = median(times);
                            std::vector<int64_t> I(size_t(c.nq) * k);
                            FAISS_EXT_CUDA_CHECK(cudaMemcpy(I.data(), dI.p, I.size() * sizeof(int64_t),
                                                            cudaMemcpyDeviceToHost));
                            const double recall =
                                    recallAtK(nRecall, int(k), I.data(), k, refI.data(), kMax, l2, false);
                            JsonLine p;
                            p.integer("reps", reps).str("io", "device").num("add_seconds", addSec);
                            p.str("storage", storage);
                            p.num("first_search_seconds", firstSec);
                            p.integer("recall_nq", nRecall).str("recall_ref", "faiss-cpu:IndexFlatL2");
                            p.str("precision", gpu::distancePrecisionName(precision));
                            if (bounded) {  // the FP32 path runs no fused candidate kernel
                                p.str("fused_candidates",
                                      fusedMode == FusedMode::Unfused ? "off"
                                      : fusedMode == FusedMode::Default &&
                                                      gpu::fusedWgmmaAvailable(0)
                                              ? "wgmma"
                                              : "mma.sync");
                                if (samples) p.integer("shared_samples", samples);
                            }
                            p.str("resolved", gpu::distancePrecisionName(
                                                      index.resolveDistancePrecision(c.nq, k, &sp)));
                            if (bounded) {
                                // Per search (the counters cover the timed runs).
                                p.integer("certified_queries", stats.certifiedQueries / reps);
                                p.integer("fallback_queries", stats.fallbackQueries / reps);
                                p.integer("residual_queries", stats.residualQueries / reps);
                                if (!fp32Ids.empty()) {
                                    int64_t same = 0;
                                    for (int64_t qi = 0; qi < c.nq; ++qi) {
                                        same += std::equal(I.begin() + qi * k, I.begin() + (qi + 1) * k,
                                                           fp32Ids.begin() + qi * k);
                                    }
                                    p.num("same_ids_as_fp32", double(same) / double(c.nq));
                                }
                            } else {
                                fp32Ids = std::move(I);
                            }
                            JsonLine j = head(c, method, gpuDevice, k);
                            j.raw("params", p.text()).num("seconds", sec).num("qps", c.nq / sec);
                            j.num("recall", recall).str("git", c.git);
                            emit(j);
                            std::fprintf(stderr, "[bench_flat] %s k=%lld: %.4f s, %.0f q/s, recall %.4f",
                                         method.c_str(), (long long)k, sec, c.nq / sec, recall);
                            if (bounded) {
                                std::fprintf(stderr, ", fallback %lld of %lld queries (residual %lld)",
                                             (long long)(stats.fallbackQueries / reps), (long long)c.nq,
                                             (long long)(stats.residualQueries / reps));
                            }
                            std::fprintf(stderr, "\n");
                        } catch (const std::exception& e) {
                            ++failures;
                            std::fprintf(stderr, "[bench_flat] %s k=%lld failed: %s\n", method.c_str(),
                                         (long long)k, e.what());
                        }
                        gpu::setFusedCandidatesEnabled(true);  // the library's defaults again
                        gpu::setFusedWgmmaEnabled(true);
                        if (samples) gpu::select::setSharedSampleSize(0);
                    }
                }
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_flat] ours failed: %s\n", e.what());
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_flat: error: %s\n", e.what());
        return 2;
    }
    return failures ? 1 : 0;
}
