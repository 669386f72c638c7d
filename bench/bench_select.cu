// bench_select: the `select` suite's C++ side (DESIGN.md, "Benchmarks";
// bench/README.md). Selection alone: the k smallest entries of every row of
// an nq x nb float matrix that is already on the GPU, sorted, by
//   ours:qms        faiss_ext::gpu::selectK, SelectAlgo::QuickMultiSelect
//   ours:mq         selectK, SelectAlgo::MergeQueue
//   ours:thheap     selectK, SelectAlgo::THHeap (CPU heap: capped, see below)
//   ours:auto       selectK, SelectAlgo::Auto (auto_pick: sampled-threshold when selectK
//                   ran that filter, else what chooseSelectAlgo chose)
//   floor:mem-read  a kernel that reads the whole matrix once (a sum): the
//                   memory-read floor of any selection on that matrix
// and prints one JSON object a line on stdout (progress goes to stderr);
// bench/torch_select.py measures torch.topk on the same matrices (the same
// hash generator, bit for bit) in the same suite run.
//
// Data: uniform floats in [0, 1) with 24 random bits, generated on the GPU by
// a counter-based hash of (row, column, seed) (fillUniform below;
// torch_select.py computes the same values). Timing: one warm-up, then up to
// --reps timed runs, median reported; each timed run starts with the L2
// cache flushed (a 2 x L2 memset, outside the timed span) and is timed by
// CUDA events on the resources' stream, inputs and outputs in device memory.
// Guards: timed runs stop once one took more than --guard s or all of them
// together more than --budget s (at least one is kept; TH-heap, which copies
// candidates to the host and is the slow one, stops past --thheap-shape-budget
// s); TH-heap is skipped where nq * nb > --thheap-max-elems and once it has
// used --thheap-budget s in this process. Shapes whose matrix is
// more than --max-mem-frac of the GPU's free memory (at start) are skipped.
//
//   bench_select [--nq 1,64,2048,8192] [--nb-log2 13-20] [--k 1,32,256,1024,2048,8192]
//                [--algos qms,mq,thheap,auto,floor] [--reps 5] [--guard 2] [--budget 3]
//                [--max-mem-frac 0.4] [--thheap-max-elems 2147483648] [--thheap-budget 60]
//                [--thheap-shape-budget 0.3]
//                [--check-rows 4] [--seed 1] [--no-flush] [--quick]
#include "bench/BenchDevice.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/gpu/GpuSelect.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage = R"(bench_select: the select suite (selection alone, matrices on the GPU); JSON lines on stdout.
  --nq LIST            rows (default 1,64,2048,8192)
  --nb LIST            columns (default: 2^lo .. 2^hi from --nb-log2)
  --nb-log2 LO-HI      column counts as powers of two (default 13-20)
  --k LIST             k values (default 1,32,256,1024,2048,8192; those > nb are skipped)
  --algos LIST         of qms, mq, thheap, auto, floor (default: all)
  --reps R             timed runs after one warm-up, median reported (default 5)
  --guard S            stop timing a (shape, algo) once one run took > S s (default 2)
  --budget S           ... or once its timed runs took > S s together (default 3)
  --max-mem-frac F     skip shapes whose matrix is > F x free GPU memory at start (default 0.4)
  --thheap-max-elems N skip TH-heap where nq * nb > N (default 2147483648 = 2^31)
  --thheap-budget S    skip TH-heap once it used S s in this process (default 60)
  --thheap-shape-budget S  TH-heap's --budget (default 0.3)
  --floor-reps R       runs of the read floor, best reported (default 10)
  --check-rows R       rows checked against a sort on the host, per (shape, algo) (default 4)
  --seed S             data seed (default 1; torch_select.py must get the same)
  --no-flush           do not flush the L2 cache before each timed run
  --quick              a handful of shapes: nq 64,2048 x nb 2^16,2^20 x k 32,1024
  --git                print the commit compiled in and exit
)";

// ---- data: a counter-based hash, reproduced bit for bit by torch_select.py ----

/// Chris Wellons' "lowbias32" shape with multipliers below 2^31, so that
/// torch can compute it exactly in int64 arithmetic.
__host__ __device__ inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 16;
    return x;
}

/// x[row][col] = (hash32(hash32(col + seed) ^ hash32(row * 0x9E3779B1 + seed + 0x632BE5AB)) >> 8) / 2^24
/// (arithmetic mod 2^32).
__global__ void fillUniformKernel(float* x, int64_t rows, int64_t cols, uint32_t seed) {
    const int64_t total = rows * cols;
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        const int64_t row = i / cols, col = i - row * cols;
        const uint32_t r = hash32(uint32_t(row) * 0x9E3779B1u + seed + 0x632BE5ABu);
        const uint32_t c = hash32(uint32_t(col) + seed);
        x[i] = float(hash32(c ^ r) >> 8) * (1.0f / 16777216.0f);
    }
}

// ---- the memory-read floor: read every float once (a sum, so nothing is elided) ----

__global__ void readFloorKernel(const float4* __restrict__ x, int64_t n4, float* out) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    float acc = 0.f;
    // Four independent loads in flight per thread.
    for (; i + 3 * stride < n4; i += 4 * stride) {
        const float4 a = __ldcs(x + i), b = __ldcs(x + i + stride);
        const float4 c = __ldcs(x + i + 2 * stride), d = __ldcs(x + i + 3 * stride);
        acc += (a.x + a.y + a.z + a.w) + (b.x + b.y + b.z + b.w) + (c.x + c.y + c.z + c.w) +
               (d.x + d.y + d.z + d.w);
    }
    for (; i < n4; i += stride) {
        const float4 a = __ldcs(x + i);
        acc += a.x + a.y + a.z + a.w;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

/// A pair of CUDA events.
struct EventPair {
    cudaEvent_t start = nullptr, stop = nullptr;
    EventPair() {
        FAISS_EXT_CUDA_CHECK(cudaEventCreate(&start));
        FAISS_EXT_CUDA_CHECK(cudaEventCreate(&stop));
    }
    ~EventPair() {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
    }
    EventPair(const EventPair&) = delete;
    EventPair& operator=(const EventPair&) = delete;
};

struct Algo {
    std::string shortName;  // qms, mq, thheap, auto
    gpu::SelectAlgo algo;
};

struct Ctx {
    std::string device, git, dataset;
    cudaStream_t stream = nullptr;
    bool flush = true;
    void* flushBuf = nullptr;
    size_t flushBytes = 0;
};

JsonLine head(const Ctx& c, const std::string& algoField, const std::string& method, int64_t nq,
              int64_t nb, int64_t k) {
    JsonLine j;
    j.str("suite", "select").str("dataset", c.dataset).str("method", method).str("algo", algoField);
    j.str("device", c.device).integer("nb", nb).null("d").integer("nq", nq);
    if (k > 0) j.integer("k", k);
    else j.null("k");
    return j;
}

void emit(const JsonLine& j) {
    std::printf("%s\n", j.text().c_str());
    std::fflush(stdout);
}

void flushL2(const Ctx& c) {
    if (c.flush && c.flushBuf)
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(c.flushBuf, 0, c.flushBytes, c.stream));
}

/// Result of timing one (shape, method).
struct Timing {
    std::vector<double> ms;      // event times of the timed runs
    std::vector<double> wallMs;  // host times of the same runs (device synchronised)
    double warmupMs = 0;
    bool stoppedEarly = false;
};

/// One warm-up, then up to `reps` timed runs of fn() on c.stream, stopping
/// early by the guards. fn enqueues (or runs) the work.
template <typename Fn>
Timing timeIt(const Ctx& c, int reps, double guardS, double budgetS, Fn&& fn) {
    Timing t;
    EventPair ev;
    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
    double t0 = nowSeconds();
    fn();
    FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
    t.warmupMs = (nowSeconds() - t0) * 1e3;
    // A warm-up past the guard: one timed run is all we afford.
    const int n = t.warmupMs > guardS * 1e3 ? 1 : reps;
    double total = 0;
    for (int r = 0; r < n; ++r) {
        flushL2(c);
        FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
        t0 = nowSeconds();
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(ev.start, c.stream));
        fn();
        FAISS_EXT_CUDA_CHECK(cudaEventRecord(ev.stop, c.stream));
        FAISS_EXT_CUDA_CHECK(cudaEventSynchronize(ev.stop));
        FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
        const double wall = nowSeconds() - t0;
        float ms = 0;
        FAISS_EXT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
        t.ms.push_back(ms);
        t.wallMs.push_back(wall * 1e3);
        total += wall;
        if (r + 1 < n && (wall > guardS || total > budgetS)) {
            t.stoppedEarly = true;
            break;
        }
    }
    if (n < reps) t.stoppedEarly = true;
    return t;
}

/// Checks outputs on a few rows against a sort on the host: the fraction of
/// the checked (row, j) whose value equals the j-th smallest of the row and
/// whose id is distinct, in range and points at that value.
double checkRows(int64_t nq, int64_t nb, int64_t k, const float* dX, const float* dV,
                 const int64_t* dI, int nRows) {
    std::set<int64_t> rows;
    for (int i = 0; i < nRows; ++i) rows.insert(nRows > 1 ? (nq - 1) * i / (nRows - 1) : 0);
    std::vector<float> x(nb), v(k), ref(nb);
    std::vector<int64_t> id(k);
    int64_t good = 0, total = 0;
    for (int64_t r : rows) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(x.data(), dX + r * nb, nb * sizeof(float), cudaMemcpyDeviceToHost));
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(v.data(), dV + r * k, k * sizeof(float), cudaMemcpyDeviceToHost));
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(id.data(), dI + r * k, k * sizeof(int64_t), cudaMemcpyDeviceToHost));
        ref = x;
        std::nth_element(ref.begin(), ref.begin() + (k - 1), ref.end());
        std::sort(ref.begin(), ref.begin() + k);
        std::set<int64_t> seen;
        for (int64_t j = 0; j < k; ++j) {
            const int64_t i = id[j];
            const bool ok = v[j] == ref[j] && i >= 0 && i < nb && x[i] == v[j] && seen.insert(i).second;
            good += ok;
            ++total;
        }
    }
    return total ? double(good) / double(total) : NAN;
}

}  // namespace

int main(int argc, char** argv) {
    int failures = 0;
    try {
        Args args(argc, argv, {"help", "git", "no-flush", "quick"});
        if (args.has("help")) {
            std::printf("%s", kUsage);
            return 0;
        }
        if (args.has("git")) {
            std::printf("%s\n", gitCommit().c_str());
            return 0;
        }
        args.checkKnown({"nq", "nb", "nb-log2", "k", "algos", "reps", "guard", "budget", "max-mem-frac",
                         "thheap-max-elems", "thheap-budget", "thheap-shape-budget", "floor-reps", "check-rows", "seed",
                         "no-flush", "quick", "help", "git"});
        const bool quick = args.has("quick");
        std::vector<int64_t> nqs = parseIntList(args.get("nq", quick ? "64,2048" : "1,64,2048,8192"));
        std::vector<int64_t> nbs;
        if (args.has("nb")) {
            nbs = parseIntList(args.get("nb"));
        } else if (quick && !args.has("nb-log2")) {
            nbs = {int64_t(1) << 16, int64_t(1) << 20};
        } else {
            const std::string r = args.get("nb-log2", "13-20");
            const size_t dash = r.find('-');
            const int lo = std::stoi(r.substr(0, dash));
            const int hi = dash == std::string::npos ? lo : std::stoi(r.substr(dash + 1));
            if (lo < 0 || hi > 40 || lo > hi) throw std::invalid_argument("--nb-log2: LO-HI with 0 <= LO <= HI <= 40");
            for (int e = lo; e <= hi; ++e) nbs.push_back(int64_t(1) << e);
        }
        const std::vector<int64_t> ks =
                parseIntList(args.get("k", quick ? "32,1024" : "1,32,256,1024,2048,8192"));
        const std::vector<std::string> algoNames = parseList(args.get("algos", "qms,mq,thheap,auto,floor"));
        auto wants = [&](const char* m) {
            return std::find(algoNames.begin(), algoNames.end(), m) != algoNames.end();
        };
        const int reps = int(std::max<int64_t>(1, args.getInt("reps", 5)));
        const double guardS = args.getDouble("guard", 2.0);
        const double budgetS = args.getDouble("budget", 3.0);
        const double memFrac = args.getDouble("max-mem-frac", 0.4);
        const int64_t thMaxElems = args.getInt("thheap-max-elems", int64_t(1) << 31);
        const double thBudgetS = args.getDouble("thheap-budget", 60.0);
        const double thShapeBudgetS = args.getDouble("thheap-shape-budget", 0.3);
        const int floorReps = int(std::max<int64_t>(1, args.getInt("floor-reps", 10)));
        const int checkN = int(std::max<int64_t>(0, args.getInt("check-rows", 4)));
        const uint32_t seed = uint32_t(args.getInt("seed", 1));

        std::vector<Algo> algos;
        if (wants("qms")) algos.push_back({"qms", gpu::SelectAlgo::QuickMultiSelect});
        if (wants("mq")) algos.push_back({"mq", gpu::SelectAlgo::MergeQueue});
        if (wants("thheap")) algos.push_back({"thheap", gpu::SelectAlgo::THHeap});
        if (wants("auto")) algos.push_back({"auto", gpu::SelectAlgo::Auto});

        if (gpu::getNumDevices() == 0) {
            std::fprintf(stderr, "[bench_select] no GPU found: nothing to measure\n");
            return 0;
        }
        FAISS_EXT_CUDA_CHECK(cudaSetDevice(0));
        cudaDeviceProp prop;
        FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        size_t freeMem = 0, totalMem = 0;
        FAISS_EXT_CUDA_CHECK(cudaMemGetInfo(&freeMem, &totalMem));

        Ctx c;
        c.device = prop.name;
        c.git = gitCommit();
        c.dataset = "uniform-hash-seed" + std::to_string(seed);
        c.flush = !args.has("no-flush");
        FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
        gpu::StandardGpuResources res;
        res.setDefaultStream(0, c.stream);  // selectK's work and our events on one stream
        DeviceArray<unsigned char> flushBuf(c.flush ? size_t(2) * std::max(prop.l2CacheSize, 1 << 20) : 1);
        c.flushBuf = flushBuf.p;
        c.flushBytes = c.flush ? size_t(2) * std::max(prop.l2CacheSize, 1 << 20) : 0;
        DeviceArray<float> dSum(1);
        FAISS_EXT_CUDA_CHECK(cudaMemset(dSum.p, 0, sizeof(float)));

        std::fprintf(stderr, "[bench_select] %s: %.1f GiB free of %.1f GiB; L2 %d MiB (flush %s); "
                     "%zu nq x %zu nb x %zu k; reps %d\n", c.device.c_str(), freeMem / 1073741824.0,
                     totalMem / 1073741824.0, prop.l2CacheSize >> 20, c.flush ? "on" : "off",
                     nqs.size(), nbs.size(), ks.size(), reps);
        double thUsedS = 0;
        const double tStart = nowSeconds();

        for (int64_t nq : nqs) {
            for (int64_t nb : nbs) {
                const double bytes = double(nq) * double(nb) * sizeof(float);
                if (nq < 1 || nb < 1 || nb % 4 != 0) {
                    std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld: skipped (nb must be a multiple of 4)\n",
                                 (long long)nq, (long long)nb);
                    continue;
                }
                if (bytes > memFrac * double(freeMem)) {
                    std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld: skipped (%.1f GiB > %.0f%% of the "
                                 "%.1f GiB free at start)\n", (long long)nq, (long long)nb, bytes / 1073741824.0,
                                 memFrac * 100, freeMem / 1073741824.0);
                    continue;
                }
                try {
                    DeviceArray<float> dX(size_t(nq) * nb);
                    {
                        const int64_t total = nq * nb;
                        const int blocks = int(std::min<int64_t>((total + 255) / 256, int64_t(prop.multiProcessorCount) * 32));
                        fillUniformKernel<<<blocks, 256, 0, c.stream>>>(dX.p, nq, nb, seed);
                        FAISS_EXT_CUDA_CHECK_LAUNCH();
                        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(c.stream));
                    }

                    // ---- the read floor: best of floorReps ----
                    if (wants("floor")) {
                        const int64_t n4 = nq * nb / 4;
                        const int blocks = int(std::max<int64_t>(1, std::min<int64_t>(
                                (n4 + 255) / 256, int64_t(prop.multiProcessorCount) * (prop.maxThreadsPerMultiProcessor / 256))));
                        // The sum accumulates over runs: it is never read, only kept alive.
                        Timing t = timeIt(c, floorReps, guardS, budgetS, [&]() {
                            readFloorKernel<<<blocks, 256, 0, c.stream>>>(
                                    reinterpret_cast<const float4*>(dX.p), n4, dSum.p);
                            FAISS_EXT_CUDA_CHECK_LAUNCH();
                        });
                        const double best = *std::min_element(t.ms.begin(), t.ms.end());
                        JsonLine p;
                        p.integer("reps", int64_t(t.ms.size())).str("stat", "best").num("median_ms", median(t.ms));
                        p.str("what", "one read of the matrix (a sum kernel, float4 streaming loads)");
                        p.boolean("l2_flush", c.flush).integer("bytes", int64_t(bytes)).integer("blocks", blocks);
                        JsonLine j = head(c, "mem-floor", "floor:mem-read", nq, nb, 0);
                        j.raw("params", p.text()).num("seconds", best / 1e3).num("ms", best);
                        j.num("qps", nq / (best / 1e3)).num("gbps", bytes / (best / 1e3) / 1e9);
                        j.null("recall").null("auto_pick").str("git", c.git);
                        emit(j);
                        std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld floor: %.4f ms, %.0f GB/s\n",
                                     (long long)nq, (long long)nb, best, bytes / (best / 1e3) / 1e9);
                    }

                    for (int64_t k : ks) {
                        if (k < 1 || k > nb) continue;
                        DeviceArray<float> dV(size_t(nq) * k);
                        DeviceArray<int64_t> dI(size_t(nq) * k);
                        for (const Algo& a : algos) {
                            if (a.algo == gpu::SelectAlgo::THHeap) {
                                if (nq * nb > thMaxElems) {
                                    std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld k=%lld thheap: skipped "
                                                 "(nq*nb > %lld)\n", (long long)nq, (long long)nb, (long long)k,
                                                 (long long)thMaxElems);
                                    continue;
                                }
                                if (thUsedS > thBudgetS) {
                                    std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld k=%lld thheap: skipped "
                                                 "(its budget of %.0f s is spent)\n", (long long)nq, (long long)nb,
                                                 (long long)k, thBudgetS);
                                    continue;
                                }
                            }
                            const std::string algoField = "ours-" + a.shortName;
                            try {
                                gpu::SelectKOptions opt;
                                opt.algo = a.algo;
                                opt.device = 0;
                                const double ta = nowSeconds();
                                const int64_t filteredBefore = gpu::select::sampledThresholdCounters().rows;
                                const double b = a.algo == gpu::SelectAlgo::THHeap ? thShapeBudgetS : budgetS;
                                Timing t = timeIt(c, reps, guardS, b, [&]() {
                                    gpu::selectK(&res, dX.p, nq, nb, k, false, dV.p, dI.p, opt);
                                });
                                if (a.algo == gpu::SelectAlgo::THHeap) thUsedS += nowSeconds() - ta;
                                const double ms = median(t.ms);
                                const double exact = checkN > 0 ? checkRows(nq, nb, k, dX.p, dV.p, dI.p, checkN) : NAN;
                                JsonLine p;
                                p.integer("reps", int64_t(t.ms.size())).str("stat", "median");
                                p.num("min_ms", *std::min_element(t.ms.begin(), t.ms.end()));
                                p.num("wall_ms", median(t.wallMs)).num("warmup_ms", t.warmupMs);
                                p.boolean("stopped_early", t.stoppedEarly).boolean("l2_flush", c.flush);
                                p.str("io", "device").boolean("sorted", true).boolean("largest", false);
                                p.str("select_algo", gpu::selectAlgoName(a.algo));
                                p.integer("check_rows", checkN);
                                JsonLine j = head(c, algoField, "ours:" + a.shortName, nq, nb, k);
                                j.raw("params", p.text()).num("seconds", ms / 1e3).num("ms", ms);
                                j.num("qps", nq / (ms / 1e3)).num("gbps", bytes / (ms / 1e3) / 1e9);
                                j.num("recall", exact);
                                // Auto on a device matrix may run the sampled-threshold
                                // filter instead of the chooser's pick: its counters tell.
                                const bool filtered =
                                    gpu::select::sampledThresholdCounters().rows > filteredBefore;
                                if (a.algo == gpu::SelectAlgo::Auto)
                                    j.str("auto_pick", filtered ? "sampled-threshold"
                                                                : gpu::selectAlgoName(gpu::chooseSelectAlgo(nq, nb, k, 0)));
                                else
                                    j.null("auto_pick");
                                j.str("git", c.git);
                                emit(j);
                                std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld k=%lld %s: %.4f ms (%zu runs), "
                                             "exact %.4f\n", (long long)nq, (long long)nb, (long long)k,
                                             algoField.c_str(), ms, t.ms.size(), exact);
                                if (checkN > 0 && !(exact == 1.0)) {
                                    ++failures;
                                    std::fprintf(stderr, "[bench_select] WRONG RESULT: %s nq=%lld nb=%lld k=%lld "
                                                 "(checked fraction %.4f)\n", algoField.c_str(), (long long)nq,
                                                 (long long)nb, (long long)k, exact);
                                }
                            } catch (const std::exception& e) {
                                ++failures;
                                std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld k=%lld %s failed: %s\n",
                                             (long long)nq, (long long)nb, (long long)k, algoField.c_str(), e.what());
                                cudaGetLastError();
                            }
                        }
                    }
                } catch (const std::exception& e) {
                    ++failures;
                    std::fprintf(stderr, "[bench_select] nq=%lld nb=%lld failed: %s\n", (long long)nq,
                                 (long long)nb, e.what());
                    cudaGetLastError();
                }
            }
        }
        std::fprintf(stderr, "[bench_select] done in %.1f s (TH-heap: %.1f s)\n", nowSeconds() - tStart, thUsedS);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(c.stream));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_select: error: %s\n", e.what());
        return 2;
    }
    return failures ? 1 : 0;
}
