// An exact L2 faiss::Index over the flat engine (impl/flat/FlatSearch.h) on
// one device, its vectors kept on the device: the index that FAISS's k-means
// (faiss::Clustering::train) and the assignment pass of the partitioned file
// build search (FilePartition.cpp). It does for those calls what the public
// GpuIndexQuickSelectFlat with VectorStorage::Device and the default config
// did: the same checks, host queries paged through the device in the same
// chunks, and per chunk the same resolved options (Auto's selection
// algorithm and distance precision), so the same results, without an impl
// file constructing a public index. Host inputs and outputs only.
#pragma once

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/FlatSearch.h"

#include <faiss/Index.h>

#include <cstdint>
#include <memory>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

class FlatEngineIndex : public faiss::Index {
public:
    /// An empty index of d-dimensional vectors on `device` (initialised
    /// for `res` here).
    FlatEngineIndex(std::shared_ptr<GpuResources> res, int device, int d);
    ~FlatEngineIndex() override;

    /// Appends n host vectors (all finite).
    void add(idx_t n, const float* x) override;

    /// Exact L2 k-NN of n host queries (all finite) into host outputs;
    /// takes no search parameters.
    void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                const faiss::SearchParameters* params = nullptr) const override;

    /// Removes every vector.
    void reset() override;

private:
    /// One chunk of queries, all on the device (GpuIndexQuickSelectFlat's
    /// searchImpl_ with the default config).
    void searchChunk_(idx_t m, const float* x, idx_t k, float* distances, idx_t* labels) const;

    std::shared_ptr<GpuResources> res_;
    int device_;
    std::unique_ptr<FlatStorage> storage_;
};

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
