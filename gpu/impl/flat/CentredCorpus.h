// A translated copy of a corpus for the bounded TF32 search.
//
// The bound on a TF32 key's error grows with |q| |x| (Tf32ErrorBound.h),
// not with the distances, so on data far from the origin (SIFT-like bytes,
// unnormalised image embeddings, any set whose mean is large) it dwarfs the
// gaps between neighbours and every query falls back to FP32 (issue 39).
// L2 distances do not change under translation: |q - x| = |(q - c) -
// (x - c)| for any c. With c the corpus mean, the bound scales with the
// spread of the data instead of its offset. This holds a copy x - c of the
// stored vectors and its norms, built on the first bounded search that
// gains from it and dropped when the vectors change. Inner products
// (cosine and Pearson rows too) use the same copy with the queries left
// as they are: q.(x - c) = q.x - q.c differs from q.x by one number per
// query, so it ranks the corpus the same way, while its bound scales with
// |x - c| (embeddings that fill a cone rather than the sphere gain).
//
// Exactness: the bounded search certifies the exact neighbours of the
// FP32-rounded translated points fl(x - c), fl(q - c), each within
// 2^-24 |x_i - c_i| per coordinate of the true translation: a perturbation
// far below the FP32 path's own rounding of |q|^2 + |x|^2 - 2 q.x on the
// same data, so the two agree up to ties.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/DeviceCorpus.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {

/// The copy is used when it shrinks the largest stored |x|^2 to at most
/// this fraction (the largest norm at least halves, and with it the bound
/// for every query near the data).
constexpr double kCentringGain = 0.25;

/// What the bounded search reads of a centred corpus (device pointers).
struct CentredView {
    const float* centre = nullptr;   ///< c (d floats)
    const float* vectors = nullptr;  ///< nb x d: fl(x - c)
    const float* sqNorms = nullptr;  ///< nb: |fl(x - c)|^2 as rowSquaredNorms computes it
    double maxSqNorm = 0.0;          ///< the largest of sqNorms
};

/// The centred copy of one storage's vectors (every metric).
class CentredCorpus {
public:
    /// The centred view of vectors (nb x d, device; the storage's current
    /// contents, of stored largest |x|^2 maxSqNorm), built on first use.
    /// Returns false (and remembers it until invalidate()) when centring
    /// would not shrink the norms by kCentringGain (decided in temporary
    /// memory, before any resident allocation) or the copy does not fit
    /// within kCopyMemoryShare (DeviceCorpus.h) of free memory; the search
    /// then runs on the stored vectors. A failed allocation of the copy throws (and the
    /// next search tries again). Synchronises `stream` when it builds.
    bool view(GpuResources* res, int device, cudaStream_t stream, const float* vectors, int64_t nb,
              int d, double maxSqNorm, CentredView* out);

    /// Drops the copy (the stored vectors changed).
    void invalidate();

private:
    bool build_(GpuResources* res, int device, cudaStream_t stream, const float* vectors,
                int64_t nb, int d, double maxSqNorm);

    std::mutex mutex_;
    bool decided_ = false;  // view() has built the copy or decided against it
    bool useful_ = false;
    DeviceVector<float> centre_, vectors_, sqNorms_;
    double maxSqNorm_ = 0.0;
};

/// mean (d floats, device) = the column means of x (n >= 1 rows of d,
/// device), summed in double; ordered on `stream`.
void corpusMean(GpuResources* res, int device, cudaStream_t stream, const float* x, int64_t n,
                int d, float* mean);

/// out (n x d) = rows of x minus centre (d floats); device pointers, on
/// `stream`. The bounded search centres its L2 queries with it.
void subtractCentre(const float* x, int64_t n, int d, const float* centre, float* out,
                    cudaStream_t stream);

/// out (n x d) = rows of x minus centre (d floats), sqNorms (n) = their
/// squared norms (rowSquaredNorms); returns the largest of those. scratch:
/// one device word. Device pointers; synchronises `stream`. The centred
/// copy and the host search's centred tiles are made by it.
double centreRows(const float* x, int64_t n, int d, const float* centre, float* out,
                  float* sqNorms, unsigned* scratch, cudaStream_t stream);

/// out[i] = q_i . centre for the n rows of q (n x d); device pointers, on
/// `stream`: what an inner-product search on the centred copy adds back.
void centreDots(const float* q, int64_t n, int d, const float* centre, float* out,
                cudaStream_t stream);

/// distances[r * k + j] += offsets[r] for rows x k results (the -inf
/// padding of rows with fewer than k results stays -inf); device
/// pointers, on `stream`.
void addRowOffsets(float* distances, int64_t rows, int64_t k, const float* offsets,
                   cudaStream_t stream);

}  // namespace gpu
}  // namespace faiss_ext
