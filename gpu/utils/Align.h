// Carving one temporary allocation into parts: each part starts at a
// multiple of 256 bytes (cudaMalloc's own alignment), so that any element
// type, and CUB's temporary storage, may start there. And the test the
// kernels' launchers make before they read rows as float4 or copy them by
// 16-byte cp.async.
#pragma once

#include <cstddef>
#include <cstdint>

#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

/// b rounded up to a multiple of 256.
inline size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

/// Whether p starts at a multiple of 16 bytes (null does: a missing
/// operand never stops the vector loads of the others).
FAISS_EXT_HOST_DEVICE bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

}  // namespace gpu
}  // namespace faiss_ext
