// Data sets for the demo and the benchmarks: a seeded generator of clustered
// vectors with a low intrinsic dimension (DESIGN.md, "Benchmarks": generated
// sets must mimic real ones, not uniform noise), and readers and writers for
// the file formats the shared data sets use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faiss_ext {
namespace bench {

/// A row-major float matrix.
struct Matrix {
    int64_t n = 0;           ///< number of rows
    int d = 0;               ///< number of columns
    std::vector<float> x;    ///< n x d values, row major
};

/// An int32 row-major matrix (ground-truth ids in .ivecs files).
struct IntMatrix {
    int64_t n = 0;              ///< number of rows
    int d = 0;                  ///< number of columns
    std::vector<int32_t> x;     ///< n x d values, row major
};

/// Parameters of generateClustered.
struct ClusteredSpec {
    int d = 128;             ///< dimension of the output vectors
    int latentDim = 16;      ///< intrinsic dimension of the data (<= d)
    int clusters = 256;      ///< mixture components in the latent space
    float clusterSpread = 0.35f;  ///< within-cluster std dev relative to the centres' spread
    float noise = 0.02f;     ///< isotropic noise in the full space, relative to the signal
    uint64_t seed = 1234;    ///< seed of the mixture (centres, map); shared by base and queries
};

/// n vectors of the mixture `spec`. Rows come from a Gaussian mixture in a
/// latent space of spec.latentDim dimensions, mapped to spec.d dimensions by
/// a fixed random linear map, plus a little isotropic noise: clustered and of
/// low intrinsic dimension, like real descriptors. `stream` selects
/// independent rows from the same mixture (e.g. 0 for the base, 1 for the
/// queries). Deterministic for (spec, n, stream) whatever the thread count.
Matrix generateClustered(const ClusteredSpec& spec, int64_t n, uint64_t stream);

/// Rows of generateCentresRows's independent random streams.
constexpr int64_t kCentresBlockRows = 65536;

/// Rows [row0, row0 + m) of the "clustered-1000-centres" set of the GNND
/// device benches (1000 Gaussian centres of spread 4 in d dimensions, unit
/// Gaussian noise around them), into out (m x d). Each block of
/// kCentresBlockRows rows has its own seeded stream, so row0 must be a
/// multiple of it; the same values for any thread count and chunking.
void generateCentresRows(int64_t row0, int64_t m, int d, float* out);

/// The number of clusters the programs use for nb generated vectors:
/// about one per 500 vectors, between 16 and 4096.
int defaultClusters(int64_t nb);

/// Reads a vector file, chosen by its name: .fvecs, .bvecs (uint8 -> float),
/// .fbin (int32 n, int32 d, then n*d float32), or an IDX image file
/// (*-idx3-ubyte, optionally .gz; uint8 -> float). At most maxRows rows
/// (<= 0: all). Throws std::runtime_error with the path on any problem.
Matrix readVectors(const std::string& path, int64_t maxRows = 0);

/// Reads an .ivecs file (at most maxRows rows; <= 0: all). Throws on error.
IntMatrix readIvecs(const std::string& path, int64_t maxRows = 0);

/// Writes m as .fbin (int32 n, int32 d, float32 data). Throws on error.
void writeFbin(const std::string& path, const Matrix& m);

/// Writes an n x d int32 matrix as .ivecs. Throws on error.
void writeIvecs(const std::string& path, int64_t n, int d, const int32_t* x);

/// Writes an n x d float matrix as .fvecs. Throws on error.
void writeFvecs(const std::string& path, int64_t n, int d, const float* x);

}  // namespace bench
}  // namespace faiss_ext
