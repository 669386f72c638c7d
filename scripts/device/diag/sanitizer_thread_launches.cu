// A faiss_ext-free program for compute-sanitizer's "Internal Sanitizer Error:
// Detected a failure to track a kernel launch" (README, "Sanitizers"): host
// threads share one CUDA stream and one cuBLAS handle, as the threads of
// GpuReliabilityThreads.SharedResourcesAcrossThreadsAndIndexes share one
// StandardGpuResources, and each launches, in a loop, a kernel with a
// shared-memory reduction, an SGEMM, stream-ordered allocations and events.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -o sanitizer_thread_launches \
//          scripts/device/diag/sanitizer_thread_launches.cu -lcublas
// Run:   compute-sanitizer --tool racecheck ./sanitizer_thread_launches [THREADS (6)] [ROUNDS (40)]
// Prints the threads' sums and "ok" when every sum is as expected.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CHECK(x)                                                                      \
    do {                                                                              \
        auto e_ = (x);                                                                \
        if (e_ != 0) {                                                                \
            std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, int(e_)); \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

namespace diag {
// one block: sum of n floats through a shared-memory tree
__global__ void blockSum(const float* x, int n, float* out) {
    __shared__ float s[256];
    float v = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = s[0];
}
__global__ void fill(float* x, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
}  // namespace diag

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 6;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 40;
    if (threads < 1 || rounds < 1) {
        std::fprintf(stderr, "usage: %s [THREADS >= 1] [ROUNDS >= 1]\n", argv[0]);
        return 2;
    }
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cublasHandle_t blas;
    CHECK(cublasCreate(&blas));
    CHECK(cublasSetStream(blas, stream));
    std::atomic<int> bad{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            const int m = 64 + 8 * t, k = 32;  // A: m x k of 1s, B: k x m of (t + 1)
            for (int r = 0; r < rounds; ++r) {
                float *a, *b, *c, *sum;
                CHECK(cudaMallocAsync(&a, sizeof(float) * m * k, stream));
                CHECK(cudaMallocAsync(&b, sizeof(float) * k * m, stream));
                CHECK(cudaMallocAsync(&c, sizeof(float) * m * m, stream));
                CHECK(cudaMallocAsync(&sum, sizeof(float), stream));
                diag::fill<<<(m * k + 255) / 256, 256, 0, stream>>>(a, m * k, 1.f);
                diag::fill<<<(m * k + 255) / 256, 256, 0, stream>>>(b, m * k, float(t + 1));
                const float one = 1, zero = 0;
                CHECK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, k, &one, a, m, b, k, &zero, c, m));
                diag::blockSum<<<1, 256, 0, stream>>>(c, m * m, sum);
                cudaEvent_t ev;
                CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
                CHECK(cudaEventRecord(ev, stream));
                float host = 0;
                CHECK(cudaMemcpyAsync(&host, sum, sizeof(float), cudaMemcpyDeviceToHost, stream));
                CHECK(cudaStreamSynchronize(stream));
                CHECK(cudaEventDestroy(ev));
                for (float* p : {a, b, c, sum}) CHECK(cudaFreeAsync(p, stream));
                if (host != float(m) * m * k * (t + 1)) bad++;
            }
        });
    }
    for (auto& th : pool) th.join();
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cublasDestroy(blas));
    CHECK(cudaStreamDestroy(stream));
    std::printf("%d threads x %d rounds: %s\n", threads, rounds, bad ? "WRONG SUMS" : "ok");
    return bad ? 1 : 0;
}
