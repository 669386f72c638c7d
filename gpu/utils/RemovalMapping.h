// The renumbering of a removal, on the device: the survivors' old positions
// in order and each old position's new id (-1: removed), as
// faiss::IndexFlat::remove_ids renumbers. GpuKnnGraphGNND compacts its
// vectors and lists with it; GpuIndexSearchGraph patches its search graph
// with the same mapping instead of building it twice.
#pragma once

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace faiss_ext {
namespace gpu {

class RemovalMapping {
public:
    /// The mapping of removing `removed`'s positions (temporary memory of
    /// `device`, ordered on `stream`).
    RemovalMapping(GpuResources* res, int device, cudaStream_t stream, const IdSelection& removed);

    /// Positions before the removal (the index's ntotal it was made for).
    int64_t positions() const { return int64_t(newId_.size()); }
    /// Survivors (positions not selected).
    int64_t survivors() const { return int64_t(kept_.size()); }
    /// survivors() old positions, increasing (device).
    const uint32_t* kept() const { return kept_.data(); }
    /// One new id per old position, -1 for the removed ones (device).
    const int* newId() const { return newId_.data(); }

private:
    TempBuffer<uint32_t> kept_;
    TempBuffer<int> newId_;
};

}  // namespace gpu
}  // namespace faiss_ext
