// Two-part BF16 splits of FP32 vectors for the BF16x3 bounded search
// (DistancePrecision::BF16x3Bounded): each coordinate v as h = bf16_rn(v)
// and l = bf16_rn(v - h), laid out so that one BF16 tensor-core GEMM over
// rows of 3 dPad gives q.x as hq.lx + lq.hx + hq.hx (Distance.h) within
// bf16x3BoundTerms (Tf32ErrorBound.h), about 16 times closer than one TF32
// product at d = 96: a corpus row is [lo | hi | hi], a query row
// [hi | lo | hi]. One GEMM instead of three writes its output once (at
// d = 96 the three GEMMs' output passes, not their products, set the time).
// Each part is padded with zeros to a multiple of 8 BF16 (16 bytes), the
// alignment the tensor-core GEMMs want.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/DeviceCorpus.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {

/// The padded row length of split vectors of dimension d.
inline int bf16PaddedDim(int d) { return (d + 7) / 8 * 8; }

/// Which operand of the BF16x3 GEMM a split row is: the corpus's rows are
/// [lo | hi | hi], the queries' [hi | lo | hi].
enum class SplitSide { Corpus, Queries };

/// out (n x 3 bf16PaddedDim(d)) = the split rows of x (n x d FP32) laid out
/// for `side`; device pointers, on `stream`.
void splitRowsBf16(const float* x, int64_t n, int d, SplitSide side, Bf16Bits* out,
                   cudaStream_t stream);

/// The corpus split (SplitSide::Corpus) of x's first `rows` rows (d
/// floats each, device), made on `stream` in temporary memory for one
/// search where it takes at most half of the temporary memory left; null,
/// with nothing allocated, where it would take more (the search then goes
/// without BF16x3). A gathered subset's split and a host tile's are made so.
std::unique_ptr<TempBuffer<Bf16Bits>> splitRowsInTemp(GpuResources* res, int device,
                                                      cudaStream_t stream, const float* x,
                                                      int64_t rows, int d);

/// What the BF16x3 search reads of a split corpus (device pointers).
struct SplitView {
    const Bf16Bits* rows = nullptr;  ///< nb x 3 dPad, SplitSide::Corpus
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
    DeviceVector<Bf16Bits> rows_;
    int dPad_ = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
