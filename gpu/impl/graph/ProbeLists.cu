// The probe lists of a search graph's vectors (see ProbeLists.h): k-means
// centres (flat/DeviceKMeans.h), every row assigned to its nearest centre,
// the rows sorted by list (a stable radix sort keeps each list's rows in
// increasing order), the lists' boundaries from their counts.
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>
#include <cub/cub.cuh>

#include "faiss_ext/gpu/impl/flat/DeviceKMeans.h"
#include "faiss_ext/gpu/impl/graph/ProbeLists.h"
#include "faiss_ext/gpu/impl/graph/ProbePlan.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

const char* const kWho = "queries unlike the data";

/// rows[i] = i; counts[assign[i]] += 1.
__global__ void countListsKernel(const int32_t* assign, int64_t nb, uint32_t* rows,
                                 unsigned* counts) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < nb;
         i += int64_t(gridDim.x) * blockDim.x) {
        rows[i] = uint32_t(i);
        atomicAdd(&counts[assign[i]], 1u);
    }
}

/// Storage rows sorted by their list into `sorted` (stable: increasing rows
/// within a list); returns the lists' row counts.
std::vector<unsigned> sortRowsByList(const KMeansJob& job, const int32_t* assign,
                                     uint32_t* sorted) {
    TempBuffer<uint32_t> rows(job.res, job.device, size_t(job.nb), job.stream);
    TempBuffer<uint32_t> keysOut(job.res, job.device, size_t(job.nb), job.stream);
    // (partitions are >= 0: sorted as unsigned, whose low bits are theirs)
    const uint32_t* keys = reinterpret_cast<const uint32_t*>(assign);
    TempBuffer<unsigned> counts(job.res, job.device, size_t(job.P), job.stream);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, sizeof(unsigned) * job.P, job.stream));
    countListsKernel<<<gridStrideBlocks(job.nb), 256, 0, job.stream>>>(assign, job.nb, rows.data(),
                                                                       counts.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    int endBit = 1;
    while ((int64_t(1) << endBit) < job.P) ++endBit;
    size_t bytes = 0;
    FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, bytes, keys, keysOut.data(), rows.data(), sorted, job.nb, 0, endBit, job.stream));
    TempBuffer<char> temp(job.res, job.device, std::max<size_t>(bytes, 1), job.stream);
    FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), bytes, keys, keysOut.data(),
                                                         rows.data(), sorted, job.nb, 0, endBit,
                                                         job.stream));
    std::vector<unsigned> hostCounts(size_t(job.P));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostCounts.data(), counts.data(), sizeof(unsigned) * job.P,
                                         cudaMemcpyDeviceToHost, job.stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(job.stream));
    return hostCounts;
}

}  // namespace

size_t probeListsBytes(int64_t nb, int d) {
    const int64_t P = probeListCount(nb);
    return size_t(nb) * sizeof(uint32_t) + size_t(P + 1) * sizeof(int64_t) +
           size_t(P) * (size_t(d) + 1) * sizeof(float);
}

ProbeLists::ProbeLists(GpuResources* res, int device, cudaStream_t stream, const float* vectors,
                       int64_t nb, int d)
    : nb_(nb), d_(d), lists_(probeListCount(nb)), vectors_(vectors) {
    FAISS_THROW_IF_NOT_FMT(nb >= 1 && nb < (int64_t(1) << 32) && d >= 1,
                           "%s: probe lists need 1 <= n < 2^32 vectors (n = %lld, d = %d)", kWho,
                           (long long)nb, d);
    DeviceScope scope(device);
    const KMeansJob job{res, device, stream, vectors, nb, d, lists_};
    TempBuffer<float> zeroMean(res, device, size_t(d), stream);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(zeroMean.data(), 0, sizeof(float) * d, stream));
    TempBuffer<float> centres(res, device, size_t(lists_) * d, stream);
    kmeansCentres(job, zeroMean.data(), centres.data());
    rows_.allocate(res, device, size_t(nb), kWho, "the probe lists' rows");
    std::vector<unsigned> counts;
    {
        TempBuffer<int32_t> assign(res, device, size_t(nb), stream);
        assignNearest(job, nb, zeroMean.data(), centres.data(), assign.data());
        counts = sortRowsByList(job, assign.data(), rows_.data());
    }
    hostOffsets_.assign(size_t(lists_) + 1, 0);
    for (int64_t l = 0; l < lists_; ++l) hostOffsets_[l + 1] = hostOffsets_[l] + counts[l];
    offsets_.allocate(res, device, hostOffsets_.size(), kWho, "the probe lists' offsets");
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(offsets_.data(), hostOffsets_.data(),
                                         sizeof(int64_t) * hostOffsets_.size(),
                                         cudaMemcpyHostToDevice, stream));
    centres_.reset(new FlatStorage(res, device, d, FlatMetric::L2, VectorStorage::Device));
    centres_->append(centres.data(), lists_, /*prepared=*/true);
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

ProbeLists::~ProbeLists() = default;

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
