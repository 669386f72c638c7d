// trace_search: the timeline of a few searches of GpuIndexQuickSelectFlat
// (or GpuIndexSearchGraph, --index graph), as nsys would show it, for
// machines without nsys. CUPTI's activity API
// records every kernel, copy and CUDA API call with its start and end; the
// program prints, for each traced search, the host's calls and the GPU's
// kernels on one clock, relative to the moment search() was called, and the
// time the GPU sat idle inside the search. Evidence for profiling, not a
// benchmark: CUPTI's own overhead lengthens API calls by a microsecond or so.
//
//   trace_search --base B.fbin --query Q.fbin --nq 200 --k 3000 [--reps 3]
//                [--min-us 2] [--index flat|graph] [--precision P] [--itopk N]
//                [--host] [--no-pinned]
// API calls shorter than --min-us microseconds are left out of the listing
// (their total is still printed). --host passes queries and results in host
// memory (a numpy caller's path); --no-pinned leaves the resources without a
// pinned staging buffer (host queries then go by pageable copies); GPU work
// is listed with its stream.
#include "bench/BenchData.h"
#include "bench/BenchDevice.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage =
        "trace_search --base B.fbin --query Q.fbin [--nq N] [--k K] [--reps R] [--min-us U]\n"
        "             [--index flat|graph] [--precision P] [--itopk N] [--host] [--no-pinned]\n"
        "  Prints the CUPTI timeline of R searches (after two warm-ups) of a\n"
        "  GpuIndexQuickSelectFlat (precision P, default auto) or a\n"
        "  GpuIndexSearchGraph (default build, itopk N), L2, with device queries\n"
        "  and results (--host: host ones).\n";

#define CUPTI_CHECK(call)                                                             \
    do {                                                                              \
        CUptiResult r_ = (call);                                                      \
        if (r_ != CUPTI_SUCCESS) {                                                    \
            const char* s_ = nullptr;                                                 \
            cuptiGetResultString(r_, &s_);                                            \
            throw std::runtime_error(std::string(#call " failed: ") + (s_ ? s_ : "?")); \
        }                                                                             \
    } while (0)

/// One interval of the timeline (CUPTI's nanosecond clock).
struct Event {
    bool gpu;  ///< a kernel, copy or set; else a host API call
    std::string name;
    uint64_t start, end;
};

std::mutex gMutex;
std::vector<Event> gEvents;

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
    *size = size_t(8) << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
    *maxRecords = 0;
}

std::string apiName(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    const char* name = nullptr;
    cuptiGetCallbackName(domain, cbid, &name);
    return name ? name : "?";
}

void record(CUpti_Activity* a) {
    std::lock_guard<std::mutex> lock(gMutex);
    switch (a->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(a);
            gEvents.push_back({true, "[s" + std::to_string(k->streamId) + "] " + (k->name ? k->name : "?"),
                               k->start, k->end});
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(a);
            gEvents.push_back({true, "[s" + std::to_string(m->streamId) + "] [memcpy " +
                                             std::to_string(m->bytes) + " B]",
                               m->start, m->end});
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(a);
            gEvents.push_back({true, "[memset " + std::to_string(m->bytes) + " B]", m->start, m->end});
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME: {
            auto* r = reinterpret_cast<CUpti_ActivityAPI*>(a);
            gEvents.push_back({false, apiName(CUPTI_CB_DOMAIN_RUNTIME_API, r->cbid), r->start, r->end});
            break;
        }
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            auto* r = reinterpret_cast<CUpti_ActivityAPI*>(a);
            gEvents.push_back({false, "cu:" + apiName(CUPTI_CB_DOMAIN_DRIVER_API, r->cbid), r->start, r->end});
            break;
        }
        default:
            break;
    }
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize) {
    CUpti_Activity* a = nullptr;
    while (cuptiActivityGetNextRecord(buffer, validSize, &a) == CUPTI_SUCCESS) record(a);
    std::free(buffer);
}

void enableTracing() {
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted));
    for (CUpti_ActivityKind kind :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
          CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
        CUPTI_CHECK(cuptiActivityEnable(kind));
    }
}

/// Prints the events inside [t0, t1] relative to t0, and the GPU's idle time.
void printWindow(int rep, uint64_t t0, uint64_t t1, double minUs) {
    std::vector<Event> in;
    for (const Event& e : gEvents)
        if (e.end >= t0 && e.start <= t1) in.push_back(e);
    std::sort(in.begin(), in.end(), [](const Event& a, const Event& b) { return a.start < b.start; });
    std::printf("== search %d: %.1f us on the host\n", rep, (t1 - t0) / 1e3);
    double shortApi = 0, kernels = 0, idle = 0;
    uint64_t gpuEnd = t0;
    for (const Event& e : in) {
        const double us = (e.end - e.start) / 1e3;
        if (e.gpu) {
            const uint64_t from = std::max(gpuEnd, t0);
            if (e.start > from) idle += (e.start - from) / 1e3;
            gpuEnd = std::max(gpuEnd, e.end);
            kernels += us;
        } else if (us < minUs) {
            shortApi += us;
            continue;
        }
        std::printf("  %s %9.1f +%8.1f us  %.90s\n", e.gpu ? "GPU " : "host",
                    (double(e.start) - double(t0)) / 1e3, us, e.name.c_str());
    }
    if (t1 > gpuEnd) idle += (t1 - gpuEnd) / 1e3;
    std::printf("  GPU busy %.1f us, idle %.1f us of the search; API calls under %.0f us: %.1f us\n",
                kernels, idle, minUs, shortApi);
}

/// The index traced, built on base, and how one search of it runs.
struct TracedIndex {
    std::unique_ptr<gpu::GpuIndex> index;
    std::unique_ptr<faiss::SearchParameters> params;
};

TracedIndex buildIndex(const Args& args, gpu::StandardGpuResources* res, const Matrix& base) {
    TracedIndex t;
    const std::string kind = args.get("index", "flat");
    if (kind == "graph") {
        t.index.reset(new gpu::GpuIndexSearchGraph(res, base.d, FlatMetric::L2));
        auto* p = new gpu::SearchParametersSearchGraph();
        p->itopk = int(args.getInt("itopk", 0));
        t.params.reset(p);
    } else if (kind == "flat") {
        gpu::GpuIndexQuickSelectFlatConfig c;
        c.distancePrecision = gpu::distancePrecisionFromName(args.get("precision", "auto").c_str());
        t.index.reset(new gpu::GpuIndexQuickSelectFlat(res, base.d, FlatMetric::L2, c));
    } else {
        throw std::invalid_argument("--index must be flat or graph");
    }
    t.index->add(base.n, base.x.data());
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args args(argc, argv, {"help", "git", "host", "no-pinned"});
        if (args.printedHelpOrGit(kUsage)) return 0;
        args.checkKnown({"base", "query", "nq", "k", "reps", "min-us", "index", "precision",
                         "itopk", "host", "no-pinned", "help", "git"});
        if (!args.has("base") || !args.has("query"))
            throw std::invalid_argument("--base and --query are required (see --help)");
        const Matrix base = readVectors(args.get("base"));
        const Matrix query = readVectors(args.get("query"), args.getInt("nq", 0));
        if (base.d != query.d) throw std::invalid_argument("base and query dimensions differ");
        const int64_t k = args.getInt("k", 10);
        const int reps = int(std::max<int64_t>(1, args.getInt("reps", 3)));
        const double minUs = args.getDouble("min-us", 2.0);
        const bool host = args.has("host");
        gpu::StandardGpuResources res;
        if (args.has("no-pinned")) res.setPinnedMemory(0);
        TracedIndex t = buildIndex(args, &res, base);
        DeviceArray<float> dQ(query.x.size());
        DeviceArray<float> dD(size_t(query.n) * k);
        DeviceArray<int64_t> dI(size_t(query.n) * k);
        FAISS_EXT_CUDA_CHECK(
                cudaMemcpy(dQ.p, query.x.data(), query.x.size() * 4, cudaMemcpyHostToDevice));
        std::vector<float> hD(size_t(query.n) * k);
        std::vector<int64_t> hI(size_t(query.n) * k);
        auto search = [&] {
            if (host)
                t.index->search(query.n, query.x.data(), k, hD.data(), hI.data(), t.params.get());
            else
                t.index->search(query.n, dQ.p, k, dD.p, dI.p, t.params.get());
        };
        for (int w = 0; w < 2; ++w) search();
        FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
        enableTracing();
        std::vector<std::pair<uint64_t, uint64_t>> windows;
        for (int r = 0; r < reps; ++r) {
            uint64_t t0 = 0, t1 = 0;
            CUPTI_CHECK(cuptiGetTimestamp(&t0));
            search();
            FAISS_EXT_CUDA_CHECK(cudaDeviceSynchronize());
            CUPTI_CHECK(cuptiGetTimestamp(&t1));
            windows.emplace_back(t0, t1);
        }
        CUPTI_CHECK(cuptiActivityFlushAll(1));
        std::printf("trace_search: %s, nb %lld, nq %lld, d %d, k %lld, %s queries\n",
                    args.get("index", "flat").c_str(), (long long)base.n, (long long)query.n,
                    base.d, (long long)k, host ? "host" : "device");
        for (int r = 0; r < reps; ++r) printWindow(r, windows[r].first, windows[r].second, minUs);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "trace_search: %s\n", e.what());
        return 1;
    }
}
