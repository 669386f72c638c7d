// Two-part BF16 splits of FP32 vectors for the BF16x3 bounded search
// (DistancePrecision::BF16x3Bounded): each coordinate v as h = bf16_rn(v)
// and l = bf16_rn(v - h), so that three BF16 tensor-core products
// (hi.hi + hi.lo + lo.hi, Distance.h) give q.x within bf16x3BoundTerms
// (Tf32ErrorBound.h), 26 times closer than one TF32 product at d = 96. Rows
// are padded with zeros to a multiple of 8 BF16 (16 bytes), the alignment
// the tensor-core GEMMs want.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {

/// The padded row length of split vectors of dimension d.
inline int bf16PaddedDim(int d) { return (d + 7) / 8 * 8; }

/// hi and lo (n x bf16PaddedDim(d) each) = the splits of the rows of x
/// (n x d FP32); device pointers, on `stream`.
void splitRowsBf16(const float* x, int64_t n, int d, Bf16Bits* hi, Bf16Bits* lo,
                   cudaStream_t stream);

/// What the BF16x3 search reads of a split corpus (device pointers).
struct SplitView {
    const Bf16Bits* hi = nullptr;  ///< nb x dPad
    const Bf16Bits* lo = nullptr;  ///< nb x dPad
    int dPad = 0;
};

/// The split copy of one storage's vectors (or of their centred copy),
/// built on the first BF16x3 search and dropped when the vectors change.
class SplitCorpus {
  public:
    /// The split of vectors (nb x d, device), built on first use or when
    /// `vectors` is not the array the copy was made from. Returns false
    /// (the search then runs FP32) when the copy would take more than half
    /// the device's free memory; a failed allocation throws. Synchronises
    /// `stream` when it builds.
    bool view(GpuResources* res, int device, cudaStream_t stream, const float* vectors, int64_t nb,
              int d, SplitView* out);

    /// Drops the copy (the stored vectors changed).
    void invalidate();

  private:
    std::mutex mutex_;
    const float* source_ = nullptr;  // the array the copy was made from
    int64_t nb_ = 0;
    DeviceVector<Bf16Bits> hi_, lo_;
    int dPad_ = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
