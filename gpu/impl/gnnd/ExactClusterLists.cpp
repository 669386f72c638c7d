#include "faiss_ext/gpu/impl/gnnd/ExactClusterLists.h"

#include "faiss_ext/gpu/SelectOptions.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <limits>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// The search options for m queries against their own m device-resident
/// vectors at k: Auto's selection algorithm, FP32 distances. Not the
/// bounded TF32 path: a cluster's vectors are close to one another and far
/// from the origin, where its bound is loosest (candidate sets grow, and
/// uncertified queries are searched twice); the first exact-cluster builds
/// on the H200 ran at a quarter of the flat engine's rate with it.
FlatSearchOptions clusterOptions(int64_t m, int64_t k, int d) {
    FlatSearchOptions o;
    o.algo = chooseSelectAlgo(m, m, k, d);
    o.precision = DistancePrecision::FP32;
    o.queriesPrepared = true;  // the queries are the stored, prepared vectors
    return o;
}

/// Row i's list without i itself (the search asked for one more than k).
void dropSelf(int64_t i, const int64_t* labels, const float* found, int64_t kq, int k,
              bool negate, int* ids, float* dists) {
    int out = 0;
    for (int64_t j = 0; j < kq && out < k; ++j) {
        if (labels[j] == i || labels[j] < 0) continue;
        ids[out] = int(labels[j]);
        dists[out] = negate ? -found[j] : found[j];
        ++out;
    }
    for (; out < k; ++out) {
        ids[out] = -1;
        dists[out] = std::numeric_limits<float>::infinity();
    }
}

}  // namespace

void exactClusterLists(GpuResources* res, int device, const float* vectors, int64_t m, int d,
                       FlatMetric metric, int k, std::vector<int>& ids,
                       std::vector<float>& dists) {
    FAISS_THROW_IF_NOT_MSG(res && m >= 0 && d > 0 && k > 0, "exactClusterLists: bad input");
    ids.assign(size_t(m) * k, -1);
    dists.assign(size_t(m) * k, std::numeric_limits<float>::infinity());
    if (m < 2) return;
    DeviceScope scope(device);
    FlatStorage storage(res, device, d, metric, VectorStorage::Device);
    storage.append(vectors, m, /*prepared=*/false);
    const int64_t kq = std::min<int64_t>(int64_t(k) + 1, m);
    const char* who = "gnndBuildFromFile (exact clusters)";
    DeviceVector<float> dFound;
    DeviceVector<int64_t> dLabels;
    dFound.allocate(res, device, size_t(m) * kq, who, "distances");
    dLabels.allocate(res, device, size_t(m) * kq, who, "labels");
    storage.search(storage.vectors(), m, kq, dFound.data(), dLabels.data(),
                   clusterOptions(m, kq, d));
    std::vector<float> found(size_t(m) * kq);
    std::vector<int64_t> labels(size_t(m) * kq);
    cudaStream_t stream = res->getDefaultStream(device);  // the one the search ran on
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(found.data(), dFound.data(),
                                         sizeof(float) * found.size(), cudaMemcpyDeviceToHost,
                                         stream));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(labels.data(), dLabels.data(),
                                         sizeof(int64_t) * labels.size(),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const bool negate = metric != FlatMetric::L2;  // the engine returns similarities
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
        dropSelf(i, labels.data() + size_t(i) * kq, found.data() + size_t(i) * kq, kq, k, negate,
                 ids.data() + size_t(i) * k, dists.data() + size_t(i) * k);
    }
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
