// Options common to every GPU index (the base of each index's config
// struct), apart from GpuIndex.h so that options headers need no index class.
#pragma once

namespace faiss_ext {
namespace gpu {

/// Options common to every GPU index.
struct GpuIndexConfig {
    /// GPU on which the index lives.
    int device = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
