// Device-resident vectors of a flat index as the few-query and large-k
// engines (FusedFewQuery.h, LargeKFlatSearch.h) read them, and the memory
// policy of the copies the bounded search derives from them.
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// A copy derived from the stored vectors for the bounded search (the
/// centred copy, CentredCorpus.h; the BF16 split, SplitBf16.h) is made only
/// while it takes at most this share of the device's free memory (the
/// search's tiles need the rest); otherwise the search goes without it.
constexpr double kCopyMemoryShare = 0.5;

/// Vectors on the device, prepared for the metric, and their norms for L2.
struct DeviceCorpus {
    const float* vectors = nullptr;  ///< nb x d, row major (device)
    const float* sqNorms = nullptr;  ///< |x|^2 for L2 (device), null for inner products
    int64_t nb = 0;
    int d = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
