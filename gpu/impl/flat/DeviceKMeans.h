// k-means on the device, for the partitions of the residual corpus
// (ResidualCorpus.h) and the probe lists of a search graph
// (graph/ProbeLists.h): Lloyd iterations on an evenly strided sample of the
// vectors, started from P of its rows, then any number of rows assigned to
// their nearest centre, the products in plain FP32 GEMMs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "faiss_ext/gpu/GpuResources.h"

namespace faiss_ext {
namespace gpu {

/// What one k-means run reads: x (nb x d, device), P centres (1 <= P <= nb),
/// on `stream` of `device`.
struct KMeansJob {
    GpuResources* res;
    int device;
    cudaStream_t stream;
    const float* x;
    int64_t nb;
    int d;
    int64_t P;
};

/// centres (P x d, device) = k-means centres of x - mean (mean: d device
/// floats; zeros for plain k-means): 8 Lloyd steps on min(nb, 64 P)
/// strided sample rows, from P of them; an empty partition keeps its
/// centre.
void kmeansCentres(const KMeansJob& job, const float* mean, float* centres);

/// assign[i] (device) = the centre nearest to sample row i of `count`
/// strided ones, minus the mean (count == nb: every row), by |c|^2 - 2 x.c
/// (ties: the lower index), in chunks of rows that fit in a quarter of the
/// free temporary memory; with sums / counts (P x d doubles, P unsigned),
/// each row is also added to its centre's sums (a Lloyd step).
void assignNearest(const KMeansJob& job, int64_t count, const float* mean, const float* centres,
                   int32_t* assign, double* sums = nullptr, unsigned* counts = nullptr);

}  // namespace gpu
}  // namespace faiss_ext
