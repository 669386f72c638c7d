#include "AnnData.h"

#include <faiss/VectorTransform.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace faiss_ext {
namespace bench {

namespace {

/// One generator per (seed, stream, row): the same rows for any thread count.
std::mt19937_64 rowRng(uint64_t seed, uint64_t stream, int64_t row) {
    std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(stream), uint32_t(row),
                      uint32_t(uint64_t(row) >> 32)};
    return std::mt19937_64(seq);
}

struct HardMixture {
    int d = 0;
    std::vector<float> centres;      // clusters x d
    std::vector<float> maps;         // clusters x d x d (by column: column j of a map at j d;
                                     // scales folded in)
    std::vector<double> cumulative;  // cumulative weights
};

HardMixture makeHardMixture(const HardSpec& s) {
    HardMixture m;
    m.d = s.d;
    m.centres.resize(size_t(s.clusters) * s.d);
    m.maps.resize(size_t(s.clusters) * s.d * s.d);
    m.cumulative.resize(s.clusters);
    std::mt19937_64 rng(s.seed);
    std::normal_distribution<float> g(0.f, 1.f);
    std::uniform_real_distribution<float> u(std::log(s.minScale), std::log(s.maxScale));
    double total = 0;
    for (int c = 0; c < s.clusters; ++c) {
        for (int j = 0; j < s.d; ++j) m.centres[size_t(c) * s.d + j] = g(rng);
        std::vector<float> scale(s.d);
        for (auto& v : scale) v = std::exp(u(rng));
        float* a = &m.maps[size_t(c) * s.d * s.d];
        float norm = 1.f / std::sqrt(float(s.d));
        for (int r = 0; r < s.d; ++r)
            for (int j = 0; j < s.d; ++j) a[size_t(r) * s.d + j] = g(rng) * norm * scale[j];
        total += std::pow(double(c + 1), -s.sizeExponent);
        m.cumulative[c] = total;
    }
    for (auto& v : m.cumulative) v /= total;
    // drawn row by row, kept by column (addColumns)
    std::vector<float> byColumn(m.maps.size());
    for (int c = 0; c < s.clusters; ++c)
        for (int r = 0; r < s.d; ++r)
            for (int j = 0; j < s.d; ++j)
                byColumn[(size_t(c) * s.d + j) * s.d + r] = m.maps[(size_t(c) * s.d + r) * s.d + j];
    m.maps.swap(byColumn);
    // the rank order of the sizes is not the order of the centres
    return m;
}

/// row = centre + A z for A given by columns (aT: d x d, column j at
/// aT + j d): each row[r] summed over j in order, as the row-wise product
/// sums it, so the floats are the same; the loop over r vectorises.
void addColumns(const float* __restrict__ aT, const float* __restrict__ z, int d,
                const float* __restrict__ centre, float* __restrict__ row) {
    for (int r = 0; r < d; ++r) row[r] = centre[r];
    for (int j = 0; j < d; ++j) {
        const float zj = z[j];
        const float* __restrict__ col = aT + size_t(j) * d;
        for (int r = 0; r < d; ++r) row[r] += col[r] * zj;
    }
}

}  // namespace

Matrix generateHard(const HardSpec& spec, int64_t n, uint64_t stream) {
    return generateHardRows(spec, 0, n, stream);
}

Matrix generateHardRows(const HardSpec& spec, int64_t row0, int64_t n, uint64_t stream) {
    if (spec.d <= 0 || spec.clusters <= 0 || n < 0 || row0 < 0)
        throw std::invalid_argument("generateHard: d, clusters must be > 0 and n, row0 >= 0");
    HardMixture m = makeHardMixture(spec);
    Matrix out;
    out.n = n;
    out.d = spec.d;
    out.x.resize(size_t(n) * spec.d);
    int d = spec.d;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        auto rng = rowRng(spec.seed, stream, row0 + i);
        std::uniform_real_distribution<double> u(0.0, 1.0);
        std::normal_distribution<float> g(0.f, 1.f);
        int c = int(std::lower_bound(m.cumulative.begin(), m.cumulative.end(), u(rng)) -
                    m.cumulative.begin());
        c = std::min(c, spec.clusters - 1);
        std::vector<float> z(d);
        for (auto& v : z) v = g(rng);
        addColumns(&m.maps[size_t(c) * d * d], z.data(), d,
                   &m.centres[size_t(c) * d], &out.x[size_t(i) * d]);
    }
    return out;
}

namespace {

constexpr int kSide = 28;

float pixelAt(const float* img, float x, float y) {
    int x0 = int(std::floor(x)), y0 = int(std::floor(y));
    float fx = x - x0, fy = y - y0;
    auto at = [&](int xx, int yy) {
        return (xx < 0 || yy < 0 || xx >= kSide || yy >= kSide) ? 0.f : img[yy * kSide + xx];
    };
    return (1 - fx) * (1 - fy) * at(x0, y0) + fx * (1 - fy) * at(x0 + 1, y0) +
           (1 - fx) * fy * at(x0, y0 + 1) + fx * fy * at(x0 + 1, y0 + 1);
}

/// A smooth displacement field: a 4 x 4 grid of random offsets, bilinear.
struct Elastic {
    float dx[4][4], dy[4][4];
    void at(float u, float v, float& ox, float& oy) const {
        float gx = u / (kSide - 1) * 3, gy = v / (kSide - 1) * 3;
        int x0 = std::min(2, int(gx)), y0 = std::min(2, int(gy));
        float fx = gx - x0, fy = gy - y0;
        auto lerp2 = [&](const float(&f)[4][4]) {
            return (1 - fx) * (1 - fy) * f[y0][x0] + fx * (1 - fy) * f[y0][x0 + 1] +
                   (1 - fx) * fy * f[y0 + 1][x0] + fx * fy * f[y0 + 1][x0 + 1];
        };
        ox = lerp2(dx);
        oy = lerp2(dy);
    }
};

}  // namespace

Matrix augmentImages(const Matrix& images, int64_t count, uint64_t seed) {
    if (images.d != kSide * kSide || images.n <= 0)
        throw std::invalid_argument("augmentImages: needs 28 x 28 images");
    Matrix out;
    out.n = count;
    out.d = images.d;
    out.x.resize(size_t(count) * images.d);
    const float pi = 3.14159265f, c = (kSide - 1) / 2.f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) {
        auto rng = rowRng(seed, 7, i);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        std::normal_distribution<float> g(0.f, 1.f);
        const float* src = &images.x[size_t(i % images.n) * images.d];
        float angle = u(rng) * 12.f * pi / 180.f, scale = 1.f + 0.1f * u(rng);
        float tx = 2.f * u(rng), ty = 2.f * u(rng);
        Elastic e;
        for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
                e.dx[a][b] = g(rng);
                e.dy[a][b] = g(rng);
            }
        float cs = std::cos(angle), sn = std::sin(angle);
        float* dst = &out.x[size_t(i) * images.d];
        for (int v = 0; v < kSide; ++v)
            for (int uu = 0; uu < kSide; ++uu) {
                // inverse map: output pixel -> source position
                float px = (uu - c - tx) / scale, py = (v - c - ty) / scale;
                float sx = cs * px + sn * py + c, sy = -sn * px + cs * py + c;
                float ox, oy;
                e.at(float(uu), float(v), ox, oy);
                float val = pixelAt(src, sx + ox, sy + oy) + 6.f * g(rng);
                dst[v * kSide + uu] = std::min(255.f, std::max(0.f, val));
            }
    }
    return out;
}

void reducePca(Matrix& base, Matrix& queries, int dOut, int64_t trainRows) {
    faiss::PCAMatrix pca(base.d, dOut);
    int64_t nt = std::min(base.n, trainRows);
    pca.train(nt, base.x.data());
    auto apply = [&](Matrix& m) {
        std::vector<float> y(size_t(m.n) * dOut);
        pca.apply_noalloc(m.n, m.x.data(), y.data());
        m.x.swap(y);
        m.d = dOut;
    };
    apply(base);
    apply(queries);
}

}  // namespace bench
}  // namespace faiss_ext
