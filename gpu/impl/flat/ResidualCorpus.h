// The corpus as residuals of k-means centres, for the bounded TF32 search
// of data whose clusters lie far from each other and from the origin.
//
// The TF32 error of q.x grows with |q| |x| (Tf32ErrorBound.h); centring by
// one mean (CentredCorpus.h) shrinks |x| to the spread of the data, which on
// data of many far-apart clusters is still the distance between clusters
// (issue 39's hard 10M set: |x - mean| about 40, neighbour distances a few
// units). Stored as x = m + c_p + r (m the mean, c_p the centre of x's
// k-means partition, r the residual, rounded to TF32), q.x splits into
// q'.c_p, one FP32 GEMM of the queries (q' = q - m) by the P centres, and
// q'.r on the tensor cores with TF32 inputs that are exact (both rounded to
// TF32 beforehand), so that its error is measured rather than assumed:
// |q' - tf32(q')| |r| + |q'| |r - tf32(r)| + the FP32 accumulation, all
// scaled by the residuals' norms (the spread within a partition), taken per
// tile of 128 rows (rows sorted by partition, then by |r|, each partition
// padded to whole tiles so that a tile has one centre). The bound and the
// certificate: ResidualBound.h; the search: BoundedFlatSearch.h.
#pragma once

#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <cstdint>
#include <mutex>

#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

namespace faiss_ext {
namespace gpu {

/// Rows of a residual tile: the fused kernels' vector tile (FusedTileParts.cuh).
constexpr int64_t kResidualTileRows = 128;

/// Auto's residual pass runs on corpora of at least this many vectors
/// (fewer make partitions of too few tiles to pay for k-means) and for at
/// least this many queries the first TF32 pass left uncertified (a few
/// ties near the origin go to BF16x3 without building the copy).
constexpr int64_t kResidualMinVectors = int64_t(1) << 16;
constexpr int64_t kResidualMinQueries = 1000;

/// The partitions of a corpus of nb vectors: about one per 4,096 vectors,
/// at least 1 and at most 4,096 (on the hard 10M x 96 set, 1,024 and 4,096
/// partitions left mean residual norms of 9.9 and 6.9 against 40 for the
/// centred vectors; the padding to whole tiles costs 64 rows a partition
/// on average, 1.6% at one per 4,096).
int64_t residualPartitionCount(int64_t nb);

/// What the bounded search reads of a residual corpus (device pointers).
struct ResidualView {
    int d = 0;
    const float* mean = nullptr;     ///< m (d floats)
    const float* centres = nullptr;  ///< P x d: c_p, the partitions' centres minus m
    int64_t partitions = 0;          ///< P
    /// rows x d: tf32(x - m - c_p) (round to nearest, low 13 bits zero: the
    /// tensor cores take them exactly); zeros on padding rows.
    const float* residuals = nullptr;
    /// rows: |x - m|^2 (computed in double, rounded down to FP32); +inf on
    /// padding rows (never a candidate).
    const float* centredSqNorms = nullptr;
    /// rows: the storage row of each residual row; UINT32_MAX on padding.
    const uint32_t* ids = nullptr;
    int64_t rows = 0;  ///< a multiple of kResidualTileRows (every partition padded)
    /// rows / kResidualTileRows: the partition of each tile's rows.
    const int32_t* tilePartition = nullptr;
    /// rows / kResidualTileRows: {rho, lambda}, upper bounds of the largest
    /// |tf32 residual| and of the largest |exact residual - tf32 residual|
    /// over the tile's rows (the exact residual being x - m - c_p in real
    /// arithmetic); {0, 0} for a tile of padding only.
    const float2* tileRadii = nullptr;
    double maxCentreNorm = 0.0;     ///< >= every |c_p|
    double maxResidualNorm = 0.0;   ///< >= every rho
    double maxCentredSqNorm = 0.0;  ///< >= every finite centredSqNorms entry
};

/// The residual copy of one storage's vectors (L2 only), built on first use
/// and dropped when the vectors change.
class ResidualCorpus {
  public:
    /// The residual view of vectors (nb x d, device, nb < 2^32), built on
    /// first use: the mean, k-means (residualPartitionCount(nb) centres,
    /// Lloyd iterations on a sample, then every vector assigned to its
    /// nearest centre), rows sorted by (partition, |r|) and padded. Returns
    /// false (and remembers it until invalidate()) when the copy would take
    /// more than kCopyMemoryShare (DeviceCorpus.h) of the free device memory.
    /// A failed allocation throws (the next search tries again).
    /// Synchronises `stream` when it builds.
    bool view(GpuResources* res, int device, cudaStream_t stream, const float* vectors, int64_t nb,
              int d, ResidualView* out);

    /// Drops the copy (the stored vectors changed).
    void invalidate();

    /// Whether the copy is built (an earlier search needed it).
    bool built();

    /// The device arrays a view points into (ResidualCorpus.cu builds them
    /// whole, then moves them in).
    struct Arrays {
        DeviceVector<float> mean, centres, residuals, sqNorms;
        DeviceVector<uint32_t> ids;
        DeviceVector<int32_t> tilePartition;
        DeviceVector<float2> tileRadii;
    };

  private:
    bool build_(GpuResources* res, int device, cudaStream_t stream, const float* vectors,
                int64_t nb, int d);

    std::mutex mutex_;
    bool decided_ = false;  // view() has built the copy or decided against it
    bool useful_ = false;
    Arrays arrays_;
    ResidualView view_;
};

}  // namespace gpu
}  // namespace faiss_ext
