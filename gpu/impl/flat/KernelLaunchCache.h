// Per-device facts about a kernel that the launch planning of the latency-
// bound paths needs on every call: each is a driver call of microseconds,
// spent before the kernel starts (a one-query search over 1M vectors takes
// about 0.3 ms), so they are asked once per device and kept. Thread-safe.
#pragma once

#include <cstddef>

namespace faiss_ext {
namespace gpu {

/// Multiprocessors of `device`.
int cachedSmCount(int device);

/// Resident blocks per multiprocessor of `kernel` (a __global__ function's
/// address) at `threads` threads and `smem` bytes of dynamic shared memory
/// on `device`, which must be the current device. Raises the kernel's
/// dynamic shared memory limit to `smem` first where it is lower (the limit
/// only grows, so launches planned earlier with less stay valid).
int cachedBlocksPerSm(const void* kernel, int device, int threads, size_t smem);

}  // namespace gpu
}  // namespace faiss_ext
