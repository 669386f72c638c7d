// Options of the exact flat index that its engine (impl/FlatSearch.h) needs
// too: where the vectors live, and the selection algorithm (SelectOptions.h).
#pragma once

#include "faiss_ext/gpu/SelectOptions.h"

namespace faiss_ext {
namespace gpu {

/// Where GpuIndexQuickSelectFlat keeps its vectors.
enum class VectorStorage : int {
    /// On the device while they fit (GpuResources::getDeviceMemoryLimit and
    /// free memory after the temporary budget), else in pinned host memory.
    Auto = 0,
    Device = 1,  ///< always on the device (adds fail when they do not fit)
    Host = 2,    ///< pinned host memory, streamed through the GPU per search
};

/// "auto", "device", "host".
const char* vectorStorageName(VectorStorage s);

}  // namespace gpu
}  // namespace faiss_ext
