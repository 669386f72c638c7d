// The bridge from an index of the GPU layer to its CPU twin, with no CUDA in
// sight, so that the host-side I/O (index_io.h) can save GPU indexes as FAISS
// saves its own: as the CPU twin.
#pragma once

#include <faiss/Index.h>

namespace faiss_ext {

/// Implemented by every faiss_ext GPU index.
class CpuConvertible {
public:
    virtual ~CpuConvertible() = default;

    /// A new CPU index equivalent to this one (the caller owns it). Searching
    /// it gives the same results as searching this index.
    virtual faiss::Index* copyToCpuIndex() const = 0;
};

}  // namespace faiss_ext
