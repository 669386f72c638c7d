// soak: a long random run of every GPU index against its CPU twin, with a
// memory watch (issue 6, items 5 and 6).
//
// Each step picks one of the three GPU indexes at random and one operation:
//   add     random n of clustered vectors (fixed d per index); the twin gets
//           the same add; when ntotal passes the index's cap both are reset
//   search  random nq (1..500), random k (1 .. 1000 and past ntotal; LSH up
//           to the work queue's range, GNND up to 4096) and, for LSH, random
//           search parameters
//   reset   both sides (LSH: and sometimes train both again on new data)
//   save    faiss_ext::write_index of the GPU index to a temp file, with a
//           snapshot of the twin and of the GPU's answers to a probe set
//   load    faiss_ext::read_index of the last save, back to the GPU through
//           faiss_ext::gpu::index_cpu_to_gpu; the loaded index replaces the
//           live one (the twin reverts to its snapshot) and must give the
//           saved answers bit for bit (GNND: and the same graph)
// and checks the GPU against the twin:
//   GpuIndexQuickSelectFlat  vs faiss::IndexFlat: compareKnn (tests/TestUtils):
//                            distances within a relative tolerance rank by
//                            rank, ids equal unless tied, -1 padding alike
//   GpuIndexBiLevelLSH       vs faiss_ext::IndexBiLevelLSH (same train / add
//                            calls): identical candidate sets, and the same
//                            results (bit for bit counted; within 1e-5 ties
//                            aside required, --lsh-bitwise requires bits)
//   GpuKnnGraphGNND          after each add: getGraph() identical to the
//                            graph of a copyTo() twin (faiss::IndexNNDescentFlat),
//                            valid rows, recall@10 of ~200 sampled rows
//                            against brute force >= --graph-floor; searches:
//                            valid (ids in range, distinct, sorted, the true
//                            distances of those ids from the twin's
//                            vectors), recall@10 >= --search-floor per
//                            search of >= 50 queries and on average over all
//                            (GNND's data: 16 overlapping clusters, so that
//                            the graph is one component)
// Memory: every --mem-every steps (and at least every 2 s) host RSS
// (/proc/self/statm), faiss_ext::gpu::getDeviceMemoryStats and cudaMemGetInfo.
// At checkpoints (after warm-up, every ~1/8 of the run, at the end) all
// three indexes get a small add and are reset: allocatedBytes and
// allocations must then be those of the first checkpoint (leak check), and
// RSS and the pool's reserved bytes at the checkpoints of the last quarter
// must stay within a tolerance of those of the first quarter. At a
// checkpoint the allocators' caches are given back first (glibc's
// malloc_trim, cudaMemPoolTrimTo on the device's default pool), so that
// what is measured is memory in use, not the high-water mark the caches
// keep by design; the untrimmed figures are logged beside them
// (rssBeforeTrim, poolReservedBeforeTrim).
// Exit status: 0 when every step agreed and memory did not grow; 1 on a
// divergence (stops at the first unless --keep-going) or memory growth;
// 0 with "skipped: no GPU" on a machine without a GPU.
//
//   build/bench/soak --seconds 600 --seed 1 --out soak.jsonl
//   build/bench/soak --quick                        # ~20 s smoke run
#include "bench/BenchUtil.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/index_io.h"
#include "faiss_ext/gpu/GpuCloner.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "tests/TestUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/impl/FaissException.h>

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <execinfo.h>
#include <malloc.h>
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;
using idx_t = int64_t;

namespace {

// ---------------------------------------------------------------- options

struct Options {
    double seconds = 600;
    uint64_t seed = 1;
    std::string out;
    int device = 0;
    bool quick = false;
    bool keepGoing = false;
    bool lshBitwise = false;
    int64_t memEvery = 20;
    double graphFloor = 0.9;
    double searchFloor = 0.8;
    double growthTol = 0.25;        ///< relative growth allowed (RSS, pool)
    double growthSlackMiB = 64;     ///< plus this many MiB
    double progressSeconds = 30;
};

const char* kUsage =
        "soak [--seconds S (600)] [--seed N (1)] [--out LOG.jsonl] [--device D (0)] [--quick]\n"
        "     [--keep-going] [--lsh-bitwise] [--mem-every STEPS (20)] [--graph-floor R (0.9)]\n"
        "     [--search-floor R (0.8)] [--growth-tol F (0.25)] [--growth-slack-mib M (64)]\n"
        "Random add / search / reset / save / load on the three GPU indexes, each step\n"
        "checked against the CPU twin; memory watched. --quick: a ~20 s smoke run.\n";

// ---------------------------------------------------------------- output

std::ofstream gLog;

void logJson(JsonLine j) {
    if (gLog.is_open()) gLog << j.text() << std::endl;
}

// ---------------------------------------------------------------- memory

struct MemSample {
    int64_t step = 0;
    double t = 0;
    size_t rss = 0;
    gpu::DeviceMemoryStats dev;
    size_t cudaFree = 0, cudaTotal = 0;
    bool checkpoint = false;
};

size_t rssBytes() {
    std::ifstream f("/proc/self/statm");
    size_t pages = 0, resident = 0;
    f >> pages >> resident;
    return resident * size_t(sysconf(_SC_PAGESIZE));
}

MemSample sampleMemory(int device, int64_t step, double t, bool checkpoint) {
    size_t rssBefore = 0, poolBefore = 0;
    if (checkpoint) {  // give the caches back: measure what is in use
        rssBefore = rssBytes();
        poolBefore = gpu::getDeviceMemoryStats(device).poolReservedBytes;
        malloc_trim(0);
        gpu::DeviceScope scope(device);
        cudaMemPool_t pool;
        if (cudaDeviceSynchronize() != cudaSuccess ||
            cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
            cudaMemPoolTrimTo(pool, 0) != cudaSuccess)
            cudaGetLastError();
    }
    MemSample s;
    s.step = step;
    s.t = t;
    s.rss = rssBytes();
    s.dev = gpu::getDeviceMemoryStats(device);
    {
        gpu::DeviceScope scope(device);
        if (cudaMemGetInfo(&s.cudaFree, &s.cudaTotal) != cudaSuccess) cudaGetLastError();
    }
    s.checkpoint = checkpoint;
    JsonLine j;
    j.str("event", checkpoint ? "checkpoint" : "memory").integer("step", step).num("t", t);
    j.integer("rss", int64_t(s.rss)).integer("allocatedBytes", int64_t(s.dev.allocatedBytes));
    j.integer("allocations", int64_t(s.dev.allocations));
    j.integer("poolReservedBytes", int64_t(s.dev.poolReservedBytes));
    j.integer("poolUsedBytes", int64_t(s.dev.poolUsedBytes));
    j.integer("cudaFree", int64_t(s.cudaFree)).integer("cudaTotal", int64_t(s.cudaTotal));
    if (checkpoint) {
        j.integer("rssBeforeTrim", int64_t(rssBefore));
        j.integer("poolReservedBeforeTrim", int64_t(poolBefore));
    }
    logJson(j);
    return s;
}

std::string mib(size_t b) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", double(b) / (1 << 20));
    return buf;
}

// ---------------------------------------------------------------- data

/// Clustered vectors of one index: fixed centres, fresh noise.
class DataGen {
public:
    /// `clusters` centres drawn from N(0, centreScale^2), unit noise.
    DataGen(int d, int clusters, uint64_t seed, float centreScale) : d_(d), rng_(seed) {
        std::normal_distribution<float> g(0.f, 1.f);
        centres_.resize(size_t(clusters) * d);
        for (auto& c : centres_) c = centreScale * g(rng_);
    }
    std::vector<float> vectors(int64_t n) {
        std::normal_distribution<float> g(0.f, 1.f);
        std::uniform_int_distribution<int> pick(0, int(centres_.size() / d_) - 1);
        std::vector<float> v(size_t(n) * d_);
        for (int64_t i = 0; i < n; ++i) {
            const int c = pick(rng_);
            for (int j = 0; j < d_; ++j) v[size_t(i) * d_ + j] = centres_[size_t(c) * d_ + j] + g(rng_);
        }
        return v;
    }

private:
    int d_;
    std::mt19937_64 rng_;
    std::vector<float> centres_;
};

double l2sq(const float* a, const float* b, int d) {
    double s = 0;
    for (int j = 0; j < d; ++j) {
        const double t = double(a[j]) - double(b[j]);
        s += t * t;
    }
    return s;
}

bool closeTo(double got, double want, double relTol, double absTol) {
    return std::fabs(got - want) <= absTol + relTol * std::max(std::fabs(got), std::fabs(want));
}

// ---------------------------------------------------------------- run state

enum Op { kAdd = 0, kSearch, kReset, kSave, kLoad, kNumOps };
const char* kOpNames[kNumOps] = {"add", "search", "reset", "save", "load"};

struct Divergence : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Ctx {
    Options opt;
    std::mt19937_64 rng;
    gpu::StandardGpuResources res;
    int64_t step = 0;
    std::string currentOp;
    std::map<std::string, int64_t> opCounts;
    int64_t divergences = 0;
    int64_t lshBitwiseSearches = 0, lshToleranceSearches = 0;
    double graphRecallMin = 1, searchRecallMin = 1;
    double searchRecallSum = 0;     ///< GNND recall x nq over all searches
    int64_t searchRecallQueries = 0;

    int64_t uniform(int64_t lo, int64_t hi) {  // inclusive
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    }
    double unit() { return std::uniform_real_distribution<double>(0, 1)(rng); }

    /// Reports a divergence: one line on stdout, one in the log; throws
    /// Divergence unless --keep-going.
    void diverge(const std::string& index, const std::string& what) {
        ++divergences;
        std::ostringstream msg;
        msg << "DIVERGENCE at step " << step << ", " << index << " " << currentOp << ": " << what;
        std::cout << msg.str() << std::endl;
        JsonLine j;
        j.str("event", "divergence").integer("step", step).str("index", index);
        j.str("op", currentOp).str("what", what);
        logJson(j);
        if (!opt.keepGoing) throw Divergence(msg.str());
    }
};

/// The probe set whose answers a save records and a load must reproduce.
struct Probe {
    std::vector<float> q;
    int64_t nq = 0, k = 0;
    std::vector<float> D;
    std::vector<idx_t> I;
};

bool sameBits(const Probe& a, const std::vector<float>& D, const std::vector<idx_t>& I) {
    return a.I == I && a.D.size() == D.size() &&
           (D.empty() || std::memcmp(a.D.data(), D.data(), D.size() * sizeof(float)) == 0);
}

/// First differing position of two equal-size result lists, as text.
std::string firstDifference(const std::vector<float>& Da, const std::vector<idx_t>& Ia,
                            const std::vector<float>& Db, const std::vector<idx_t>& Ib,
                            int64_t k) {
    for (size_t i = 0; i < Ia.size(); ++i) {
        if (Ia[i] != Ib[i] || std::memcmp(&Da[i], &Db[i], sizeof(float)) != 0) {
            std::ostringstream s;
            s.precision(9);
            s << "query " << int64_t(i) / k << " rank " << int64_t(i) % k << ": (" << Ia[i] << ", "
              << Da[i] << ") vs (" << Ib[i] << ", " << Db[i] << ")";
            return s.str();
        }
    }
    return "sizes differ";
}

/// One GPU index, its twin and its save slot.
class Side {
public:
    Side(Ctx& c, std::string name, int d, int64_t cap, uint64_t seed, int clusters = 64,
         float centreScale = 4.f)
            : c_(c), name_(std::move(name)), d_(d), cap_(cap), gen_(d, clusters, seed, centreScale) {
        char tmpl[] = "/tmp/faiss_ext_soak_XXXXXX";
        const int fd = mkstemp(tmpl);
        if (fd >= 0) close(fd);
        file_ = tmpl;
        probeQ_ = gen_.vectors(64);
    }
    virtual ~Side() { std::remove(file_.c_str()); }

    const std::string& name() const { return name_; }
    /// "flat", "lsh", "gnnd" (op counts).
    std::string shortName() const {
        return name_.find("Flat") != std::string::npos  ? "flat"
               : name_.find("LSH") != std::string::npos ? "lsh"
                                                        : "gnnd";
    }
    virtual idx_t ntotal() const = 0;

    void add() {
        if (ntotal() >= cap_) {
            c_.currentOp = "reset (cap)";
            reset();
            c_.currentOp = "add";
        }
        add(pickAddCount());
    }
    virtual void add(int64_t n) = 0;
    virtual void search() = 0;
    virtual void reset() = 0;

    void save() {
        faiss_ext::write_index(gpuIndex(), file_.c_str());
        saveTwin();
        saved_ = true;
        probe_ = Probe();
        probe_.q = probeQ_;
        probe_.nq = 64;
        probe_.k = probeK();
        runProbe(gpuIndex(), &probe_.D, &probe_.I);
    }

    void load() {
        if (!saved_) save();
        std::unique_ptr<faiss::Index> cpu(faiss_ext::read_index(file_.c_str()));
        std::unique_ptr<faiss::Index> g(
                gpu::index_cpu_to_gpu(&c_.res, c_.opt.device, cpu.get()));
        if (g->ntotal != savedNtotal_)
            c_.diverge(name_, "loaded ntotal " + std::to_string(g->ntotal) + " != saved " +
                                      std::to_string(savedNtotal_));
        std::vector<float> D;
        std::vector<idx_t> I;
        runProbe(g.get(), &D, &I);
        if (!sameBits(probe_, D, I))
            c_.diverge(name_, "save / load changed the results: " +
                                      firstDifference(D, I, probe_.D, probe_.I, probe_.k));
        replaceGpu(std::move(g), cpu.get());
        restoreTwin();
        checkAfterLoad();
    }

protected:
    virtual faiss::Index* gpuIndex() = 0;
    virtual void replaceGpu(std::unique_ptr<faiss::Index> g, const faiss::Index* cpu) = 0;
    virtual void saveTwin() = 0;
    virtual void restoreTwin() = 0;
    virtual void checkAfterLoad() {}
    virtual int64_t probeK() { return 10; }
    virtual void runProbe(faiss::Index* idx, std::vector<float>* D, std::vector<idx_t>* I) {
        D->assign(size_t(64 * probe_.k), 0.f);
        I->assign(size_t(64 * probe_.k), 0);
        idx->search(64, probeQ_.data(), probe_.k, D->data(), I->data());
    }

    virtual int64_t pickAddCount() {
        const double u = c_.unit();
        if (u < 0.1) return c_.uniform(1, 40);
        if (u < 0.8) return c_.uniform(41, 3000);
        return c_.uniform(3001, 10000);
    }

    /// nq and k of a random search.
    int64_t pickNq() { return c_.unit() < 0.2 ? c_.uniform(1, 8) : c_.uniform(1, 500); }
    int64_t pickK(int64_t maxK) {
        const double u = c_.unit();
        int64_t k;
        if (u < 0.05)
            k = 1;
        else if (u < 0.55)
            k = c_.uniform(1, 100);
        else if (u < 0.8)
            k = c_.uniform(100, 1000);
        else if (u < 0.9)
            k = ntotal() + c_.uniform(0, 100);  // k around / past ntotal
        else
            k = c_.uniform(1000, maxK);
        return std::max<int64_t>(1, std::min(k, maxK));
    }

    Ctx& c_;
    std::string name_;
    int d_;
    int64_t cap_;
    DataGen gen_;
    std::string file_;
    bool saved_ = false;
    int64_t savedNtotal_ = 0;
    std::vector<float> probeQ_;
    Probe probe_;
};

// ---------------------------------------------------------------- flat

class FlatSide : public Side {
public:
    FlatSide(Ctx& c, uint64_t seed) : Side(c, "GpuIndexQuickSelectFlat", 64, 100000, seed),
                                      twin_(64) {
        gpu::GpuIndexQuickSelectFlatConfig cfg;
        cfg.device = c.opt.device;
        gpu_ = std::make_unique<gpu::GpuIndexQuickSelectFlat>(&c.res, d_, FlatMetric::L2, cfg);
    }
    idx_t ntotal() const override { return gpu_->ntotal; }

    void add(int64_t n) override {
        std::vector<float> x = gen_.vectors(n);
        // sometimes exact copies of stored rows: ties
        if (twin_.ntotal > 0 && c_.unit() < 0.2) {
            const float* xb = twin_.get_xb();
            for (int64_t i = 0; i < n; i += 3) {
                const int64_t r = c_.uniform(0, twin_.ntotal - 1);
                std::memcpy(x.data() + size_t(i) * d_, xb + size_t(r) * d_, sizeof(float) * d_);
            }
        }
        gpu_->add(n, x.data());
        twin_.add(n, x.data());
        if (gpu_->ntotal != twin_.ntotal)
            c_.diverge(name_, "ntotal " + std::to_string(gpu_->ntotal) + " vs twin " +
                                      std::to_string(twin_.ntotal));
    }

    void search() override {
        const int64_t nq = pickNq();
        const int64_t k = pickK(4096);
        compare(nq, gen_.vectors(nq), k);
    }

    void reset() override {
        gpu_->reset();
        twin_.reset();
    }

protected:
    void compare(int64_t nq, const std::vector<float>& q, int64_t k) {
        // FAISS 1.7.3's IndexFlat leaves the outputs untouched when empty:
        // start from the padding every index documents (+inf, -1)
        std::vector<float> D(size_t(nq * k)), Dt(size_t(nq * k), INFINITY);
        std::vector<idx_t> I(size_t(nq * k)), It(size_t(nq * k), -1);
        gpu_->search(nq, q.data(), k, D.data(), I.data());
        // FAISS's empty IndexFlat writes no padding of its own (k = 1 even
        // writes label 0): an empty index must give (+inf, -1) everywhere
        if (twin_.ntotal > 0) twin_.search(nq, q.data(), k, Dt.data(), It.data());
        const std::string err = test::compareKnn(nq, k, D.data(), I.data(), Dt.data(), It.data(),
                                                 false, 1e-4f, 1e-2f);
        if (!err.empty())
            c_.diverge(name_, "nq " + std::to_string(nq) + " k " + std::to_string(k) +
                                      " ntotal " + std::to_string(twin_.ntotal) + ": " + err);
    }
    faiss::Index* gpuIndex() override { return gpu_.get(); }
    void replaceGpu(std::unique_ptr<faiss::Index> g, const faiss::Index*) override {
        auto* f = dynamic_cast<gpu::GpuIndexQuickSelectFlat*>(g.get());
        if (!f) {
            c_.diverge(name_, "the loaded index is not a GpuIndexQuickSelectFlat");
            return;
        }
        g.release();
        gpu_.reset(f);
    }
    void saveTwin() override {
        savedTwin_ = twin_.codes;
        savedNtotal_ = twin_.ntotal;
    }
    void restoreTwin() override {
        twin_.reset();
        twin_.add(savedNtotal_, reinterpret_cast<const float*>(savedTwin_.data()));
    }
    void checkAfterLoad() override { compare(64, probeQ_, 10); }
    int64_t probeK() override { return std::max<int64_t>(1, std::min<int64_t>(100, ntotal() + 5)); }

private:
    std::unique_ptr<gpu::GpuIndexQuickSelectFlat> gpu_;
    faiss::IndexFlatL2 twin_;
    std::vector<uint8_t> savedTwin_;
};

// ---------------------------------------------------------------- LSH

class LshSide : public Side {
public:
    LshSide(Ctx& c, uint64_t seed) : Side(c, "GpuIndexBiLevelLSH", 32, 50000, seed) {
        cfg_.seed = seed;
        gpu::GpuIndexBiLevelLSHConfig gcfg;
        gcfg.device = c.opt.device;
        gpu_ = std::make_unique<gpu::GpuIndexBiLevelLSH>(&c.res, d_, cfg_, gcfg);
        twin_ = std::make_unique<IndexBiLevelLSH>(d_, cfg_);
        train();
    }
    idx_t ntotal() const override { return gpu_->ntotal; }

    void add(int64_t n) override {
        std::vector<float> x = gen_.vectors(n);
        gpu_->add(n, x.data());
        twin_->add(n, x.data());
        if (gpu_->ntotal != twin_->ntotal)
            c_.diverge(name_, "ntotal " + std::to_string(gpu_->ntotal) + " vs twin " +
                                      std::to_string(twin_->ntotal));
        if (gpu_->groupSizes() != twin_->groupSizes()) c_.diverge(name_, "group sizes differ");
    }

    void search() override {
        const int64_t nq = pickNq();
        SearchParametersBiLevelLSH sp;
        const int M = cfg_.nProjections;
        sp.nprobe = int(c_.uniform(1, std::min<int64_t>(16, 1 + lsh::maxPerturbations(M))));
        sp.tables = c_.unit() < 0.5 ? 0 : int(c_.uniform(1, cfg_.nTables));
        sp.groupProbes = int(c_.uniform(1, std::min(4, 1 << cfg_.treeDepth)));
        const double u = c_.unit();
        sp.minCandidates = u < 0.4 ? 0 : u < 0.7 ? c_.uniform(1, 200) : c_.uniform(200, 3000);
        int64_t k = pickK(3000);
        const double s = c_.unit();
        if (s < 0.2 && k <= 1024)
            sp.shortList = BiLevelShortList::Heap;
        else if (s < 0.4)
            sp.shortList = BiLevelShortList::WorkQueue;
        compare(nq, gen_.vectors(nq), k, &sp);
    }

    void reset() override {
        gpu_->reset();
        twin_->reset();
        if (c_.unit() < 0.5) train();  // both sides trained again on the same new data
    }

protected:
    void train() {
        const int64_t n = c_.uniform(int64_t(1) << cfg_.treeDepth, 5000);
        std::vector<float> x = gen_.vectors(n);
        gpu_->train(n, x.data());
        twin_->train(n, x.data());
    }

    void compare(int64_t nq, const std::vector<float>& q, int64_t k,
                 const SearchParametersBiLevelLSH* sp) {
        std::vector<idx_t> limsG, idsG, limsC, idsC;
        gpu_->getCandidates(nq, q.data(), k, &limsG, &idsG, sp);
        twin_->getCandidates(nq, q.data(), k, &limsC, &idsC, sp);
        std::string where = "nq " + std::to_string(nq) + " k " + std::to_string(k) + " ntotal " +
                            std::to_string(twin_->ntotal) + " nprobe " +
                            std::to_string(sp ? sp->nprobe : 1) + " tables " +
                            std::to_string(sp ? sp->tables : 0) + " groupProbes " +
                            std::to_string(sp ? sp->groupProbes : 1) + " minCandidates " +
                            std::to_string(sp ? sp->minCandidates : 0) + " shortList " +
                            std::to_string(sp ? int(sp->shortList) : 0);
        if (limsG != limsC || idsG != idsC) {
            size_t qd = 0;
            while (qd + 1 < limsG.size() && qd + 1 < limsC.size() && limsG[qd + 1] == limsC[qd + 1])
                ++qd;
            c_.diverge(name_, where + ": candidate sets differ (first at query " +
                                      std::to_string(qd) + ")");
        }
        std::vector<float> D(size_t(nq * k)), Dt(size_t(nq * k));
        std::vector<idx_t> I(size_t(nq * k)), It(size_t(nq * k));
        gpu_->search(nq, q.data(), k, D.data(), I.data(), sp);
        twin_->search(nq, q.data(), k, Dt.data(), It.data(), sp);
        Probe p;
        p.D = Dt;
        p.I = It;
        if (sameBits(p, D, I)) {
            ++c_.lshBitwiseSearches;
            return;
        }
        ++c_.lshToleranceSearches;
        if (c_.opt.lshBitwise) {
            c_.diverge(name_, where + ": not bit for bit: " + firstDifference(D, I, Dt, It, k));
            return;
        }
        const std::string err = test::compareKnn(nq, k, D.data(), I.data(), Dt.data(), It.data(),
                                                 false, 1e-5f, 1e-4f);
        if (!err.empty()) c_.diverge(name_, where + ": " + err);
    }
    faiss::Index* gpuIndex() override { return gpu_.get(); }
    void replaceGpu(std::unique_ptr<faiss::Index> g, const faiss::Index* cpu) override {
        auto* l = dynamic_cast<gpu::GpuIndexBiLevelLSH*>(g.get());
        if (!l) {
            c_.diverge(name_, "the loaded index is not a GpuIndexBiLevelLSH");
            return;
        }
        g.release();
        gpu_.reset(l);
        // the file read back on the CPU is the twin bit for bit
        if (faiss_ext::serialize_index(cpu) != savedTwin_)
            c_.diverge(name_, "the CPU index read back differs from the twin that was saved");
    }
    void saveTwin() override {
        savedTwin_ = faiss_ext::serialize_index(twin_.get());
        savedNtotal_ = twin_->ntotal;
    }
    void restoreTwin() override {
        std::unique_ptr<faiss::Index> t(faiss_ext::deserialize_index(savedTwin_));
        auto* l = dynamic_cast<IndexBiLevelLSH*>(t.get());
        if (!l) c_.diverge(name_, "the saved twin does not read back as an IndexBiLevelLSH");
        t.release();
        twin_.reset(l);
    }
    void checkAfterLoad() override {
        SearchParametersBiLevelLSH sp;
        compare(64, probeQ_, 10, &sp);
    }
    void runProbe(faiss::Index* idx, std::vector<float>* D, std::vector<idx_t>* I) override {
        if (!idx->is_trained) {
            D->clear();
            I->clear();
            return;
        }
        Side::runProbe(idx, D, I);
    }

private:
    BiLevelLSHConfig cfg_;
    std::unique_ptr<gpu::GpuIndexBiLevelLSH> gpu_;
    std::unique_ptr<IndexBiLevelLSH> twin_;
    std::vector<uint8_t> savedTwin_;
};

// ---------------------------------------------------------------- GNND

class GnndSide : public Side {
public:
    static constexpr int kDegree = 32;

    // Overlapping clusters: a k-NN graph of well separated clusters falls
    // apart into one component per cluster, which greedy search from random
    // seeds cannot cross (FAISS's twin neither).
    GnndSide(Ctx& c, uint64_t seed)
            : Side(c, "GpuKnnGraphGNND", 32, 20000, seed, 16, 1.5f), exact_(32) {
        gpu::GpuKnnGraphGNNDConfig cfg;
        cfg.device = c.opt.device;
        gpu_ = std::make_unique<gpu::GpuKnnGraphGNND>(&c.res, d_, kDegree, FlatMetric::L2, cfg);
    }
    idx_t ntotal() const override { return gpu_->ntotal; }

    void add(int64_t n) override {
        if (gpu_->ntotal + n <= kDegree) n = kDegree + 1 - gpu_->ntotal + c_.uniform(0, 200);
        std::vector<float> x = gen_.vectors(n);
        gpu_->add(n, x.data());
        exact_.add(n, x.data());
        checkGraph();
    }

    void search() override {
        const int64_t nq = pickNq();
        const int64_t k = pickK(4096);
        check(nq, gen_.vectors(nq), k);
    }

    void reset() override {
        gpu_->reset();
        exact_.reset();
        twin_.reset();
    }

protected:
    /// getGraph() against a copyTo() twin (identical), row validity and
    /// recall@10 of sampled rows against brute force.
    void checkGraph() {
        const idx_t n = gpu_->ntotal;
        if (n != exact_.ntotal)
            c_.diverge(name_, "ntotal " + std::to_string(n) + " vs " + std::to_string(exact_.ntotal));
        std::vector<idx_t> I(size_t(n) * kDegree);
        std::vector<float> D(size_t(n) * kDegree);
        gpu_->getGraph(I.data(), D.data());
        twin_ = std::make_unique<faiss::IndexNNDescentFlat>(d_, kDegree);
        gpu_->copyTo(twin_.get());
        auto* twinFlat = dynamic_cast<const faiss::IndexFlat*>(twin_->storage);
        if (!twinFlat || twinFlat->codes != exact_.codes)
            c_.diverge(name_, "the copyTo twin's vectors are not the vectors added");
        const std::vector<int>& tg = twin_->nndescent.final_graph;
        if (twin_->ntotal != n || tg.size() != I.size())
            c_.diverge(name_, "copyTo twin holds " + std::to_string(twin_->ntotal) +
                                      " vectors / " + std::to_string(tg.size()) + " graph entries");
        for (size_t i = 0; i < I.size(); ++i) {
            if (idx_t(tg[i]) != I[i]) {
                c_.diverge(name_, "getGraph and the copyTo twin differ at row " +
                                          std::to_string(i / kDegree) + " column " +
                                          std::to_string(i % kDegree));
                break;
            }
        }
        // ~200 sampled rows: valid, and recall@10 against brute force
        const int64_t rows = std::min<int64_t>(200, n);
        std::vector<idx_t> sample(rows);
        for (auto& r : sample) r = c_.uniform(0, n - 1);
        const float* xb = exact_.get_xb();
        std::vector<float> q(size_t(rows) * d_);
        for (int64_t r = 0; r < rows; ++r)
            std::memcpy(q.data() + size_t(r) * d_, xb + size_t(sample[r]) * d_, sizeof(float) * d_);
        const int kk = int(std::min<int64_t>(10, n - 1));
        std::vector<float> ed(size_t(rows) * (kk + 1));
        std::vector<idx_t> ei(size_t(rows) * (kk + 1));
        exact_.search(rows, q.data(), kk + 1, ed.data(), ei.data());
        std::vector<idx_t> refI(size_t(rows) * kk), gotI(size_t(rows) * kk);
        for (int64_t r = 0; r < rows; ++r) {
            const idx_t row = sample[r];
            const idx_t* g = I.data() + size_t(row) * kDegree;
            const float* gd = D.data() + size_t(row) * kDegree;
            std::set<idx_t> seen;
            for (int j = 0; j < kDegree; ++j) {
                const idx_t id = g[j];
                std::string bad;
                if (id < 0 || id >= n)
                    bad = "id " + std::to_string(id) + " out of range";
                else if (id == row)
                    bad = "the row itself";
                else if (!seen.insert(id).second)
                    bad = "duplicate id " + std::to_string(id);
                else if (j > 0 && gd[j] < gd[j - 1])
                    bad = "not sorted";
                else if (!closeTo(gd[j], l2sq(xb + size_t(row) * d_, xb + size_t(id) * d_, d_),
                                  1e-4, 1e-3))
                    bad = "distance " + std::to_string(gd[j]) + " is not the true distance";
                if (!bad.empty()) {
                    c_.diverge(name_, "graph row " + std::to_string(row) + " column " +
                                              std::to_string(j) + ": " + bad);
                    break;
                }
            }
            // exact neighbours without the row itself
            int w = 0;
            for (int j = 0; j < kk + 1 && w < kk; ++j)
                if (ei[size_t(r) * (kk + 1) + j] != row) refI[size_t(r) * kk + w++] = ei[size_t(r) * (kk + 1) + j];
            for (int j = 0; j < kk; ++j) gotI[size_t(r) * kk + j] = g[j];
        }
        if (kk < 1) return;
        auto dist = [&](int64_t r, int64_t id) {
            return l2sq(xb + size_t(sample[r]) * d_, xb + size_t(id) * d_, d_);
        };
        const double recall = recallAtK(rows, kk, gotI.data(), kk, refI.data(), kk, dist, false);
        c_.graphRecallMin = std::min(c_.graphRecallMin, recall);
        if (recall < c_.opt.graphFloor)
            c_.diverge(name_, "graph recall@" + std::to_string(kk) + " " + std::to_string(recall) +
                                      " < floor " + std::to_string(c_.opt.graphFloor) +
                                      " (ntotal " + std::to_string(n) + ")");
    }

    /// A GPU search: valid rows against the twin's vectors, recall@10
    /// against brute force; the FAISS twin's recall is logged beside it.
    void check(int64_t nq, const std::vector<float>& q, int64_t k) {
        std::vector<float> D(size_t(nq * k));
        std::vector<idx_t> I(size_t(nq * k));
        gpu_->search(nq, q.data(), k, D.data(), I.data());
        const idx_t n = gpu_->ntotal;
        const float* xb = exact_.get_xb();
        for (int64_t i = 0; i < nq; ++i) {
            std::set<idx_t> seen;
            bool padding = false;
            for (int64_t j = 0; j < k; ++j) {
                const idx_t id = I[i * k + j];
                const float dist = D[i * k + j];
                std::string bad;
                if (id < 0) {
                    if (id != -1) bad = "label " + std::to_string(id);
                    else if (!(std::isinf(dist) && dist > 0)) bad = "padding distance not +inf";
                    padding = true;
                } else if (padding) {
                    bad = "an id after padding";
                } else if (id >= n) {
                    bad = "id " + std::to_string(id) + " >= ntotal " + std::to_string(n);
                } else if (!seen.insert(id).second) {
                    bad = "duplicate id " + std::to_string(id);
                } else if (j > 0 && dist < D[i * k + j - 1]) {
                    bad = "not sorted";
                } else if (!closeTo(dist, l2sq(q.data() + size_t(i) * d_, xb + size_t(id) * d_, d_),
                                    1e-4, 1e-3)) {
                    bad = "distance " + std::to_string(dist) + " is not the true distance to " +
                          std::to_string(id);
                }
                if (!bad.empty()) {
                    c_.diverge(name_, "search nq " + std::to_string(nq) + " k " +
                                              std::to_string(k) + " ntotal " + std::to_string(n) +
                                              ": query " + std::to_string(i) + " rank " +
                                              std::to_string(j) + ": " + bad);
                    return;
                }
            }
        }
        const int kr = int(std::min<int64_t>({10, k, n}));
        if (kr < 1) return;
        std::vector<float> ed(size_t(nq) * kr);
        std::vector<idx_t> ei(size_t(nq) * kr);
        exact_.search(nq, q.data(), kr, ed.data(), ei.data());
        auto dist = [&](int64_t i, int64_t id) {
            return l2sq(q.data() + size_t(i) * d_, xb + size_t(id) * d_, d_);
        };
        const double recall = recallAtK(nq, kr, I.data(), k, ei.data(), kr, dist, false);
        c_.searchRecallSum += recall * double(nq);
        c_.searchRecallQueries += nq;
        // the floor per search from 50 queries on (a few queries are all or
        // nothing); the mean over all searches is checked at the end
        if (nq < 50) return;
        c_.searchRecallMin = std::min(c_.searchRecallMin, recall);
        if (recall < c_.opt.searchFloor)
            c_.diverge(name_, "search recall@" + std::to_string(kr) + " " + std::to_string(recall) +
                                      " < floor " + std::to_string(c_.opt.searchFloor) + " (nq " +
                                      std::to_string(nq) + ", k " + std::to_string(k) +
                                      ", ntotal " + std::to_string(n) + ")");
        // the FAISS twin (CPU greedy search on our graph), for the log
        // FAISS 1.7.3's NNDescent::search draws max(search_L, k) random
        // seeds with rng() % (ntotal - L): it divides by zero when ntotal ==
        // L and reads out of bounds when ntotal < L or when a graph row holds
        // a -1. Those graphs are not given to it (its bug, not ours).
        if (twin_ && twin_->ntotal == n && n > kDegree && n > std::max<idx_t>(twin_->nndescent.search_L, kr) &&
            std::find(twin_->nndescent.final_graph.begin(), twin_->nndescent.final_graph.end(), -1) ==
                    twin_->nndescent.final_graph.end() &&
            c_.unit() < 0.25) {
            std::vector<float> td(size_t(nq) * kr);
            std::vector<idx_t> ti(size_t(nq) * kr);
            twin_->search(nq, q.data(), kr, td.data(), ti.data());
            const double tr = recallAtK(nq, kr, ti.data(), kr, ei.data(), kr, dist, false);
            JsonLine j;
            j.str("event", "gnnd-recall").integer("step", c_.step).integer("nq", nq);
            j.integer("k", k).integer("ntotal", n).num("gpu", recall).num("faiss-twin", tr);
            logJson(j);
        }
    }

    faiss::Index* gpuIndex() override { return gpu_.get(); }
    void replaceGpu(std::unique_ptr<faiss::Index> g, const faiss::Index*) override {
        auto* l = dynamic_cast<gpu::GpuKnnGraphGNND*>(g.get());
        if (!l) {
            c_.diverge(name_, "the loaded index is not a GpuKnnGraphGNND");
            return;
        }
        g.release();
        gpu_.reset(l);
        std::vector<idx_t> I(size_t(gpu_->ntotal) * kDegree);
        if (gpu_->ntotal) gpu_->getGraph(I.data());
        if (I != savedGraph_) c_.diverge(name_, "save / load changed the graph");
    }
    void saveTwin() override {
        savedExact_ = exact_.codes;
        savedNtotal_ = exact_.ntotal;
        savedGraph_.assign(size_t(gpu_->ntotal) * kDegree, 0);
        if (gpu_->ntotal) gpu_->getGraph(savedGraph_.data());
    }
    void restoreTwin() override {
        exact_.reset();
        exact_.add(savedNtotal_, reinterpret_cast<const float*>(savedExact_.data()));
        twin_.reset();
        if (gpu_->ntotal > 0) {
            twin_ = std::make_unique<faiss::IndexNNDescentFlat>(d_, kDegree);
            gpu_->copyTo(twin_.get());
        }
    }
    void checkAfterLoad() override {
        if (gpu_->ntotal > kDegree) check(64, probeQ_, 10);
    }
    int64_t pickAddCount() override {
        const double u = c_.unit();
        if (u < 0.1) return c_.uniform(1, 40);
        return c_.uniform(41, 4000);
    }

private:
    std::unique_ptr<gpu::GpuKnnGraphGNND> gpu_;
    faiss::IndexFlatL2 exact_;
    std::unique_ptr<faiss::IndexNNDescentFlat> twin_;
    std::vector<uint8_t> savedExact_;
    std::vector<idx_t> savedGraph_;
};

// ---------------------------------------------------------------- the run

/// A small add to every index, then a reset of all (the state a checkpoint
/// measures).
void fillAndResetAll(Ctx& c, std::vector<std::unique_ptr<Side>>& sides) {
    for (auto& s : sides) {
        c.currentOp = "checkpoint add";
        s->add(200);
        c.currentOp = "checkpoint reset";
        s->reset();
    }
}

std::string opCountsText(const Ctx& c) {
    std::ostringstream s;
    bool first = true;
    for (const auto& kv : c.opCounts) {
        s << (first ? "" : " ") << kv.first << "=" << kv.second;
        first = false;
    }
    return s.str();
}

std::string memText(const MemSample& m) {
    std::ostringstream s;
    s << "rss " << mib(m.rss) << ", allocated " << mib(m.dev.allocatedBytes) << " in "
      << m.dev.allocations << ", pool reserved " << mib(m.dev.poolReservedBytes) << ", device used "
      << mib(m.cudaTotal - m.cudaFree);
    return s.str();
}

/// The memory verdict from the checkpoints: "" when nothing grew.
std::string memoryVerdict(const Options& opt, const std::vector<MemSample>& cps) {
    std::ostringstream out;
    if (cps.size() < 2) return "";
    const MemSample& a = cps.front();
    const MemSample& b = cps.back();
    if (a.dev.allocatedBytes != b.dev.allocatedBytes || a.dev.allocations != b.dev.allocations)
        out << "leak: after a reset of all indexes allocatedBytes " << a.dev.allocatedBytes
            << " -> " << b.dev.allocatedBytes << ", allocations " << a.dev.allocations << " -> "
            << b.dev.allocations << "; ";
    // first vs last quarter of the checkpoints (at least one each)
    const size_t q = std::max<size_t>(1, cps.size() / 4);
    size_t rssFirst = 0, rssLast = 0, poolFirst = 0, poolLast = 0;
    for (size_t i = 0; i < q; ++i) {
        rssFirst = std::max(rssFirst, cps[i].rss);
        poolFirst = std::max(poolFirst, cps[i].dev.poolReservedBytes);
        rssLast = std::max(rssLast, cps[cps.size() - 1 - i].rss);
        poolLast = std::max(poolLast, cps[cps.size() - 1 - i].dev.poolReservedBytes);
    }
    const double slack = opt.growthSlackMiB * (1 << 20);
    auto grew = [&](size_t first, size_t last) {
        return double(last) > double(first) * (1 + opt.growthTol) + slack;
    };
    if (grew(rssFirst, rssLast))
        out << "RSS " << mib(rssFirst) << " -> " << mib(rssLast) << "; ";
    if (grew(poolFirst, poolLast))
        out << "pool reserved " << mib(poolFirst) << " -> " << mib(poolLast) << "; ";
    return out.str();
}

int run(const Options& opt) {
    Ctx c;
    c.opt = opt;
    c.rng.seed(opt.seed);
    const double t0 = nowSeconds();
    std::vector<std::unique_ptr<Side>> sides;
    sides.push_back(std::make_unique<FlatSide>(c, opt.seed * 3 + 1));
    sides.push_back(std::make_unique<LshSide>(c, opt.seed * 3 + 2));
    sides.push_back(std::make_unique<GnndSide>(c, opt.seed * 3 + 3));
    std::cout << "soak: seed " << opt.seed << ", " << opt.seconds << " s on GPU " << opt.device
              << " (git " << gitCommit() << "): QuickSelectFlat d 64 cap 100k, BiLevelLSH d 32 "
              << "cap 50k, KnnGraphGNND d 32 degree 32 cap 20k" << std::endl;

    std::vector<MemSample> samples, checkpoints;
    const double checkpointEvery = opt.seconds / 8;
    const int warmupSteps = opt.quick ? 6 : 30;
    double lastSample = 0, lastProgress = 0, lastCheckpoint = 0;
    bool warm = false;
    bool stopped = false;
    std::string stopReason;
    const double weights[kNumOps] = {0.32, 0.45, 0.05, 0.09, 0.09};

    try {
        for (;;) {
            const double t = nowSeconds() - t0;
            if (t >= opt.seconds) break;
            if (!warm && c.step >= warmupSteps) {
                fillAndResetAll(c, sides);
                checkpoints.push_back(sampleMemory(opt.device, c.step, t, true));
                std::cout << "[" << int(t) << " s] checkpoint (after warm-up): "
                          << memText(checkpoints.back()) << std::endl;
                warm = true;
                lastCheckpoint = t;
            } else if (warm && t - lastCheckpoint >= checkpointEvery &&
                       opt.seconds - t > checkpointEvery / 2) {
                fillAndResetAll(c, sides);
                checkpoints.push_back(sampleMemory(opt.device, c.step, t, true));
                lastCheckpoint = t;
            }
            ++c.step;
            Side& s = *sides[size_t(c.uniform(0, 2))];
            double u = c.unit();
            int op = 0;
            while (op + 1 < kNumOps && u >= weights[op]) u -= weights[op++];
            c.currentOp = kOpNames[op];
            try {
                switch (op) {
                    case kAdd: s.add(); break;
                    case kSearch: s.search(); break;
                    case kReset: s.reset(); break;
                    case kSave: s.save(); break;
                    case kLoad: s.load(); break;
                }
            } catch (const Divergence&) {
                throw;
            } catch (const std::exception& e) {
                c.diverge(s.name(), std::string("exception: ") + e.what());
                // --keep-going: both sides start again from empty
                c.currentOp = "reset (after an exception)";
                s.reset();
            }
            ++c.opCounts[s.shortName() + ":" + kOpNames[op]];
            ++c.opCounts[kOpNames[op]];
            if (c.step % opt.memEvery == 0 || t - lastSample >= 2) {
                samples.push_back(sampleMemory(opt.device, c.step, t, false));
                lastSample = t;
            }
            if (t - lastProgress >= opt.progressSeconds) {
                lastProgress = t;
                MemSample m = sampleMemory(opt.device, c.step, t, false);
                std::cout << "[" << int(t) << " s] step " << c.step << ": add " << c.opCounts["add"]
                          << ", search " << c.opCounts["search"] << ", reset "
                          << c.opCounts["reset"] << ", save " << c.opCounts["save"] << ", load "
                          << c.opCounts["load"] << "; divergences " << c.divergences << "; "
                          << memText(m) << std::endl;
                JsonLine j;
                j.str("event", "progress").integer("step", c.step).num("t", t);
                j.integer("divergences", c.divergences);
                logJson(j);
            }
        }
        // the end: the same checkpoint as after warm-up
        c.currentOp = "final checkpoint";
        if (!warm) {
            fillAndResetAll(c, sides);
            checkpoints.push_back(sampleMemory(opt.device, c.step, nowSeconds() - t0, true));
        }
        fillAndResetAll(c, sides);
        checkpoints.push_back(sampleMemory(opt.device, c.step, nowSeconds() - t0, true));
    } catch (const Divergence& d) {
        stopped = true;
        stopReason = d.what();
    }
    const double meanSearchRecall =
            c.searchRecallQueries ? c.searchRecallSum / double(c.searchRecallQueries) : 1.0;
    if (!stopped && meanSearchRecall < opt.searchFloor) {
        c.currentOp = "end";
        try {
            c.diverge("GpuKnnGraphGNND", "mean search recall " + std::to_string(meanSearchRecall) +
                                                 " over " + std::to_string(c.searchRecallQueries) +
                                                 " queries < floor " +
                                                 std::to_string(opt.searchFloor));
        } catch (const Divergence&) {
        }
    }
    const double elapsed = nowSeconds() - t0;

    std::string memory = "not checked (stopped early)";
    bool memoryOk = true;
    if (!stopped) {
        std::cout << "checkpoints (after a reset of all three indexes):" << std::endl;
        for (const auto& m : checkpoints)
            std::cout << "  step " << m.step << ": " << memText(m) << std::endl;
        const std::string v = memoryVerdict(opt, checkpoints);
        memoryOk = v.empty();
        memory = memoryOk ? "memory: no growth" : "memory: GROWTH " + v;
        std::cout << memory << std::endl;
    }
    if (stopped) std::cout << "stopped at the first divergence: " << stopReason << std::endl;

    std::ostringstream summary;
    summary.precision(4);
    summary << "soak " << (c.divergences == 0 && memoryOk ? "PASSED" : "FAILED") << ": "
            << c.step << " steps (" << opCountsText(c) << "), divergences " << c.divergences
            << ", " << memory << ", LSH searches bit for bit " << c.lshBitwiseSearches
            << " / within tolerance " << c.lshToleranceSearches << ", min GNND recall graph "
            << c.graphRecallMin << " search " << c.searchRecallMin << " (mean " << meanSearchRecall
            << ")" << ", elapsed " << elapsed
            << " s, seed " << opt.seed;
    std::cout << summary.str() << std::endl;
    JsonLine j;
    j.str("event", "summary").integer("steps", c.step).integer("divergences", c.divergences);
    j.str("memory", memory).num("elapsed", elapsed).integer("seed", int64_t(opt.seed));
    j.integer("lshBitwise", c.lshBitwiseSearches).integer("lshTolerance", c.lshToleranceSearches);
    j.num("gnndGraphRecallMin", c.graphRecallMin).num("gnndSearchRecallMin", c.searchRecallMin);
    j.num("gnndSearchRecallMean", meanSearchRecall);
    JsonLine ops;
    for (const auto& kv : c.opCounts) ops.integer(kv.first, kv.second);
    j.raw("ops", ops.text()).str("git", gitCommit());
    logJson(j);
    return c.divergences == 0 && memoryOk ? 0 : 1;
}

}  // namespace

namespace {
/// A crash prints its stack (addresses resolve with addr2line on the binary).
void onFatalSignal(int sig) {
    void* frames[64];
    const int n = backtrace(frames, 64);
    const char msg[] = "soak: fatal signal, stack:\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}
}  // namespace

int main(int argc, char** argv) {
    signal(SIGSEGV, onFatalSignal);
    signal(SIGABRT, onFatalSignal);
    signal(SIGBUS, onFatalSignal);
    Options opt;
    try {
        Args args(argc, argv, {"quick", "keep-going", "lsh-bitwise", "help"});
        args.checkKnown({"seconds", "seed", "out", "device", "quick", "keep-going", "lsh-bitwise",
                         "mem-every", "graph-floor", "search-floor", "growth-tol",
                         "growth-slack-mib", "help"});
        if (args.has("help")) {
            std::cout << kUsage;
            return 0;
        }
        opt.quick = args.has("quick");
        if (opt.quick) {
            opt.seconds = 20;
            opt.progressSeconds = 5;
        }
        opt.seconds = args.getDouble("seconds", opt.seconds);
        opt.seed = uint64_t(args.getInt("seed", 1));
        opt.out = args.get("out");
        opt.device = int(args.getInt("device", 0));
        opt.keepGoing = args.has("keep-going");
        opt.lshBitwise = args.has("lsh-bitwise");
        opt.memEvery = std::max<int64_t>(1, args.getInt("mem-every", opt.memEvery));
        opt.graphFloor = args.getDouble("graph-floor", opt.graphFloor);
        opt.searchFloor = args.getDouble("search-floor", opt.searchFloor);
        opt.growthTol = args.getDouble("growth-tol", opt.growthTol);
        opt.growthSlackMiB = args.getDouble("growth-slack-mib", opt.growthSlackMiB);
        if (!(opt.seconds > 0)) throw std::invalid_argument("--seconds must be > 0");
    } catch (const std::exception& e) {
        std::cerr << "soak: " << e.what() << "\n" << kUsage;
        return 2;
    }
    const int devices = gpu::getNumDevices();
    if (devices == 0) {
        std::cout << "soak: skipped: no GPU" << std::endl;
        return 0;
    }
    if (opt.device < 0 || opt.device >= devices) {
        std::cerr << "soak: --device " << opt.device << " does not exist (" << devices
                  << " GPU(s))" << std::endl;
        return 2;
    }
    if (!opt.out.empty()) {
        gLog.open(opt.out);
        if (!gLog) {
            std::cerr << "soak: cannot write " << opt.out << std::endl;
            return 2;
        }
    }
    try {
        return run(opt);
    } catch (const std::exception& e) {
        std::cout << "soak FAILED: " << e.what() << std::endl;
        return 1;
    }
}
