// The fused candidates' kernel on Hopper's warpgroup products (wgmma,
// sm_90a): the same tiles, stages, copies and threshold test as the mma.sync
// kernel of FusedCandidates.cu, the products issued by a warpgroup from
// shared-memory descriptors instead of fragments loaded into registers.
// Used on compute capability 9.0 devices when the build holds it (CMake adds
// sm_90a for this file when the architectures include 90).
#pragma once

#include <cuda_runtime_api.h>

namespace faiss_ext {
namespace gpu {
namespace fused {
struct FusedArgs;
}

/// Whether this build holds the warpgroup kernel and `device` can run it.
bool fusedWgmmaAvailable(int device);

/// Launches the warpgroup kernel over a's tiles (TF32 products, or BF16
/// pairs when `bf16`) on `stream`; requires fusedWgmmaAvailable(device),
/// `device` current. Throws for a CUDA error.
void launchFusedWgmma(const fused::FusedArgs& a, bool bf16, int device, cudaStream_t stream);

}  // namespace gpu
}  // namespace faiss_ext
