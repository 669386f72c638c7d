#include "bench/FewQuerySplit.h"

#include "bench/BenchDevice.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/FusedFewQuery.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"

#include <cuda_runtime_api.h>

#include <vector>

namespace faiss_ext {
namespace bench {

namespace {

/// Three timing events, destroyed with the object.
struct SplitEvents {
    gpu::FusedFewQueryEvents e;
    SplitEvents() {
        FAISS_EXT_CUDA_CHECK(cudaEventCreate(&e.kernelStart));
        FAISS_EXT_CUDA_CHECK(cudaEventCreate(&e.kernelEnd));
        FAISS_EXT_CUDA_CHECK(cudaEventCreate(&e.mergeEnd));
    }
    ~SplitEvents() {
        cudaEventDestroy(e.kernelStart);
        cudaEventDestroy(e.kernelEnd);
        cudaEventDestroy(e.mergeEnd);
    }
    SplitEvents(const SplitEvents&) = delete;
    SplitEvents& operator=(const SplitEvents&) = delete;
};

double elapsedMs(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.f;
    FAISS_EXT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

}  // namespace

FewQuerySplit timeFewQuerySplit(const float* base, int64_t nb, int d, const float* dQ, int64_t nq,
                                int64_t k, int calls) {
    gpu::StandardGpuResources res;
    const int device = gpu::getCurrentDevice();
    gpu::GpuResources* r = res.getResources().get();
    cudaStream_t stream = r->getDefaultStream(device);
    DeviceArray<float> x{size_t(nb) * d}, norms{size_t(nb)};
    DeviceArray<uint64_t> out{size_t(k)};
    FAISS_EXT_CUDA_CHECK(cudaMemcpy(x.p, base, sizeof(float) * size_t(nb) * d,
                                    cudaMemcpyHostToDevice));
    gpu::rowSquaredNorms(x.p, nb, d, norms.p, stream);
    gpu::DeviceCorpus corpus;
    corpus.vectors = x.p;
    corpus.sqNorms = norms.p;
    corpus.nb = nb;
    corpus.d = d;
    SplitEvents ev;
    gpu::fusedFewQuerySelect(r, device, stream, corpus, dQ, 1, k, out.p, &ev.e);  // warm-up
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> kernel, merge, select;
    for (int i = 0; i < calls; ++i) {
        const double t0 = nowSeconds();
        gpu::fusedFewQuerySelect(r, device, stream, corpus, dQ + size_t(i % nq) * d, 1, k, out.p,
                                 &ev.e);
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
        select.push_back((nowSeconds() - t0) * 1e3);
        kernel.push_back(elapsedMs(ev.e.kernelStart, ev.e.kernelEnd));
        merge.push_back(elapsedMs(ev.e.kernelEnd, ev.e.mergeEnd));
    }
    FewQuerySplit s;
    s.kernelMs = median(kernel);
    s.mergeMs = median(merge);
    s.selectMs = median(select);
    return s;
}

}  // namespace bench
}  // namespace faiss_ext
