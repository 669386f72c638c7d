// bench_host_staging: the host side of a numpy query's trip to the GPU, on
// its own: copyRowsCheckingFiniteInPieces (the staging of host queries into
// pinned memory, gpu/utils/HostStaging.h) timed to its first piece and to
// its end, against one thread's memcpy, with a pause between calls as a
// search would leave. Evidence for tuning the staging, not a test.
//
//   bench_host_staging [--rows 10000] [--d 128] [--reps 20] [--gap-us 2000]
//                      [--pinned-mb M] [--sources S] [--results-kb R]
//                      [--upload] [--pieces-kb LIST]
// --pinned-mb: the size of the pinned buffer written (the resources' default
// is 256); --sources: distinct source copies cycled through (cold sources
// when their total passes the CPU's caches); --results-kb: before each
// staging, copyBytesInParallel of R KB, as a search copies its results out
// (its OpenMP team is smaller than the staging's); --upload: each piece
// is also uploaded to the GPU as the search does (queued from the calling
// thread), timed to the end of the last upload; --pieces-kb: the piece sizes
// tried (default 1024,256; 0: the rows staged whole, then one upload).
#include "bench/BenchUtil.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/HostStaging.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

using namespace faiss_ext;
using Clock = std::chrono::steady_clock;

namespace {

double us(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    bench::Args a(argc, argv, {"help", "git", "upload"});
    if (a.printedHelpOrGit("bench_host_staging [--rows N] [--d D] [--reps R] [--gap-us U] "
                           "[--pinned-mb M] [--sources S] [--results-kb R] [--upload] "
                           "[--pieces-kb LIST]\n"))
        return 0;
    a.checkKnown({"rows", "d", "reps", "gap-us", "pinned-mb", "sources", "results-kb", "upload",
                  "pieces-kb", "help", "git"});
    const bool upload = a.has("upload");
    const size_t resultBytes = size_t(a.getInt("results-kb", 0)) << 10;
    std::vector<char> results(resultBytes), resultsOut(resultBytes);
    const int64_t rows = a.getInt("rows", 10000);
    const int d = int(a.getInt("d", 128));
    const int reps = int(a.getInt("reps", 20));
    const int gapUs = int(a.getInt("gap-us", 2000));
    const int sources = int(std::max<int64_t>(1, a.getInt("sources", 1)));
    const size_t count = size_t(rows) * d;
    std::vector<float> all(count * sources);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (float& v : all) v = u(rng);
    const size_t pinnedBytes =
            std::max(sizeof(float) * count, size_t(a.getInt("pinned-mb", 0)) << 20);
    float* pinned = nullptr;
    FAISS_EXT_CUDA_CHECK(
            cudaHostAlloc(reinterpret_cast<void**>(&pinned), pinnedBytes, cudaHostAllocDefault));
    std::printf("pinned buffer %zu MB, %d source(s) of %zu KB\n", pinnedBytes >> 20, sources,
                (sizeof(float) * count) >> 10);
    int next = 0;
    auto source = [&] { return all.data() + count * size_t(next++ % sources); };
    float* devRows = nullptr;
    cudaStream_t stream = nullptr;
    if (upload) {
        FAISS_EXT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&devRows), sizeof(float) * count));
        FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    }
    auto queueUpload = [&](int64_t r0, int64_t n) {
        if (upload)
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(devRows + size_t(r0) * d, pinned + size_t(r0) * d,
                                                 sizeof(float) * size_t(n) * d,
                                                 cudaMemcpyHostToDevice, stream));
    };
    std::vector<int64_t> piecesKb = {1024, 256};
    if (a.has("pieces-kb")) {
        piecesKb.clear();
        for (const std::string& t : bench::parseList(a.get("pieces-kb"))) piecesKb.push_back(std::stoll(t));
    }
    for (int64_t pieceKb : piecesKb) {
        const int64_t piece = pieceKb << 10;
        const int64_t pieceRows = piece ? std::max<int64_t>(1, piece / (4 * d)) : rows;
        std::vector<double> first, total;
        for (int r = 0; r < reps + 2; ++r) {
            std::this_thread::sleep_for(std::chrono::microseconds(gapUs));
            if (resultBytes) gpu::copyBytesInParallel(resultsOut.data(), results.data(), resultBytes);
            Clock::time_point t0 = Clock::now(), t1 = t0;
            bool seen = false;
            gpu::copyRowsCheckingFiniteInPieces(source(), pinned, rows, d, pieceRows,
                                                [&](int64_t r0, int64_t n) {
                                                    if (!seen) t1 = Clock::now();
                                                    seen = true;
                                                    if (piece) queueUpload(r0, n);
                                                });
            if (!piece) queueUpload(0, rows);
            if (upload) FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
            Clock::time_point t2 = Clock::now();
            if (r < 2) continue;
            first.push_back(us(t0, t1));
            total.push_back(us(t0, t2));
        }
        std::printf("staging %lld x %d%s, pieces of %lld KB: first piece %.1f us, all %.1f us "
                    "(medians of %d)\n",
                    (long long)rows, d, upload ? " with uploads" : "", (long long)pieceKb,
                    median(first), median(total), reps);
    }
    std::vector<double> one;
    for (int r = 0; r < reps; ++r) {
        std::this_thread::sleep_for(std::chrono::microseconds(gapUs));
        Clock::time_point t0 = Clock::now();
        std::memcpy(pinned, source(), sizeof(float) * count);
        one.push_back(us(t0, Clock::now()));
    }
    std::printf("one thread's memcpy: %.1f us\n", median(one));
    cudaFreeHost(pinned);
    if (upload) {
        cudaFree(devRows);
        cudaStreamDestroy(stream);
    }
    return 0;
}
