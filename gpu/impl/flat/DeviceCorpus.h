// Device-resident vectors of a flat index as the few-query and large-k
// engines (FusedFewQuery.h, LargeKFlatSearch.h) read them.
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// Vectors on the device, prepared for the metric, and their norms for L2.
struct DeviceCorpus {
    const float* vectors = nullptr;  ///< nb x d, row major (device)
    const float* sqNorms = nullptr;  ///< |x|^2 for L2 (device), null for inner products
    int64_t nb = 0;
    int d = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
