#include "faiss_ext/gpu/impl/graph/EntrySample.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <vector>

#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/impl/flat/FlatSearchPlan.h"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/graph/NearestEntryPoints.h"
#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {

const char* kWho = "GpuIndexSearchGraph";

/// Scratch for the queries' products with the sample, per tile of queries.
constexpr size_t kMaxDotsBytes = size_t(256) << 20;

/// The mean of the count rows (device) of dimension d, on the host.
std::vector<float> meanOfRows(const float* rows, int count, int d, cudaStream_t stream) {
    std::vector<float> host(size_t(count) * d);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(host.data(), rows, sizeof(float) * host.size(),
                                         cudaMemcpyDeviceToHost, stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> sum(size_t(d), 0.0);
    for (int i = 0; i < count; ++i)
        for (int j = 0; j < d; ++j) sum[size_t(j)] += host[size_t(i) * d + j];
    std::vector<float> mean(static_cast<size_t>(d));
    for (int j = 0; j < d; ++j) mean[size_t(j)] = float(sum[size_t(j)] / count);
    return mean;
}

}  // namespace

EntrySample::EntrySample(GpuResources* res, int device, int d, FlatMetric metric,
                         const float* vectors, int64_t n, int count, uint64_t seed)
        : res_(res), device_(device), d_(d), metric_(metric) {
    FAISS_THROW_IF_NOT_FMT(n >= 1 && count >= 1 && d >= 1 &&
                                   (metric == FlatMetric::L2 || metric == FlatMetric::InnerProduct),
                           "EntrySample: bad arguments (n %lld, count %d, d %d)", (long long)n,
                           count, d);
    std::vector<int> ids = sampleEntryPoints(n, count, seed);
    const int m = int(ids.size());
    cudaStream_t stream = res->getDefaultStream(device);
    ids_.allocate(res, device, ids.size(), kWho, "entry-point ids");
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(ids_.data(), ids.data(), sizeof(int) * ids.size(),
                                         cudaMemcpyHostToDevice, stream));
    TempBuffer<float> rows(res, device, size_t(m) * d, stream);
    gatherRows(stream, vectors, d, ids_.data(), m, rows.data());
    // Centred on their mean: L2 distances do not change under translation,
    // inner products by q.c, one number per query; TF32's error scales with
    // the norms, so data far from the origin keeps its seeds.
    const std::vector<float> mean = meanOfRows(rows.data(), m, d, stream);
    centre_.allocate(res, device, size_t(d), kWho, "entry-point centre");
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(centre_.data(), mean.data(), sizeof(float) * d,
                                         cudaMemcpyHostToDevice, stream));
    TempBuffer<float> centred(res, device, size_t(m) * d, stream);
    subtractCentre(rows.data(), m, d, centre_.data(), centred.data(), stream);
    if (metric == FlatMetric::L2) {
        sqNorms_.allocate(res, device, size_t(m), kWho, "entry-point norms");
        rowSquaredNorms(centred.data(), m, d, sqNorms_.data(), stream);
    }
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    rows_.reset(new FlatStorage(res, device, d, metric, VectorStorage::Device));
    rows_->append(centred.data(), m, /*prepared=*/true);
}

EntrySample::~EntrySample() = default;

void EntrySample::nearest(const float* q, int64_t nq, int perQuery, int64_t* out) const {
    FAISS_THROW_IF_NOT_FMT(perQuery >= 1 && perQuery <= size(),
                           "EntrySample::nearest: perQuery %d must be in [1, %d]", perQuery,
                           size());
    if (nq == 0) return;
    cudaStream_t stream = res_->getDefaultStream(device_);
    const bool l2 = metric_ == FlatMetric::L2;
    const bool warps = perQuery <= kMaxNearestEntrySeeds;
    // L2: the queries centred as the sample is (inner products rank the
    // centred rows as the raw ones: q.(x - c) = q.x - q.c); the GEMM of
    // nearestByWarps_ reads entryGemmRows(nq) rows, zeros past nq
    const int64_t rows = warps ? entryGemmRows(nq) : nq;
    TempBuffer<float> staged(res_, device_, l2 || rows > nq ? size_t(rows) * d_ : 0, stream);
    if (staged.size() > 0) {
        if (l2)
            subtractCentre(q, nq, d_, centre_.data(), staged.data(), stream);
        else
            FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(staged.data(), q, sizeof(float) * size_t(nq) * d_,
                                                 cudaMemcpyDeviceToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(staged.data() + size_t(nq) * d_, 0,
                                             sizeof(float) * size_t(rows - nq) * d_, stream));
        q = staged.data();
    }
    if (warps) {
        nearestByWarps_(q, nq, perQuery, out);
        return;
    }
    // the queries are on the device, finite and prepared: the exact engine
    // directly, planned as any flat search (FlatSearchPlan.h)
    TempBuffer<float> distances(res_, device_, size_t(nq) * perQuery, stream);
    FlatSearchOptions o =
            planFlatSearch(size(), true, metric_, d_, nq, perQuery, FlatSearchRequest());
    o.queriesPrepared = true;
    rows_->search(q, nq, perQuery, distances.data(), out, o);
}

void EntrySample::nearestByWarps_(const float* q, int64_t nq, int perQuery, int64_t* out) const {
    cudaStream_t stream = res_->getDefaultStream(device_);
    const int64_t ld = entryDotsLd(size());
    const size_t room = std::min(kMaxDotsBytes, res_->getTempMemoryAvailable(device_) / 4);
    // tiles of whole steps, so that each tile's padded rows lie inside the
    // entryGemmRows(nq) rows of q
    int64_t tile = int64_t(room / (4 * ld)) / kEntryGemmRowStep * kEntryGemmRowStep;
    tile = std::min(entryGemmRows(nq), std::max(kEntryGemmRowStep, tile));
    TempBuffer<float> dots(res_, device_, size_t(tile) * ld, stream);
    for (int64_t i = 0; i < nq; i += tile) {
        const int64_t rows = std::min(tile, nq - i);
        nearestEntryPoints(res_->getBlasHandle(device_), stream, rows_->vectors(),
                           metric_ == FlatMetric::L2 ? sqNorms_.data() : nullptr, size(), d_,
                           q + size_t(i) * d_, rows, entryGemmRows(rows), perQuery, dots.data(),
                           out + size_t(i) * perQuery);
    }
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
