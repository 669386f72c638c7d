// The vectors of a search graph partitioned into probe lists, for the
// queries unlike the data (UnlikeQueryRule.h): a graph whose edges join
// near neighbours gives a beam search no path to the neighbours of a query
// that lands in a gap of the data, while an inverted file reaches them by
// scanning the lists whose centres are nearest to the query (the IVF of
// H. Jegou, M. Douze, C. Schmid, "Product Quantization for Nearest Neighbor
// Search", IEEE TPAMI 33(1), 2011, here with exact distances). ProbeSearch.h
// searches them.
//
// The lists hold storage rows, not vectors: the probe reads the graph's own
// FP32 vectors in place, so the lists cost 4 bytes a vector plus the
// centres. Built on first use and dropped when the vectors change (the
// caller's duty: they point into its storage).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"
#include "faiss_ext/gpu/impl/graph/ProbePlan.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {
namespace graph {

/// The resident bytes of the lists of nb vectors of dimension d (rows,
/// offsets, and the centres with their norms in a flat storage).
size_t probeListsBytes(int64_t nb, int d);

/// The k-means partition of one storage's vectors into probe lists.
class ProbeLists {
  public:
    /// Partitions vectors (nb x d, device, as the index stores them: unit
    /// rows for cosine / Pearson) into probeListCount(nb) lists
    /// (ProbePlan.h) by k-means
    /// (DeviceKMeans.h) in L2. The vectors are read, not copied: the probe
    /// reads them in place later. Synchronises `stream` (the default stream
    /// of `device`). A failed allocation throws.
    ProbeLists(GpuResources* res, int device, cudaStream_t stream, const float* vectors, int64_t nb,
               int d);
    ~ProbeLists();
    ProbeLists(const ProbeLists&) = delete;
    ProbeLists& operator=(const ProbeLists&) = delete;

    int64_t lists() const { return lists_; }
    int64_t size() const { return nb_; }
    int dim() const { return d_; }
    /// The vectors the lists index (device, size() x dim()).
    const float* vectors() const { return vectors_; }
    /// Storage rows grouped by list (device, size() entries): list l holds
    /// rows()[offsets[l] .. offsets[l + 1]), in increasing row order.
    const uint32_t* rows() const { return rows_.data(); }
    /// List boundaries (device, lists() + 1 entries).
    const int64_t* offsets() const { return offsets_.data(); }
    /// The same boundaries on the host.
    const std::vector<int64_t>& hostOffsets() const { return hostOffsets_; }
    /// The centres (L2, on the device): their exact search names the lists
    /// nearest to a query.
    const FlatStorage& centres() const { return *centres_; }

  private:
    int64_t nb_ = 0;
    int d_ = 0;
    int64_t lists_ = 0;
    const float* vectors_ = nullptr;
    DeviceVector<uint32_t> rows_;
    DeviceVector<int64_t> offsets_;
    std::vector<int64_t> hostOffsets_;
    std::unique_ptr<FlatStorage> centres_;
};

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
