// bench_knngraph: the `knngraph` suite's C++ side (DESIGN.md, "Benchmarks";
// bench/README.md). The exact k-NN graph of a set (every stored vector is a
// query, itself excluded), in one process:
//   ours:knngraph       GpuIndexQuickSelectFlat::knnGraph (k, excludeSelf),
//                       vectors and results in device memory
//   floor:cublas-sgemm  cuBLAS SGEMM of the n x n x d products alone, tiled
//                       (what any GEMM-based exact graph must at least spend)
// and prints one JSON object a line on stdout (progress goes to stderr).
// bench/torch_knngraph.py times torch doing the same in query tiles and
// writes its graph's rows for the recall sample (--torch-ids); this program
// then scores ours on the same rows against (a) FAISS's exact CPU search
// (`recall`, ties counted as hits) and (b) torch's graph (`params.recall_vs_torch`).
//
//   bench_knngraph --base B.fbin [--dataset NAME] [--n N] [--k 10] [--methods ours,floor]
//                  [--reps 3] [--budget 30] [--recall-rows 512] [--torch-ids T.ivecs]
#include "bench/BenchData.h"
#include "bench/BenchDevice.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage = R"(bench_knngraph: the knngraph suite (exact k-NN graph) on one data set; JSON lines on stdout.
  --base F             vectors (.fvecs, .bvecs, .fbin, IDX[.gz])
  --dataset NAME       name written in every line (default: the base file's name)
  --n N                at most N vectors (default: all)
  --k K                neighbours per vector, itself excluded (default 10)
  --methods LIST       of ours, floor (default: both)
  --reps R             timed runs after one warm-up, median reported (default 3)
  --budget S           stop timing once the timed runs took > S s together (default 30; one run at least)
  --recall-rows N      rows scored for recall, spread evenly: row i*n/N (default 512)
  --torch-ids F        torch's graph on those rows (.ivecs, N x k, from torch_knngraph.py --ids-out)
  --floor-mem-gib G    distance tile of the GEMM floor, GiB (default 4)
  --git                print the commit compiled in and exit
)";

struct Common {
    std::string dataset, git, device;
    int64_t n;
    int d;
    int64_t k;
};

JsonLine head(const Common& c, const std::string& method, const std::string& algo, int64_t k) {
    JsonLine j;
    j.str("suite", "knngraph").str("dataset", c.dataset).str("method", method).str("algo", algo);
    j.str("device", c.device).integer("nb", c.n).integer("d", c.d).integer("nq", c.n);
    if (k > 0) j.integer("k", k);
    else j.null("k");
    return j;
}

void emit(const JsonLine& j) {
    std::printf("%s\n", j.text().c_str());
    std::fflush(stdout);
}

/// One warm-up (unless warmup is false), then up to `reps` timed runs of
/// fn() (which synchronises), stopping once they took > budget s together.
template <typename Fn>
std::vector<double> timeRuns(int reps, double budget, bool warmup, double* warmupSec, Fn&& fn) {
    if (warmup) {
        const double t0 = nowSeconds();
        fn();
        *warmupSec = nowSeconds() - t0;
    }
    std::vector<double> times;
    double total = 0;
    for (int r = 0; r < reps; ++r) {
        const double t0 = nowSeconds();
        fn();
        times.push_back(nowSeconds() - t0);
        total += times.back();
        if (total > budget) break;
    }
    return times;
}

/// Rows of the recall sample: i * n / m for i < m (torch_knngraph.py uses the same).
std::vector<int64_t> sampleRows(int64_t n, int64_t m) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < m; ++i) rows.push_back(i * n / m);
    return rows;
}

/// Ids with self and repeated ids replaced by -1 (which never count as hits).
std::vector<int64_t> cleanIds(const std::vector<int64_t>& rows, const int64_t* I, int64_t k) {
    std::vector<int64_t> out(I, I + rows.size() * k);
    for (size_t q = 0; q < rows.size(); ++q) {
        std::set<int64_t> seen;
        for (int64_t j = 0; j < k; ++j) {
            int64_t& id = out[q * k + j];
            if (id == rows[q] || !seen.insert(id).second) id = -1;
        }
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    int failures = 0;
    try {
        Args args(argc, argv, {"help", "git"});
        if (args.printedHelpOrGit(kUsage)) return 0;
        args.checkKnown({"base", "dataset", "n", "k", "methods", "reps", "budget", "recall-rows", "torch-ids",
                         "floor-mem-gib", "help", "git"});
        if (!args.has("base")) throw std::invalid_argument("--base is required (see --help)");

        double t0 = nowSeconds();
        Matrix base = readVectors(args.get("base"), args.getInt("n", 0));
        Common c;
        c.dataset = args.get("dataset", args.get("base"));
        c.git = gitCommit();
        c.n = base.n;
        c.d = base.d;
        c.k = args.getInt("k", 10);
        const int d = c.d;
        const int64_t k = c.k;
        if (k < 1 || k > c.n - 1) throw std::invalid_argument("--k must be within 1 .. n - 1");
        std::fprintf(stderr, "[bench_knngraph] %s: n=%lld d=%d k=%lld (read in %.1f s)\n", c.dataset.c_str(),
                     (long long)c.n, d, (long long)k, nowSeconds() - t0);
        auto methods = parseList(args.get("methods", "ours,floor"));
        auto wants = [&](const char* m) {
            return std::find(methods.begin(), methods.end(), m) != methods.end();
        };
        const int reps = int(std::max<int64_t>(1, args.getInt("reps", 3)));
        const double budget = args.getDouble("budget", 30.0);
        const int64_t nRecall = std::min<int64_t>(c.n, std::max<int64_t>(1, args.getInt("recall-rows", 512)));
        const std::vector<int64_t> rows = sampleRows(c.n, nRecall);

        if (gpu::getNumDevices() == 0) {
            std::fprintf(stderr, "[bench_knngraph] no GPU found: nothing to measure\n");
            return 0;
        }
        FAISS_EXT_CUDA_CHECK(cudaSetDevice(0));
        cudaDeviceProp prop;
        FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        c.device = prop.name;

        auto l2 = [&](int64_t q, int64_t id) {  // q: index into rows
            const float* a = base.x.data() + rows[q] * d;
            const float* b = base.x.data() + id * d;
            double s = 0;
            for (int j = 0; j < d; ++j) {
                double t = double(a[j]) - double(b[j]);
                s += t * t;
            }
            return s;
        };

        // ---- Ours: knnGraph, results in device memory ----
        if (wants("ours")) {
            try {
                // Exact reference on the sample rows: FAISS on the CPU at k + 1, self dropped.
                std::vector<int64_t> refI(size_t(nRecall) * k);
                {
                    faiss::IndexFlatL2 cpuIndex(d);
                    cpuIndex.add(c.n, base.x.data());
                    std::vector<float> q(size_t(nRecall) * d);
                    for (int64_t i = 0; i < nRecall; ++i)
                        std::copy_n(base.x.data() + rows[i] * d, d, q.data() + i * d);
                    std::vector<float> D(size_t(nRecall) * (k + 1));
                    std::vector<int64_t> I(size_t(nRecall) * (k + 1));
                    t0 = nowSeconds();
                    cpuIndex.search(nRecall, q.data(), k + 1, D.data(), I.data());
                    for (int64_t i = 0; i < nRecall; ++i) {
                        int64_t o = 0;
                        for (int64_t j = 0; j <= k && o < k; ++j)
                            if (I[i * (k + 1) + j] != rows[i]) refI[i * k + o++] = I[i * (k + 1) + j];
                    }
                    std::fprintf(stderr, "[bench_knngraph] exact reference (faiss-cpu): %lld rows, k=%lld (%.1f s)\n",
                                 (long long)nRecall, (long long)k, nowSeconds() - t0);
                }

                gpu::StandardGpuResources res;
                gpu::GpuIndexQuickSelectFlat index(&res, d, FlatMetric::L2);
                t0 = nowSeconds();
                index.add(c.n, base.x.data());
                FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
                const double addSec = nowSeconds() - t0;
                DeviceArray<float> dD(size_t(c.n) * k);
                DeviceArray<int64_t> dI(size_t(c.n) * k);
                double warm = 0;
                auto times = timeRuns(reps, budget, true, &warm, [&]() {
                    index.knnGraph(k, true, dD.p, dI.p);
                    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
                });
                const double sec = median(times);

                std::vector<int64_t> I(size_t(nRecall) * k);
                for (int64_t i = 0; i < nRecall; ++i)
                    FAISS_EXT_CUDA_CHECK(cudaMemcpy(I.data() + i * k, dI.p + rows[i] * k, k * sizeof(int64_t),
                                                    cudaMemcpyDeviceToHost));
                const std::vector<int64_t> mine = cleanIds(rows, I.data(), k);
                const double recall = recallAtK(nRecall, int(k), mine.data(), k, refI.data(), k, l2, false);
                double recallTorch = NAN;
                if (args.has("torch-ids")) {
                    try {
                        IntMatrix t = readIvecs(args.get("torch-ids"));
                        if (t.n != nRecall || t.d != k)
                            throw std::runtime_error("torch ids are " + std::to_string(t.n) + " x " +
                                                     std::to_string(t.d) + ", not recall-rows x k");
                        std::vector<int64_t> tI(t.x.begin(), t.x.end());
                        const std::vector<int64_t> theirs = cleanIds(rows, tI.data(), k);
                        recallTorch = recallAtK(nRecall, int(k), mine.data(), k, theirs.data(), k, l2, false);
                    } catch (const std::exception& e) {
                        ++failures;
                        std::fprintf(stderr, "[bench_knngraph] torch ids not usable: %s\n", e.what());
                    }
                }
                JsonLine p;
                p.integer("reps", int64_t(times.size())).str("io", "device").num("warmup_seconds", warm);
                p.num("add_seconds", addSec).boolean("exclude_self", true);
                p.str("storage", gpu::vectorStorageName(index.getStorage()));
                p.str("select_algo", gpu::selectAlgoName(index.resolveSelectAlgo(c.n, k)));
                p.integer("recall_nq", nRecall).str("recall_ref", "faiss-cpu:IndexFlatL2 (k+1, self dropped)");
                p.num("recall_vs_torch", recallTorch);
                JsonLine j = head(c, "ours:knngraph", "ours", k);
                j.raw("params", p.text()).num("seconds", sec).num("ms", sec * 1e3).num("qps", c.n / sec);
                j.num("recall", recall).str("git", c.git);
                emit(j);
                std::fprintf(stderr, "[bench_knngraph] ours: %.3f s (%zu runs, warm-up %.3f s), recall %.4f, "
                             "agreement with torch %.4f\n", sec, times.size(), warm, recall, recallTorch);
                if (!(recall >= 0.999)) {
                    ++failures;
                    std::fprintf(stderr, "[bench_knngraph] RECALL BELOW 0.999: the graph is not exact\n");
                }
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_knngraph] ours failed: %s\n", e.what());
            }
        }

        // ---- The floor: cuBLAS SGEMM of the n x n x d products, tiled over queries ----
        if (wants("floor")) {
            try {
                const double gib = args.getDouble("floor-mem-gib", 4.0);
                const int64_t tile = std::max<int64_t>(
                        1, std::min<int64_t>(c.n, int64_t(gib * (1ull << 30) / (4.0 * c.n))));
                DeviceArray<float> dB(size_t(c.n) * d), dC(size_t(tile) * c.n);
                FAISS_EXT_CUDA_CHECK(cudaMemcpy(dB.p, base.x.data(), base.x.size() * 4, cudaMemcpyHostToDevice));
                cublasHandle_t h;
                FAISS_EXT_CUBLAS_CHECK(cublasCreate(&h));
                FAISS_EXT_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
                auto run = [&](int64_t nq) {
                    const float alpha = 1.f, beta = 0.f;
                    for (int64_t q0 = 0; q0 < nq; q0 += tile) {
                        const int tq = int(std::min(tile, nq - q0));
                        // Column major: C (n x tq) = B^T (n x d) * Q (d x tq).
                        FAISS_EXT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, int(c.n), tq, d, &alpha,
                                                           dB.p, d, dB.p + q0 * d, d, &beta, dC.p, int(c.n)));
                    }
                    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
                };
                run(std::min(c.n, tile));  // warm-up: one tile
                double unused = 0;
                auto times = timeRuns(reps, budget, false, &unused, [&]() { run(c.n); });
                cublasDestroy(h);
                const double sec = median(times);
                const double tflops = 2.0 * double(c.n) * double(c.n) * d / sec / 1e12;
                JsonLine p;
                p.integer("tile_nq", tile).integer("reps", int64_t(times.size()));
                p.str("math", "fp32 (CUBLAS_DEFAULT_MATH)").num("tflops", tflops).str("io", "device");
                p.str("note", "the products alone: no norms, no selection");
                JsonLine j = head(c, "floor:cublas-sgemm", "gemm-floor", 0);
                j.raw("params", p.text()).num("seconds", sec).num("ms", sec * 1e3).num("qps", c.n / sec);
                j.null("recall").str("git", c.git);
                emit(j);
                std::fprintf(stderr, "[bench_knngraph] floor: %.3f s (%.1f TFLOP/s, %zu runs)\n", sec, tflops,
                             times.size());
            } catch (const std::exception& e) {
                ++failures;
                std::fprintf(stderr, "[bench_knngraph] floor failed: %s\n", e.what());
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_knngraph: error: %s\n", e.what());
        return 2;
    }
    return failures ? 1 : 0;
}
