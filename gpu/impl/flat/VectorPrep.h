// Per-vector preparation and norms on the device (the "vector reductions" of
// Komarov et al., "Distance calculation").
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuResources.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

namespace faiss_ext {
namespace gpu {

/// norms[i] = |x_i|^2 for the n x d row-major matrix x (device pointers).
void rowSquaredNorms(const float* x, int64_t n, int d, float* norms, cudaStream_t stream);

/// The largest of the n squared norms: of `norms` (n floats) when given,
/// else of the rows of x (n x d) computed as rowSquaredNorms computes them.
/// scratch: one device word. Synchronises `stream`; 0 for n == 0.
float maxSquaredNorm(const float* x, int64_t n, int d, const float* norms, unsigned* scratch,
                     cudaStream_t stream);

/// In place on the device: nothing for L2 / IP, L2 normalisation for cosine,
/// centring then normalisation for Pearson (as faiss_ext::prepareVectors).
void prepareVectorsDevice(FlatMetric metric, float* x, int64_t n, int d, cudaStream_t stream);

/// Queries x (n x d, device) as the metric's index stores its vectors: x
/// itself for L2 / IP, else a prepared copy held by `holder` (temporary
/// memory of res on `stream`).
const float* preparedQueries(GpuResources* res, int device, cudaStream_t stream, FlatMetric metric,
                             const float* x, int64_t n, int d,
                             std::unique_ptr<TempBuffer<float>>& holder);

/// Inputs of at most this many entries are checked by one block.
constexpr int64_t kSmallCheckEntries = 65536;

/// The NaN / Inf check of a device input, answered through one int64 of
/// mapped pinned host memory, so that no check allocates or copies through
/// pageable memory (those cost about 20 us of a one-query search, and an
/// allocation and a synchronisation before every search of 200 x 960
/// queries). Inputs of at most kSmallCheckEntries entries (a few queries)
/// are read by one block that writes the answer itself; larger ones by a
/// grid that takes the minimum in a device word, copied into the mapped
/// word. start() queues the check on `stream`; wait() waits for it alone (an
/// event, not the stream) and returns its answer: the first row with a NaN
/// or infinite entry, or -1. Calling wait() later lets the check overlap the
/// work queued after it (a search saves a synchronisation). Made on the
/// device it checks.
class DeferredFiniteCheck {
public:
    DeferredFiniteCheck();
    ~DeferredFiniteCheck();
    DeferredFiniteCheck(const DeferredFiniteCheck&) = delete;
    DeferredFiniteCheck& operator=(const DeferredFiniteCheck&) = delete;
    void start(const float* x, int64_t n, int d, cudaStream_t stream);
    int64_t wait();

private:
    int64_t* mapped_ = nullptr;  ///< the answer (mapped, portable pinned memory)
    unsigned long long* first_ = nullptr;  ///< the grid's minimum (device memory)
    cudaEvent_t done_ = nullptr;
};

}  // namespace gpu
}  // namespace faiss_ext

namespace faiss_ext {
namespace gpu {

/// Sets dist[r * ld + c] to NaN where row r of the tile is global vector
/// row0 + r and column c is global vector col0 + c (the same vector), for
/// r < rows, c < cols: excludes each vector from its own k-NN list (NaN
/// sorts after every distance).
void maskSelfPairs(float* dist, int64_t ld, int64_t rows, int64_t cols, int64_t row0, int64_t col0,
                   cudaStream_t stream);

}  // namespace gpu
}  // namespace faiss_ext
