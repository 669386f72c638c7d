// The residual copy of a corpus (see ResidualCorpus.h).
//
// The build, in order: the mean m; k-means on x - m (Lloyd iterations on a
// strided sample, then every row assigned to its nearest centre); per row
// the residual e = x - m - c_p in double and its TF32 rounding r; the rows
// sorted by (partition, |r|); each partition padded to whole tiles; the
// resident rows written at their padded places; per tile the radii that
// bound |r| and |e - r| over its rows.
#include "faiss_ext/gpu/impl/flat/ResidualCorpus.h"

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "faiss_ext/gpu/impl/flat/CentredCorpus.h"
#include "faiss_ext/gpu/impl/flat/DeviceCorpus.h"
#include "faiss_ext/gpu/impl/flat/DeviceKMeans.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/Tf32Rounding.cuh"
#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

namespace faiss_ext {
namespace gpu {

namespace {

const char* const kWho = "bounded TF32 search";

constexpr int kWarpsPerBlock = 8;  // the warp-per-row kernels: 256 threads

/// The radii are computed in double with rounding errors of a few d units
/// of 2^-53: the factor 1 + 2^-30 covers them for any d below 2^20 and the
/// floor covers underflow, before the round-up to float.
constexpr double kRadiusMargin = 1.0 + 1.0 / 1073741824.0;  // 1 + 2^-30
constexpr double kRadiusFloor = 1e-30;
/// |x - m|^2 in double is within a few d units of 2^-53 of the exact one:
/// shrunk by 2^-40 it is below it, and rounding down keeps it there.
constexpr double kSqNormShrink = 1.0 - 1.0 / 1099511627776.0;  // 1 - 2^-40
/// e = fl(fl(x - m) - c) is within 2^-53 (|x - m| + |e|) of the exact
/// residual (two roundings, by the triangle inequality); twice that, so
/// that the norms' own rounding is covered too, is added to |e - r|.
constexpr double kResidualRounding = 1.0 / 4503599627370496.0;  // 2^-52

struct RowSums {
    double tf32Sq = 0.0;      ///< |r|^2
    double errorSq = 0.0;     ///< |e - r|^2
    double centredSq = 0.0;   ///< |x - m|^2
    double residualSq = 0.0;  ///< |e|^2
};

/// Row xRow's residual against centre c, one warp: coordinates in double
/// (e = double(x) - double(m) - double(c)), r = tf32(float(e)) written to
/// out when given; every lane gets the row's sums of squares. The sort keys
/// and the resident rows both come from here, so they agree bit for bit.
__device__ RowSums residualRow(const float* xRow, const float* mean, const float* c, int d,
                               float* out) {
    RowSums s;
    for (int j = threadIdx.x & 31; j < d; j += 32) {
        const double a = double(xRow[j]) - double(mean[j]);
        const double e = a - double(c[j]);
        const float r = roundToTf32(float(e));
        if (out) out[j] = r;
        const double err = e - double(r);
        s.tf32Sq += double(r) * double(r);
        s.errorSq += err * err;
        s.centredSq += a * a;
        s.residualSq += e * e;
    }
    s.tf32Sq = warpSumAll(s.tf32Sq);
    s.errorSq = warpSumAll(s.errorSq);
    s.centredSq = warpSumAll(s.centredSq);
    s.residualSq = warpSumAll(s.residualSq);
    return s;
}

__device__ __forceinline__ unsigned long long doubleBits(double v) {
    return static_cast<unsigned long long>(__double_as_longlong(v));
}

/// One warp per row: key = (partition << 32) | bits of |r| rounded up (a
/// non-negative float's bits order as its value), value = the row;
/// counts[partition] += 1.
__global__ void sortKeysKernel(const float* x, int64_t nb, int d, const float* mean,
                               const float* centres, const int32_t* assign, uint64_t* keys,
                               uint32_t* rows, unsigned* counts) {
    for (int64_t r = firstWarpRow(); r < nb; r += gridWarps()) {
        const int32_t p = assign[r];
        const RowSums s = residualRow(x + r * d, mean, centres + int64_t(p) * d, d, nullptr);
        if ((threadIdx.x & 31) == 0) {
            const float norm = __double2float_ru(sqrt(s.tf32Sq));
            keys[r] = (uint64_t(uint32_t(p)) << 32) | __float_as_uint(norm);
            rows[r] = uint32_t(r);
            atomicAdd(&counts[p], 1u);
        }
    }
}

struct FillArgs {
    const float* x;
    int64_t nb;
    int d;
    const float* mean;
    const float* centres;
    const uint64_t* keys;        ///< sorted
    const uint32_t* order;       ///< the rows in key order
    const int64_t* start;        ///< per partition: its first sorted index
    const int64_t* paddedStart;  ///< per partition: its first resident row
    float* residuals;
    float* sqNorms;
    uint32_t* ids;
    unsigned long long* tileRho;     ///< per tile: the largest |r| (double bits)
    unsigned long long* tileLambda;  ///< per tile: the largest |e - r| bound (double bits)
    unsigned long long* maxSqNorm;   ///< the largest finite sqNorms entry (float bits)
};

/// One warp per sorted index i: the row's residual, norms and id at
/// paddedStart[p] + (i - start[p]); its radii into its tile's maxima (the
/// bits of non-negative doubles order as their values).
__global__ void fillRowsKernel(FillArgs a) {
    for (int64_t i = firstWarpRow(); i < a.nb; i += gridWarps()) {
        const int p = int(a.keys[i] >> 32);
        const uint32_t row = a.order[i];
        const int64_t pos = a.paddedStart[p] + (i - a.start[p]);
        const RowSums s = residualRow(a.x + int64_t(row) * a.d, a.mean,
                                      a.centres + int64_t(p) * a.d, a.d, a.residuals + pos * a.d);
        if ((threadIdx.x & 31) != 0) continue;
        const double rho = sqrt(s.tf32Sq);
        const double lambda =
            sqrt(s.errorSq) + kResidualRounding * (sqrt(s.centredSq) + sqrt(s.residualSq));
        const float sq = __double2float_rd(s.centredSq * kSqNormShrink);
        a.sqNorms[pos] = sq;
        a.ids[pos] = row;
        atomicMax(&a.tileRho[pos / kResidualTileRows], doubleBits(rho));
        atomicMax(&a.tileLambda[pos / kResidualTileRows], doubleBits(lambda));
        if (isfinite(sq)) atomicMax(a.maxSqNorm, (unsigned long long)__float_as_uint(sq));
    }
}

__global__ void fillKernel(float* p, int64_t n, float v) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
         t += int64_t(gridDim.x) * blockDim.x) {
        p[t] = v;
    }
}

/// Per tile: {rho, lambda} rounded up with their margins ({0, 0} when its
/// first row, hence every row, is padding); *maxRho = the largest rho.
__global__ void tileRadiiKernel(const unsigned long long* rhoBits,
                                const unsigned long long* lambdaBits, const uint32_t* ids,
                                int64_t tiles, float2* radii, unsigned long long* maxRho) {
    for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < tiles;
         t += int64_t(gridDim.x) * blockDim.x) {
        float2 r = make_float2(0.f, 0.f);
        if (ids[t * kResidualTileRows] != UINT32_MAX) {
            const double rho = __longlong_as_double(static_cast<long long>(rhoBits[t]));
            const double lambda = __longlong_as_double(static_cast<long long>(lambdaBits[t]));
            r.x = __double2float_ru(rho * kRadiusMargin + kRadiusFloor);
            r.y = __double2float_ru(lambda * kRadiusMargin + kRadiusFloor);
        }
        radii[t] = r;
        atomicMax(maxRho, (unsigned long long)__float_as_uint(r.x));
    }
}

/// *maxBits = the largest |c_p| (double bits), one warp per centre.
__global__ void maxCentreNormKernel(const float* centres, int64_t P, int d,
                                    unsigned long long* maxBits) {
    for (int64_t p = firstWarpRow(); p < P; p += gridWarps()) {
        double s = 0.0;
        for (int j = threadIdx.x & 31; j < d; j += 32) {
            const double c = double(centres[p * d + j]);
            s += c * c;
        }
        s = warpSumAll(s);
        if ((threadIdx.x & 31) == 0) atomicMax(maxBits, doubleBits(sqrt(s)));
    }
}

/// What every step of one build needs (the k-means job's fields).
using Build = KMeansJob;

/// Partitions and their padded places (host).
struct Layout {
    std::vector<int64_t> starts;  ///< P first sorted indices, then P first resident rows
    std::vector<int32_t> tilePartition;
    int64_t rows = 0;
};

/// The resident arrays of one build, moved into the corpus when complete.
using Resident = ResidualCorpus::Arrays;

/// The most resident bytes a corpus of nb rows can take (every partition
/// padded by kResidualTileRows - 1 rows).
double residentBytes(int64_t nb, int d, int64_t P) {
    const int64_t rows = (nb + P * (kResidualTileRows - 1) + kResidualTileRows - 1) /
                         kResidualTileRows * kResidualTileRows;
    const double tiles = double(rows / kResidualTileRows);
    return double(rows) * (double(d) * sizeof(float) + sizeof(float) + sizeof(uint32_t)) +
           tiles * (sizeof(int32_t) + sizeof(float2)) + double(P + 1) * d * sizeof(float);
}

/// Radix sort of (keys, rows) over the key bits that can be set: 32 of
/// |r| and those of the partitions.
void sortPairs(const Build& b, const uint64_t* keysIn, uint64_t* keysOut, const uint32_t* rowsIn,
               uint32_t* rowsOut) {
    int endBit = 33;
    while ((int64_t(1) << (endBit - 32)) < b.P) ++endBit;
    size_t bytes = 0;
    FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keysIn, keysOut, rowsIn,
                                                         rowsOut, b.nb, 0, endBit, b.stream));
    TempBuffer<char> temp(b.res, b.device, std::max<size_t>(bytes, 1), b.stream);
    FAISS_EXT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        temp.data(), bytes, keysIn, keysOut, rowsIn, rowsOut, b.nb, 0, endBit, b.stream));
}

/// Every row assigned to its nearest centre, then keys and rows sorted by
/// (partition, |r|) into keys / order; returns the partitions' row counts.
std::vector<unsigned> sortByPartition(const Build& b, const float* mean, const float* centres,
                                      uint64_t* keys, uint32_t* order) {
    TempBuffer<uint64_t> keysIn(b.res, b.device, size_t(b.nb), b.stream);
    TempBuffer<uint32_t> rowsIn(b.res, b.device, size_t(b.nb), b.stream);
    TempBuffer<unsigned> counts(b.res, b.device, size_t(b.P), b.stream);
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(counts.data(), 0, sizeof(unsigned) * b.P, b.stream));
    {
        TempBuffer<int32_t> assign(b.res, b.device, size_t(b.nb), b.stream);
        assignNearest(b, b.nb, mean, centres, assign.data());
        sortKeysKernel<<<gridStrideBlocks(b.nb, kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
                         b.stream>>>(b.x, b.nb, b.d, mean, centres, assign.data(), keysIn.data(),
                                     rowsIn.data(), counts.data());
        FAISS_EXT_CUDA_CHECK_LAUNCH();
    }
    sortPairs(b, keysIn.data(), keys, rowsIn.data(), order);
    std::vector<unsigned> hostCounts(size_t(b.P));
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostCounts.data(), counts.data(), sizeof(unsigned) * b.P,
                                         cudaMemcpyDeviceToHost, b.stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(b.stream));
    return hostCounts;
}

/// Each partition's rows rounded up to whole tiles (an empty one takes none).
Layout layoutPartitions(const std::vector<unsigned>& counts) {
    const size_t P = counts.size();
    Layout l;
    l.starts.resize(2 * P);
    int64_t sorted = 0;
    for (size_t p = 0; p < P; ++p) {
        const int64_t tiles = (int64_t(counts[p]) + kResidualTileRows - 1) / kResidualTileRows;
        l.starts[p] = sorted;
        l.starts[P + p] = l.rows;
        l.tilePartition.insert(l.tilePartition.end(), size_t(tiles), int32_t(p));
        sorted += counts[p];
        l.rows += tiles * kResidualTileRows;
    }
    return l;
}

/// The resident rows: padding first (zero residuals, +inf norms,
/// UINT32_MAX ids), then every real row at its place; per-tile maxima into
/// tileRho / tileLambda, the largest finite norm into maxSqNorm.
void fillRows(const Build& b, const Layout& l, const uint64_t* keys, const uint32_t* order,
              Resident& r, unsigned long long* tileBits, unsigned long long* maxSqNorm) {
    const int64_t tiles = l.rows / kResidualTileRows;
    TempBuffer<int64_t> starts(b.res, b.device, l.starts.size(), b.stream);
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(starts.data(), l.starts.data(),
                                         sizeof(int64_t) * l.starts.size(), cudaMemcpyHostToDevice,
                                         b.stream));
    FAISS_EXT_CUDA_CHECK(
        cudaMemsetAsync(r.residuals.data(), 0, sizeof(float) * size_t(l.rows) * b.d, b.stream));
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(r.ids.data(), 0xFF, sizeof(uint32_t) * l.rows, b.stream));
    FAISS_EXT_CUDA_CHECK(cudaMemsetAsync(tileBits, 0, sizeof(*tileBits) * 2 * tiles, b.stream));
    fillKernel<<<gridStrideBlocks(l.rows), 256, 0, b.stream>>>(
        r.sqNorms.data(), l.rows, std::numeric_limits<float>::infinity());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    const FillArgs a{b.x,
                     b.nb,
                     b.d,
                     r.mean.data(),
                     r.centres.data(),
                     keys,
                     order,
                     starts.data(),
                     starts.data() + b.P,
                     r.residuals.data(),
                     r.sqNorms.data(),
                     r.ids.data(),
                     tileBits,
                     tileBits + tiles,
                     maxSqNorm};
    fillRowsKernel<<<gridStrideBlocks(b.nb, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, b.stream>>>(a);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    // (l.starts outlives its copy: fillCopy synchronises the stream.)
}

/// The resident arrays of the sorted rows (layout l) and the tiles'
/// partitions.
void allocateCopy(const Build& b, const Layout& l, Resident& r) {
    const size_t tiles = size_t(l.rows / kResidualTileRows);
    r.residuals.allocate(b.res, b.device, size_t(l.rows) * b.d, kWho, "the residual corpus");
    r.sqNorms.allocate(b.res, b.device, size_t(l.rows), kWho, "the residual corpus' norms");
    r.ids.allocate(b.res, b.device, size_t(l.rows), kWho, "the residual corpus' ids");
    r.tilePartition.allocate(b.res, b.device, tiles, kWho, "the residual tiles");
    r.tileRadii.allocate(b.res, b.device, tiles, kWho, "the residual tiles' radii");
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(r.tilePartition.data(), l.tilePartition.data(),
                                         sizeof(int32_t) * tiles, cudaMemcpyHostToDevice,
                                         b.stream));
}

/// The view's maxima from their device words ([0]: max |c_p| as double
/// bits, [1]: max rho, [2]: max finite sqNorms, as float bits); synchronises
/// the stream.
void readMaxima(const Build& b, const unsigned long long* maxima, ResidualView& v) {
    unsigned long long bits[3] = {0, 0, 0};
    FAISS_EXT_CUDA_CHECK(
        cudaMemcpyAsync(bits, maxima, sizeof(bits), cudaMemcpyDeviceToHost, b.stream));
    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(b.stream));
    double centreNorm = 0.0;
    float rho = 0.f, sqNorm = 0.f;
    const uint32_t rhoBits = uint32_t(bits[1]), sqBits = uint32_t(bits[2]);
    std::memcpy(&centreNorm, &bits[0], sizeof(double));
    std::memcpy(&rho, &rhoBits, sizeof(float));
    std::memcpy(&sqNorm, &sqBits, sizeof(float));
    v.maxCentreNorm = centreNorm * kRadiusMargin;
    v.maxResidualNorm = double(rho);
    v.maxCentredSqNorm = double(sqNorm);
}

/// The resident copy of the sorted rows (layout l): rows, tile radii and the
/// view's maxima. Synchronises the stream (the host layout is read by
/// copies queued on it).
void fillCopy(const Build& b, const Layout& l, const uint64_t* keys, const uint32_t* order,
              Resident& r, ResidualView& v) {
    const int64_t tiles = l.rows / kResidualTileRows;
    allocateCopy(b, l, r);
    TempBuffer<unsigned long long> maxima(b.res, b.device, 3, b.stream);
    TempBuffer<unsigned long long> tileBits(b.res, b.device, size_t(2 * tiles), b.stream);
    FAISS_EXT_CUDA_CHECK(
        cudaMemsetAsync(maxima.data(), 0, 3 * sizeof(unsigned long long), b.stream));
    fillRows(b, l, keys, order, r, tileBits.data(), maxima.data() + 2);
    tileRadiiKernel<<<gridStrideBlocks(tiles), 256, 0, b.stream>>>(
        tileBits.data(), tileBits.data() + tiles, r.ids.data(), tiles, r.tileRadii.data(),
        maxima.data() + 1);
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    maxCentreNormKernel<<<gridStrideBlocks(b.P, kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
                          b.stream>>>(r.centres.data(), b.P, b.d, maxima.data());
    FAISS_EXT_CUDA_CHECK_LAUNCH();
    readMaxima(b, maxima.data(), v);
}

/// The whole build into r (resident, not yet the corpus's) and v.
void buildCopy(const Build& b, Resident& r, ResidualView& v) {
    r.mean.allocate(b.res, b.device, size_t(b.d), kWho, "the corpus mean");
    r.centres.allocate(b.res, b.device, size_t(b.P) * b.d, kWho, "the residual centres");
    corpusMean(b.res, b.device, b.stream, b.x, b.nb, b.d, r.mean.data());
    kmeansCentres(b, r.mean.data(), r.centres.data());
    TempBuffer<uint64_t> keys(b.res, b.device, size_t(b.nb), b.stream);
    TempBuffer<uint32_t> order(b.res, b.device, size_t(b.nb), b.stream);
    const Layout layout = layoutPartitions(
        sortByPartition(b, r.mean.data(), r.centres.data(), keys.data(), order.data()));
    fillCopy(b, layout, keys.data(), order.data(), r, v);
    v.d = b.d;
    v.mean = r.mean.data();
    v.centres = r.centres.data();
    v.partitions = b.P;
    v.residuals = r.residuals.data();
    v.centredSqNorms = r.sqNorms.data();
    v.ids = r.ids.data();
    v.rows = layout.rows;
    v.tilePartition = r.tilePartition.data();
    v.tileRadii = r.tileRadii.data();
}

}  // namespace

int64_t residualPartitionCount(int64_t nb) {
    const int64_t p = std::llround(double(nb) / 4096.0);
    return std::min<int64_t>(4096, std::max<int64_t>(1, p));
}

bool ResidualCorpus::view(GpuResources* res, int device, cudaStream_t stream, const float* vectors,
                          int64_t nb, int d, ResidualView* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!decided_) {
        useful_ = build_(res, device, stream, vectors, nb, d);
        decided_ = true;
    }
    if (!useful_) return false;
    *out = view_;
    return true;
}

bool ResidualCorpus::build_(GpuResources* res, int device, cudaStream_t stream,
                            const float* vectors, int64_t nb, int d) {
    if (nb < 2 || d < 1 || nb >= (int64_t(1) << 32)) return false;
    DeviceScope scope(device);
    const Build b{res, device, stream, vectors, nb, d, residualPartitionCount(nb)};
    size_t freeBytes = 0, totalBytes = 0;
    FAISS_EXT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
    if (residentBytes(nb, d, b.P) > kCopyMemoryShare * double(freeBytes)) return false;
    // Built into locals: a failure (it throws) leaves the corpus empty.
    Resident r;
    ResidualView v;
    buildCopy(b, r, v);
    arrays_ = std::move(r);
    view_ = v;
    return true;
}

bool ResidualCorpus::built() {
    std::lock_guard<std::mutex> lock(mutex_);
    return decided_ && useful_;
}

void ResidualCorpus::invalidate() {
    std::lock_guard<std::mutex> lock(mutex_);
    decided_ = false;
    useful_ = false;
    arrays_ = Arrays();  // (the old arrays go with the temporary: released)
    view_ = ResidualView();
}

}  // namespace gpu
}  // namespace faiss_ext
