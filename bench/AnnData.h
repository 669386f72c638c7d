// Data sets of the approximate-search benchmarks (suite "ann"), beside the
// easy clustered generator of BenchData.h: a hard generator (full intrinsic
// dimension, hundreds of anisotropic clusters of heavy-tailed sizes) and a
// real-derived set made from Fashion-MNIST images by seeded augmentations.
// Every generator is deterministic for its seed, whatever the thread count.
#pragma once

#include <cstdint>

#include "BenchData.h"

namespace faiss_ext {
namespace bench {

/// Parameters of generateHard.
struct HardSpec {
    int d = 100;                ///< dimension (= intrinsic dimension: every cluster is full rank)
    int clusters = 500;         ///< mixture components
    double sizeExponent = 1.1;  ///< cluster weights fall as (rank + 1)^-sizeExponent
    float minScale = 0.1f;      ///< per-axis scales of a cluster, log-uniform in [min, max],
    float maxScale = 1.0f;      ///< relative to the spread of the centres (1 per axis)
    uint64_t seed = 4321;       ///< seed of the mixture; shared by base and queries
};

/// n vectors of the hard mixture: cluster c has centre ~ N(0, I) and maps
/// N(0, I) samples through its own random d x d matrix times per-axis
/// scales, so clusters are anisotropic, full rank and of very unequal
/// sizes (the largest holds about 15% of the rows, the smallest a few
/// hundred in a million). `stream` picks independent rows (0 base, 1 queries).
Matrix generateHard(const HardSpec& spec, int64_t n, uint64_t stream);

/// Rows [row0, row0 + n) of generateHard's stream (the same values), for
/// sets generated and written in chunks.
Matrix generateHardRows(const HardSpec& spec, int64_t row0, int64_t n, uint64_t stream);

/// count 28 x 28 images made from `images` (m x 784, pixel values 0..255)
/// by seeded augmentations: rotation within +-12 degrees, scaling by
/// 0.9..1.1, shifts within +-2 pixels, an elastic distortion (a smooth
/// random displacement field of about 1 pixel) and Gaussian noise (std 6),
/// clamped to 0..255. Row i comes from image i % m.
Matrix augmentImages(const Matrix& images, int64_t count, uint64_t seed);

/// The rows of `base` and `queries` projected to `dOut` dimensions by
/// FAISS's PCA (faiss::PCAMatrix), trained on at most trainRows base rows.
void reducePca(Matrix& base, Matrix& queries, int dOut, int64_t trainRows);

}  // namespace bench
}  // namespace faiss_ext
