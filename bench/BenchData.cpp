#include "bench/BenchData.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

namespace faiss_ext {
namespace bench {

namespace {

// SplitMix64: a small counter-based generator, so that every row has its own
// independent stream and the output does not depend on the thread count.
struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in (0, 1].
    double uniform() { return (double((next() >> 11) + 1)) * (1.0 / 9007199254740992.0); }
    // Standard normal (Box-Muller; one value per call, the simplest form).
    float normal() {
        double u1 = uniform(), u2 = uniform();
        return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
};

uint64_t mixSeed(uint64_t a, uint64_t b, uint64_t c) {
    SplitMix64 g{a ^ 0x5851F42D4C957F2Dull};
    uint64_t h = g.next() ^ b;
    g.state = h;
    h = g.next() ^ c;
    g.state = h;
    return g.next();
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw std::runtime_error(path + ": " + what);
}

// A file read through zlib: plain and gzip-compressed files alike.
class Reader {
public:
    explicit Reader(const std::string& path) : path_(path) {
        f_ = gzopen(path.c_str(), "rb");
        if (!f_) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
        gzbuffer(f_, 1 << 20);
    }
    ~Reader() { gzclose(f_); }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    // Reads exactly `bytes`, or returns false at a clean end of file (no byte read).
    bool read(void* dst, size_t bytes) {
        char* p = static_cast<char*>(dst);
        size_t done = 0;
        while (done < bytes) {
            unsigned chunk = unsigned(std::min<size_t>(bytes - done, 1u << 30));
            int got = gzread(f_, p + done, chunk);
            if (got < 0) fail(path_, "read error");
            if (got == 0) break;
            done += size_t(got);
        }
        if (done == 0) return false;
        if (done != bytes) fail(path_, "truncated file");
        return true;
    }

private:
    std::string path_;
    gzFile f_;
};

uint32_t bigEndian32(const unsigned char* b) {
    return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

// .fvecs / .bvecs / .ivecs: each row is int32 d then d values of elemSize bytes.
template <typename Out>
void readVecs(const std::string& path, size_t elemSize, int64_t maxRows, int64_t* nOut, int* dOut,
              std::vector<Out>& out) {
    Reader r(path);
    int32_t d = 0;
    int64_t n = 0;
    std::vector<unsigned char> row;
    int32_t rowD;
    while ((maxRows <= 0 || n < maxRows) && r.read(&rowD, sizeof(rowD))) {
        if (rowD <= 0 || rowD > (1 << 24)) fail(path, "bad row dimension " + std::to_string(rowD));
        if (n == 0) d = rowD;
        if (rowD != d)
            fail(path, "row " + std::to_string(n) + " has dimension " + std::to_string(rowD) +
                               ", expected " + std::to_string(d));
        row.resize(size_t(d) * elemSize);
        if (!r.read(row.data(), row.size())) fail(path, "truncated file");
        size_t base = out.size();
        out.resize(base + size_t(d));
        for (int j = 0; j < d; ++j) {
            if (elemSize == 1) {
                out[base + j] = Out(row[j]);
            } else {
                Out v;
                std::memcpy(&v, row.data() + size_t(j) * elemSize, sizeof(Out));
                out[base + j] = v;
            }
        }
        ++n;
    }
    if (n == 0) fail(path, "no vectors");
    *nOut = n;
    *dOut = d;
}

Matrix readFbin(const std::string& path, int64_t maxRows) {
    Reader r(path);
    int32_t hdr[2];
    if (!r.read(hdr, sizeof(hdr))) fail(path, "empty file");
    if (hdr[0] <= 0 || hdr[1] <= 0) fail(path, "bad .fbin header");
    Matrix m;
    m.n = maxRows > 0 ? std::min<int64_t>(hdr[0], maxRows) : hdr[0];
    m.d = hdr[1];
    m.x.resize(size_t(m.n) * m.d);
    if (!r.read(m.x.data(), m.x.size() * sizeof(float))) fail(path, "truncated file");
    return m;
}

Matrix readIdxImages(const std::string& path, int64_t maxRows) {
    Reader r(path);
    unsigned char hdr[16];
    if (!r.read(hdr, sizeof(hdr))) fail(path, "empty file");
    if (bigEndian32(hdr) != 2051) fail(path, "not an IDX image file (magic != 2051)");
    int64_t n = bigEndian32(hdr + 4);
    int d = int(bigEndian32(hdr + 8) * bigEndian32(hdr + 12));
    if (maxRows > 0) n = std::min(n, maxRows);
    std::vector<unsigned char> raw(size_t(n) * d);
    if (!r.read(raw.data(), raw.size())) fail(path, "truncated file");
    Matrix m;
    m.n = n;
    m.d = d;
    m.x.assign(raw.begin(), raw.end());
    return m;
}

}  // namespace

Matrix generateClustered(const ClusteredSpec& spec, int64_t n, uint64_t stream) {
    if (spec.d <= 0 || spec.latentDim <= 0 || spec.clusters <= 0 || n < 0)
        throw std::invalid_argument("generateClustered: bad parameters");
    const int m = std::min(spec.latentDim, spec.d);
    const int d = spec.d;

    // The mixture: centres in the latent space and the latent -> full map.
    std::vector<float> centres(size_t(spec.clusters) * m);
    std::vector<float> map(size_t(d) * m);  // d x m, row major
    SplitMix64 g{mixSeed(spec.seed, ~0ull, 0)};
    for (auto& c : centres) c = g.normal();
    const float mapScale = 1.f / std::sqrt(float(m));
    for (auto& w : map) w = g.normal() * mapScale;

    Matrix out;
    out.n = n;
    out.d = d;
    out.x.resize(size_t(n) * d);
#pragma omp parallel
    {
        std::vector<float> z(m);
#pragma omp for schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            SplitMix64 r{mixSeed(spec.seed, stream, uint64_t(i))};
            // Skewed cluster sizes, as in real data: small ids are more frequent.
            double u = r.uniform();
            int c = std::min(spec.clusters - 1, int(spec.clusters * u * u));
            for (int j = 0; j < m; ++j)
                z[j] = centres[size_t(c) * m + j] + spec.clusterSpread * r.normal();
            float* row = out.x.data() + size_t(i) * d;
            for (int t = 0; t < d; ++t) {
                const float* w = map.data() + size_t(t) * m;
                float acc = 0.f;
                for (int j = 0; j < m; ++j) acc += w[j] * z[j];
                row[t] = acc + spec.noise * r.normal();
            }
        }
    }
    return out;
}

void generateCentresRows(int64_t row0, int64_t m, int d, float* out) {
    if (row0 % kCentresBlockRows != 0 || m < 0 || d <= 0)
        throw std::invalid_argument("generateCentresRows: row0 must be a multiple of the block");
    const int C = 1000;
    std::vector<float> cent(size_t(C) * d);
    {
        std::mt19937 rng(7);
        std::normal_distribution<float> nd(0, 1);
        for (auto& v : cent) v = nd(rng) * 4;
    }
    const int64_t b0 = row0 / kCentresBlockRows, end = row0 + m;
#pragma omp parallel for schedule(dynamic)
    for (int64_t b = b0; b < (end + kCentresBlockRows - 1) / kCentresBlockRows; ++b) {
        std::mt19937_64 rng(1000003ull * uint64_t(b) + 11);
        std::normal_distribution<float> nd(0, 1);
        for (int64_t i = b * kCentresBlockRows; i < std::min(end, (b + 1) * kCentresBlockRows); ++i) {
            const int c = int(rng() % C);
            float* row = out + size_t(i - row0) * d;
            for (int j = 0; j < d; ++j) row[j] = cent[size_t(c) * d + j] + nd(rng);
        }
    }
}

int defaultClusters(int64_t nb) {
    return int(std::max<int64_t>(16, std::min<int64_t>(4096, nb / 500)));
}

Matrix readVectors(const std::string& path, int64_t maxRows) {
    const std::string p = lower(path);
    Matrix m;
    if (endsWith(p, ".fvecs") || endsWith(p, ".fvecs.gz")) {
        readVecs<float>(path, 4, maxRows, &m.n, &m.d, m.x);
    } else if (endsWith(p, ".bvecs") || endsWith(p, ".bvecs.gz")) {
        readVecs<float>(path, 1, maxRows, &m.n, &m.d, m.x);
    } else if (endsWith(p, ".fbin")) {
        m = readFbin(path, maxRows);
    } else if (p.find("idx3-ubyte") != std::string::npos) {
        m = readIdxImages(path, maxRows);
    } else {
        fail(path, "unknown vector format (expected .fvecs, .bvecs, .fbin or *-idx3-ubyte[.gz])");
    }
    return m;
}

IntMatrix readIvecs(const std::string& path, int64_t maxRows) {
    IntMatrix m;
    readVecs<int32_t>(path, 4, maxRows, &m.n, &m.d, m.x);
    return m;
}

namespace {
struct File {
    FILE* f;
    std::string path;
    explicit File(const std::string& p) : f(std::fopen(p.c_str(), "wb")), path(p) {
        if (!f) fail(p, std::string("cannot write (") + std::strerror(errno) + ")");
    }
    ~File() {
        if (f) std::fclose(f);
    }
    void write(const void* p, size_t bytes) {
        if (bytes && std::fwrite(p, 1, bytes, f) != bytes) fail(path, "write error");
    }
    void close() {
        FILE* g = f;
        f = nullptr;
        if (std::fclose(g) != 0) fail(path, "write error on close");
    }
};

template <typename T>
void writeVecs(const std::string& path, int64_t n, int d, const T* x) {
    File f(path);
    for (int64_t i = 0; i < n; ++i) {
        int32_t dd = d;
        f.write(&dd, sizeof(dd));
        f.write(x + size_t(i) * d, sizeof(T) * size_t(d));
    }
    f.close();
}
}  // namespace

void writeFbin(const std::string& path, const Matrix& m) {
    if (m.n > INT32_MAX) fail(path, "too many rows for .fbin");
    File f(path);
    int32_t hdr[2] = {int32_t(m.n), int32_t(m.d)};
    f.write(hdr, sizeof(hdr));
    f.write(m.x.data(), m.x.size() * sizeof(float));
    f.close();
}

void writeIvecs(const std::string& path, int64_t n, int d, const int32_t* x) {
    writeVecs(path, n, d, x);
}

void writeFvecs(const std::string& path, int64_t n, int d, const float* x) {
    writeVecs(path, n, d, x);
}

}  // namespace bench
}  // namespace faiss_ext
