// Carving one temporary allocation into parts: each part starts at a
// multiple of 256 bytes (cudaMalloc's own alignment), so that any element
// type, and CUB's temporary storage, may start there.
#pragma once

#include <cstddef>

namespace faiss_ext {
namespace gpu {

/// b rounded up to a multiple of 256.
inline size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

}  // namespace gpu
}  // namespace faiss_ext
