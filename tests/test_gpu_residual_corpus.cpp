// The residual copy of a corpus (impl/flat/ResidualCorpus.h), read back and
// checked on the host in double: the ids a permutation of the rows, every
// partition padded to whole tiles and sorted by |r|; residuals exactly TF32;
// the tile radii bounding |r| and |x - m - c_p - r| of every row they cover;
// the centred norms rounded down; the maxima bounding their arrays; and, on
// data of far-apart clusters far from the origin, residuals much shorter
// than the centred vectors. Also two rows, d = 1, d = 5 and d = 97, and a
// rebuild after invalidate() on a stream other than the resources' own.
#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "BoundedTestCompare.h"
#include "TestUtils.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/ResidualCorpus.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

using faiss_ext::gpu::kResidualTileRows;
using faiss_ext::gpu::ResidualCorpus;
using faiss_ext::gpu::residualPartitionCount;
using faiss_ext::gpu::ResidualView;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

/// n x d: `clusters` Gaussian clusters (unit deviation per coordinate)
/// around centres of norm centreNorm in random directions, all shifted by
/// `offset` in every coordinate (data far from the origin).
std::vector<float> gaussianClusters(int64_t n, int d, int clusters, double centreNorm,
                                    double offset, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> centres(size_t(clusters) * d);
    for (int c = 0; c < clusters; ++c) {
        double sq = 0.0;
        for (int j = 0; j < d; ++j) {
            centres[size_t(c) * d + j] = normal(rng);
            sq += centres[size_t(c) * d + j] * centres[size_t(c) * d + j];
        }
        for (int j = 0; j < d; ++j) centres[size_t(c) * d + j] *= centreNorm / std::sqrt(sq);
    }
    std::uniform_int_distribution<int> pick(0, clusters - 1);
    std::vector<float> x(size_t(n) * d);
    for (int64_t i = 0; i < n; ++i) {
        const int c = pick(rng);
        for (int j = 0; j < d; ++j) {
            x[size_t(i) * d + j] = float(offset + centres[size_t(c) * d + j] + normal(rng));
        }
    }
    return x;
}

template <class T>
std::vector<T> download(const T* p, size_t n) {
    std::vector<T> h(n);
    FAISS_EXT_CUDA_CHECK(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
    return h;
}

/// A residual view's arrays on the host.
struct HostView {
    ResidualView v;
    std::vector<float> mean, centres, residuals, sqNorms;
    std::vector<uint32_t> ids;
    std::vector<int32_t> tilePartition;
    std::vector<float2> tileRadii;
    int64_t tiles = 0;
};

HostView fetch(const ResidualView& v) {
    HostView h;
    h.v = v;
    h.tiles = v.rows / kResidualTileRows;
    h.mean = download(v.mean, size_t(v.d));
    h.centres = download(v.centres, size_t(v.partitions) * v.d);
    h.residuals = download(v.residuals, size_t(v.rows) * v.d);
    h.sqNorms = download(v.centredSqNorms, size_t(v.rows));
    h.ids = download(v.ids, size_t(v.rows));
    h.tilePartition = download(v.tilePartition, size_t(h.tiles));
    h.tileRadii = download(v.tileRadii, size_t(h.tiles));
    return h;
}

double norm(const float* r, int d) {
    double s = 0.0;
    for (int j = 0; j < d; ++j) s += double(r[j]) * double(r[j]);
    return std::sqrt(s);
}

uint32_t bitsOf(float f) {
    uint32_t b = 0;
    std::memcpy(&b, &f, sizeof(b));
    return b;
}

/// (a) ids a permutation, padding rows inert; (b) residuals TF32; (e)
/// partitions contiguous, each padded and sorted by |r|.
void checkLayout(const HostView& h, int64_t nb, const std::string& what) {
    const int d = h.v.d;
    ASSERT_EQ(h.v.rows % kResidualTileRows, 0) << what;
    ASSERT_GE(h.v.rows, nb) << what;
    std::vector<char> seen(size_t(nb), 0);
    int64_t real = 0;
    for (int64_t pos = 0; pos < h.v.rows; ++pos) {
        const float* r = h.residuals.data() + pos * d;
        for (int j = 0; j < d; ++j) {
            ASSERT_EQ(bitsOf(r[j]) & 0x1FFFu, 0u) << what << ": row " << pos << " not TF32";
        }
        const uint32_t id = h.ids[size_t(pos)];
        const int32_t p = h.tilePartition[size_t(pos / kResidualTileRows)];
        ASSERT_TRUE(p >= 0 && p < h.v.partitions) << what;
        if (id == UINT32_MAX) {
            EXPECT_TRUE(std::isinf(h.sqNorms[size_t(pos)]) && h.sqNorms[size_t(pos)] > 0) << what;
            EXPECT_EQ(norm(r, d), 0.0) << what << ": padding row " << pos;
            // Padding ends its partition: the next real row starts a tile of another.
            const bool nextReal = pos + 1 < h.v.rows && h.ids[size_t(pos + 1)] != UINT32_MAX;
            if (nextReal) {
                ASSERT_EQ((pos + 1) % kResidualTileRows, 0) << what << ": padding inside a tile";
                ASSERT_NE(h.tilePartition[size_t((pos + 1) / kResidualTileRows)], p) << what;
            }
            continue;
        }
        ASSERT_LT(int64_t(id), nb) << what;
        ASSERT_FALSE(seen[id]) << what << ": id " << id << " twice";
        seen[id] = 1;
        ++real;
        if (pos > 0 && h.ids[size_t(pos - 1)] != UINT32_MAX &&
            h.tilePartition[size_t((pos - 1) / kResidualTileRows)] == p) {
            EXPECT_GE(norm(r, d), norm(r - d, d) * (1 - 1e-6)) << what << ": unsorted at " << pos;
        }
    }
    EXPECT_EQ(real, nb) << what;
    for (int64_t t = 1; t < h.tiles; ++t) {
        ASSERT_LE(h.tilePartition[size_t(t - 1)], h.tilePartition[size_t(t)]) << what;
    }
}

struct MeanNorms {
    double residual = 0.0;  ///< mean |r| over the rows
    double centred = 0.0;   ///< mean |x - m| over the rows
};

/// (c) the tile radii bound every row; (d) the centred norms are |x - m|^2
/// rounded down; (f) the maxima bound their arrays. Returns the mean norms.
MeanNorms checkBounds(const HostView& h, const std::vector<float>& x, int64_t nb,
                      const std::string& what) {
    const int d = h.v.d;
    MeanNorms mean;
    double maxSq = 0.0;
    for (int64_t pos = 0; pos < h.v.rows; ++pos) {
        const uint32_t id = h.ids[size_t(pos)];
        if (id == UINT32_MAX) continue;
        const int64_t t = pos / kResidualTileRows;
        const float* c = h.centres.data() + size_t(h.tilePartition[size_t(t)]) * d;
        const float* r = h.residuals.data() + pos * d;
        double err = 0.0, centredSq = 0.0;
        for (int j = 0; j < d; ++j) {
            const double a = double(x[size_t(id) * d + j]) - double(h.mean[size_t(j)]);
            const double e = a - double(c[j]) - double(r[j]);
            err += e * e;
            centredSq += a * a;
        }
        const double rn = norm(r, d);
        EXPECT_LE(std::sqrt(err), double(h.tileRadii[size_t(t)].y)) << what << ": row " << pos;
        EXPECT_LE(rn, double(h.tileRadii[size_t(t)].x)) << what << ": row " << pos;
        const double sq = double(h.sqNorms[size_t(pos)]);
        EXPECT_LE(sq, centredSq) << what << ": row " << pos;
        EXPECT_GE(sq, centredSq * (1 - 1e-6)) << what << ": row " << pos;
        maxSq = std::max(maxSq, sq);
        mean.residual += rn / double(nb);
        mean.centred += std::sqrt(centredSq) / double(nb);
    }
    EXPECT_EQ(h.v.maxCentredSqNorm, maxSq) << what;
    double maxRho = 0.0;
    for (int64_t t = 0; t < h.tiles; ++t) maxRho = std::max(maxRho, double(h.tileRadii[t].x));
    EXPECT_EQ(h.v.maxResidualNorm, maxRho) << what;
    double maxCentre = 0.0;
    for (int64_t p = 0; p < h.v.partitions; ++p) {
        maxCentre = std::max(maxCentre, norm(h.centres.data() + p * d, d));
    }
    EXPECT_GE(h.v.maxCentreNorm, maxCentre) << what;
    EXPECT_LE(h.v.maxCentreNorm, maxCentre * (1 + 1e-6) + 1e-30) << what;
    return mean;
}

/// The mean the corpus stores is the data's, to FP32 rounding.
void checkMean(const HostView& h, const std::vector<float>& x, int64_t nb,
               const std::string& what) {
    const int d = h.v.d;
    for (int j = 0; j < d; ++j) {
        double s = 0.0, scale = 0.0;
        for (int64_t i = 0; i < nb; ++i) {
            s += double(x[size_t(i) * d + j]);
            scale = std::max(scale, std::fabs(double(x[size_t(i) * d + j])));
        }
        EXPECT_NEAR(double(h.mean[size_t(j)]), s / double(nb), 1e-6 * scale + 1e-30) << what;
    }
}

/// Builds the view of x (nb x d) on `stream`, checks everything, returns
/// the mean norms.
MeanNorms viewAndCheck(ResidualCorpus& corpus, StandardGpuResources& res, cudaStream_t stream,
                       const std::vector<float>& x, int64_t nb, int d, const std::string& what) {
    DeviceCopy<float> dx(x);
    ResidualView v;
    const bool built = corpus.view(res.getResources().get(), 0, stream, dx.p, nb, d, &v);
    EXPECT_TRUE(built) << what;
    if (!built) return MeanNorms();
    EXPECT_EQ(v.d, d) << what;
    EXPECT_EQ(v.partitions, residualPartitionCount(nb)) << what;
    const HostView h = fetch(v);
    checkLayout(h, nb, what);
    checkMean(h, x, nb, what);
    return checkBounds(h, x, nb, what);
}

}  // namespace

TEST(GpuResidualCorpus, PartitionCount) {
    EXPECT_EQ(residualPartitionCount(2), 1);
    EXPECT_EQ(residualPartitionCount(6143), 1);
    EXPECT_EQ(residualPartitionCount(6144), 2);  // 1.5 rounds up
    EXPECT_EQ(residualPartitionCount(204800), 50);
    EXPECT_EQ(residualPartitionCount(int64_t(4096) * 4096), 4096);
    EXPECT_EQ(residualPartitionCount(int64_t(1) << 31), 4096);
}

TEST(GpuResidualCorpus, FarClusters) {
    // Clusters of radius about sqrt(d) = 5.7 around centres of norm 50, the
    // whole set 100 away from the origin in every coordinate: 25 clusters
    // for 50 partitions (5 for 10 on the small size), so that k-means from
    // sample rows finds nearly every cluster (with as many partitions as
    // clusters, the clusters no initial centre falls in share one and keep
    // residuals of the clusters' distances).
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    cudaStream_t stream = res.getResources()->getDefaultStream(0);
    const int d = 32;
    const int64_t nb = sized<int64_t>(204800, 40960);
    const int clusters = int(residualPartitionCount(nb) / 2);
    const auto x = gaussianClusters(nb, d, clusters, 50.0, 100.0, kSeed);
    ResidualCorpus corpus;
    const MeanNorms m = viewAndCheck(corpus, res, stream, x, nb, d, "far clusters");
    EXPECT_LT(m.residual, 0.5 * m.centred)
        << "mean |r| " << m.residual << ", mean |x - m| " << m.centred;
    // A second view returns the same copy without building again.
    ResidualView a, b;
    DeviceCopy<float> dx(x);
    ASSERT_TRUE(corpus.view(res.getResources().get(), 0, stream, dx.p, nb, d, &a));
    ASSERT_TRUE(corpus.view(res.getResources().get(), 0, stream, dx.p, nb, d, &b));
    EXPECT_EQ(a.residuals, b.residuals);
    EXPECT_EQ(a.rows, b.rows);
}

TEST(GpuResidualCorpus, EdgeShapes) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    cudaStream_t stream = res.getResources()->getDefaultStream(0);
    struct Shape {
        int64_t nb;
        int d;
    };
    for (const Shape s : {Shape{2, 8}, Shape{3000, 1}, Shape{10000, 5}, Shape{9000, 97}}) {
        const std::string what = "nb=" + std::to_string(s.nb) + " d=" + std::to_string(s.d);
        const auto x = gaussianClusters(s.nb, s.d, 3, 20.0, -7.0, kSeed + uint64_t(s.d));
        ResidualCorpus corpus;
        viewAndCheck(corpus, res, stream, x, s.nb, s.d, what);
    }
}

TEST(GpuResidualCorpus, InvalidateRebuildsOnAnotherStream) {
    // After invalidate() the next view builds again, here for other vectors
    // and on a stream that is not the one the cuBLAS handle is bound to.
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 24;
    const int64_t nb = sized<int64_t>(30000, 9000);
    ResidualCorpus corpus;
    const auto x1 = gaussianClusters(nb, d, 8, 30.0, 5.0, kSeed + 1);
    viewAndCheck(corpus, res, res.getResources()->getDefaultStream(0), x1, nb, d, "first build");
    corpus.invalidate();
    const auto x2 = gaussianClusters(nb + 77, d, 8, 30.0, -5.0, kSeed + 2);
    cudaStream_t own = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), cudaSuccess);
    viewAndCheck(corpus, res, own, x2, nb + 77, d, "rebuilt on another stream");
    corpus.invalidate();
    EXPECT_EQ(cudaStreamDestroy(own), cudaSuccess);
}
