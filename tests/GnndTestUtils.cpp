// Shared helpers of the GNND tests (test_gpu_gnnd_*.cpp): exact references,
// recall, graph structure checks, data sets, files. See GnndTestUtils.h.
#include "GnndTestUtils.h"

#include "TestUtils.h"

#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"

#include <faiss/IndexFlat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace faiss_ext {
namespace gnndtest {

using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::GpuKnnGraphGNNDConfig;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

/// The r-th best exact distance of row `row` from its reference list
/// (refs: kRef exact ids, closest first), recomputed in double. dist(id)
/// gives the row's exact distance to id.
template <typename Dist>
double rthReference(const int64_t* refs, int kRef, int r, bool ip, Dist&& dist) {
    std::vector<double> v;
    for (int j = 0; j < std::min(kRef, r + 5); ++j) {
        if (refs[j] >= 0) v.push_back(dist(refs[j]));
    }
    if (v.empty()) return ip ? -INFINITY : INFINITY;
    if (ip) {
        std::sort(v.begin(), v.end(), std::greater<double>());
    } else {
        std::sort(v.begin(), v.end());
    }
    return v[std::min<size_t>(r, v.size()) - 1];
}

/// Whether `got` is no worse than the threshold `thr` (ties count).
bool withinThreshold(double got, double thr, bool ip) {
    const double tol = 1e-6 * std::fabs(thr) + 1e-12;
    return ip ? got >= thr - tol : got <= thr + tol;
}

/// A faiss::IndexFlat (L2 or IP) holding x (n x d).
std::unique_ptr<faiss::IndexFlat> flatIndex(const float* x, int64_t n, int d, bool ip) {
    std::unique_ptr<faiss::IndexFlat> index;
    if (ip) {
        index.reset(new faiss::IndexFlatIP(d));
    } else {
        index.reset(new faiss::IndexFlatL2(d));
    }
    index->add(n, x);
    return index;
}

}  // namespace

bool similarity(FlatMetric m) {
    return m != FlatMetric::L2;
}

/// The vectors as the metric compares them (normalised for Cosine, centred
/// and normalised for Pearson), so exact references use plain L2 / IP.
std::vector<float> prepared(FlatMetric m, const std::vector<float>& x, int64_t n, int d) {
    std::vector<float> p(x.begin(), x.begin() + size_t(n) * d);
    faiss_ext::prepareVectors(m, n, d, p.data());
    return p;
}

/// Exact distance (L2: squared) or similarity (IP) of rows i and j, in double.
double pairDistance(const float* x, int d, int64_t i, int64_t j, bool ip) {
    const float* a = x + size_t(i) * d;
    const float* b = x + size_t(j) * d;
    double s = 0;
    for (int t = 0; t < d; ++t) {
        if (ip) {
            s += double(a[t]) * double(b[t]);
        } else {
            double u = double(a[t]) - double(b[t]);
            s += u * u;
        }
    }
    return s;
}

double squaredNorm(const float* x, int d, int64_t i) {
    return pairDistance(x, d, i, i, true);
}

/// Exact k-NN graph of x (n x d, already prepared) by faiss::IndexFlat on the
/// CPU: k + 1 neighbours, the row itself dropped by id (the last one dropped
/// when the row is not among them, e.g. for inner product). onGpu: by
/// GpuIndexQuickSelectFlat where a GPU is present.
std::vector<int64_t> exactGraph(const float* x, int64_t n, int d, int k, bool ip,
                                bool onGpu) {
    if (onGpu && haveGpu()) {
        // brute force on the GPU (GpuIndexQuickSelectFlat equals IndexFlat, ties
        // aside; recall is scored by distance): seconds where the CPU with the
        // reference BLAS staged for device runs takes minutes
        StandardGpuResources res;
        GpuIndexQuickSelectFlat flat(&res, d, ip ? FlatMetric::InnerProduct : FlatMetric::L2);
        flat.add(n, x);
        std::vector<int64_t> out(size_t(n) * k);
        flat.knnGraph(k, true, nullptr, out.data());
        return out;
    }
    std::unique_ptr<faiss::IndexFlat> index = flatIndex(x, n, d, ip);
    std::vector<int64_t> out(size_t(n) * k);
    const int64_t chunk = 8192;
    std::vector<float> D(size_t(chunk) * (k + 1));
    std::vector<int64_t> I(size_t(chunk) * (k + 1));
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t m = std::min(chunk, n - i0);
        index->search(m, x + size_t(i0) * d, k + 1, D.data(), I.data());
        for (int64_t r = 0; r < m; ++r) {
            int o = 0;
            for (int j = 0; j <= k && o < k; ++j) {
                const int64_t id = I[size_t(r) * (k + 1) + j];
                if (id != i0 + r) out[size_t(i0 + r) * k + o++] = id;
            }
        }
    }
    return out;
}

/// exactGraph, on the CPU in sanitizer-sized runs: the reference is not under
/// test, and the GPU brute force takes minutes under racecheck.
std::vector<int64_t> referenceGraph(const float* x, int64_t n, int d, int k, bool ip) {
    return exactGraph(x, n, d, k, ip, !smallTests());
}

/// Exact k-NN of queries q (nq x d) among x (n x d), both prepared; k <= n.
std::vector<int64_t> exactSearch(const float* x, int64_t n, const float* q, int64_t nq, int d, int k,
                                 bool ip) {
    std::unique_ptr<faiss::IndexFlat> index = flatIndex(x, n, d, ip);
    std::vector<float> D(size_t(nq) * k);
    std::vector<int64_t> I(size_t(nq) * k);
    index->search(nq, q, k, D.data(), I.data());
    return I;
}

/// Recall@r of a graph (ids: n x k, row i = the list of vector i) against
/// exact lists (ref: n x kRef, self excluded), over all rows. x: the
/// (prepared) vectors; r <= min(k, kRef).
double graphRecall(const float* x, int64_t n, int d, bool ip, const int64_t* ids, int k,
                   const int64_t* ref, int kRef, int r) {
    int64_t hits = 0;
    for (int64_t i = 0; i < n; ++i) {
        auto dist = [&](int64_t j) { return pairDistance(x, d, i, j, ip); };
        const double thr = rthReference(ref + size_t(i) * kRef, kRef, r, ip, dist);
        std::set<int64_t> seen;
        for (int j = 0; j < r; ++j) {
            const int64_t id = ids[size_t(i) * k + j];
            if (id < 0 || id >= n || id == i || !seen.insert(id).second) continue;
            if (withinThreshold(dist(id), thr, ip)) ++hits;
        }
    }
    return double(hits) / (double(n) * r);
}

/// Same for search results (I: nq x k) of queries q against base x,
/// reference ref (nq x kRef).
double searchRecall(const float* x, int64_t n, const float* q, int64_t nq, int d, bool ip,
                    const int64_t* I, int k, const int64_t* ref, int kRef, int r) {
    int64_t hits = 0;
    for (int64_t i = 0; i < nq; ++i) {
        auto dist = [&](int64_t j) {
            double s = 0;
            for (int t = 0; t < d; ++t) {
                const double a = q[size_t(i) * d + t], b = x[size_t(j) * d + t];
                s += ip ? a * b : (a - b) * (a - b);
            }
            return s;
        };
        const double thr = rthReference(ref + size_t(i) * kRef, kRef, r, ip, dist);
        std::set<int64_t> seen;
        for (int j = 0; j < r; ++j) {
            const int64_t id = I[size_t(i) * k + j];
            if (id < 0 || id >= n || !seen.insert(id).second) continue;
            if (withinThreshold(dist(id), thr, ip)) ++hits;
        }
    }
    return double(hits) / (double(nq) * r);
}

double recallAgainstExactIndex(gpu::StandardGpuResources& res, const std::vector<float>& x,
                               int64_t n, const std::vector<float>& q, int64_t nq, int d, int k,
                               const std::vector<int64_t>& I, FlatMetric metric) {
    gpu::GpuIndexQuickSelectFlat exact(&res, d, metric);
    exact.add(n, x.data());
    std::vector<float> D(size_t(nq) * k);
    std::vector<int64_t> ref(size_t(nq) * k);
    exact.search(nq, q.data(), k, D.data(), ref.data());
    int64_t hits = 0;
    for (int64_t i = 0; i < nq; ++i) {
        const std::set<int64_t> truth(ref.begin() + i * k, ref.begin() + (i + 1) * k);
        for (int j = 0; j < k; ++j) hits += int64_t(truth.count(I[size_t(i) * k + j]));
    }
    return double(hits) / double(nq * k);
}

Graph fetchGraph(const GpuKnnGraphGNND& index) {
    Graph g;
    g.n = index.ntotal;
    g.k = index.getGraphDegree();
    g.ids.assign(size_t(g.n) * g.k, -7);
    g.dist.assign(size_t(g.n) * g.k, NAN);
    index.getGraph(g.ids.data(), g.dist.data());
    return g;
}

/// Checks a graph's structure (empty string when fine): every id in
/// [0, n), no self loop, no id twice in a list, distances sorted (L2
/// ascending, similarities descending) and equal to the exact distance of
/// the pair (relative 1e-4, plus float rounding of the norms' scale).
/// dist may be null (ids only). x: the prepared vectors.
std::string checkStructure(const float* x, int64_t n, int d, bool ip, const int64_t* ids,
                           const float* dist, int k) {
    for (int64_t i = 0; i < n; ++i) {
        std::set<int64_t> seen;
        for (int j = 0; j < k; ++j) {
            const int64_t id = ids[size_t(i) * k + j];
            std::ostringstream where;
            where << "row " << i << " rank " << j << " id " << id;
            if (id < 0 || id >= n) return where.str() + ": id out of [0, " + std::to_string(n) + ")";
            if (id == i) return where.str() + ": self loop";
            if (!seen.insert(id).second) return where.str() + ": id repeated in the list";
            if (!dist) continue;
            const float got = dist[size_t(i) * k + j];
            const double exact = pairDistance(x, d, i, id, ip);
            const double scale = ip ? std::sqrt(squaredNorm(x, d, i) * squaredNorm(x, d, id))
                                    : squaredNorm(x, d, i) + squaredNorm(x, d, id);
            if (!(std::fabs(got - exact) <= 1e-4 * std::fabs(exact) + 1e-7 * scale)) {
                where << ": distance " << got << ", exact " << exact;
                return where.str();
            }
            if (j > 0) {
                const float prev = dist[size_t(i) * k + j - 1];
                if (ip ? got > prev : got < prev) {
                    where << ": not sorted (" << prev << " then " << got << ")";
                    return where.str();
                }
            }
        }
    }
    return "";
}

/// Structure and recall@min(k, 10) of an index's graph against exact lists
/// (ref: n x kRef over the index's own vectors `xp`, prepared).
double checkIndex(const GpuKnnGraphGNND& index, const std::vector<float>& xp, const int64_t* ref,
                  int kRef, const std::string& what) {
    const Graph g = fetchGraph(index);
    const bool ip = similarity(index.getFlatMetric());
    EXPECT_EQ("", checkStructure(xp.data(), g.n, index.d, ip, g.ids.data(), g.dist.data(), g.k)) << what;
    const int r = std::min(g.k, std::min(kR, kRef));
    return graphRecall(xp.data(), g.n, index.d, ip, g.ids.data(), g.k, ref, kRef, r);
}

/// Builds a graph of x in one add and returns it with its recall.
double buildAndScore(StandardGpuResources& res, const std::vector<float>& x, int64_t n, int d, int k,
                     FlatMetric metric, const int64_t* ref, int kRef, const std::string& what,
                     GpuKnnGraphGNNDConfig cfg) {
    GpuKnnGraphGNND index(&res, d, k, metric, cfg);
    index.add(n, x.data());
    EXPECT_EQ(index.ntotal, n) << what;
    return checkIndex(index, prepared(metric, x, n, d), ref, kRef, what);
}

std::string describe(const std::string& data, int64_t n, int d, int k, FlatMetric m) {
    return data + " n=" + std::to_string(n) + " d=" + std::to_string(d) + " k=" + std::to_string(k) +
           " metric=" + faiss_ext::flatMetricName(m) + " seed=" + std::to_string(kSeed);
}

// ---- files ----

bool fileExists(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return bool(f);
}

/// Reads an .ivecs file into int64 ids; *k receives the row length.
std::vector<int64_t> readIvecs(const std::string& path, int* k) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<int64_t> out;
    int32_t dim = 0;
    std::vector<int32_t> row;
    while (f.read(reinterpret_cast<char*>(&dim), 4)) {
        if (dim <= 0 || dim > (1 << 20)) throw std::runtime_error("bad ivecs record in " + path);
        row.resize(dim);
        if (!f.read(reinterpret_cast<char*>(row.data()), size_t(dim) * 4))
            throw std::runtime_error("truncated ivecs file " + path);
        out.insert(out.end(), row.begin(), row.end());
        *k = dim;
    }
    return out;
}

/// Reads at most maxRows rows of a .bvecs file as floats; *d receives the dimension.
std::vector<float> readBvecs(const std::string& path, int64_t maxRows, int* d) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<float> out;
    int32_t dim = 0;
    std::vector<uint8_t> row;
    for (int64_t r = 0; r < maxRows && f.read(reinterpret_cast<char*>(&dim), 4); ++r) {
        if (dim <= 0 || dim > (1 << 20)) throw std::runtime_error("bad bvecs record in " + path);
        row.resize(dim);
        if (!f.read(reinterpret_cast<char*>(row.data()), dim)) throw std::runtime_error("truncated " + path);
        out.insert(out.end(), row.begin(), row.end());
        *d = dim;
    }
    return out;
}

/// Reads at most maxRows images of a gzip-compressed IDX file (Debian's
/// dataset-fashion-mnist) through `gzip -dc`, as floats.
std::vector<float> readIdxGz(const std::string& path, int64_t maxRows, int* d) {
    if (!fileExists(path)) throw std::runtime_error("cannot open " + path);
    std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("gzip -dc '" + path + "'").c_str(), "r"), pclose);
    if (!p) throw std::runtime_error("cannot run gzip for " + path);
    uint8_t h[16];
    if (std::fread(h, 1, 16, p.get()) != 16) throw std::runtime_error("short IDX header in " + path);
    auto be = [&](int o) { return (int64_t(h[o]) << 24) | (h[o + 1] << 16) | (h[o + 2] << 8) | h[o + 3]; };
    if (be(0) != 2051) throw std::runtime_error("not an IDX image file: " + path);
    const int64_t n = std::min(be(4), maxRows);
    *d = int(be(8) * be(12));
    std::vector<uint8_t> raw(size_t(n) * *d);
    if (std::fread(raw.data(), 1, raw.size(), p.get()) != raw.size())
        throw std::runtime_error("truncated IDX file " + path);
    return std::vector<float>(raw.begin(), raw.end());
}

void writeFvecs(const std::string& path, const float* x, int64_t n, int d) {
    std::ofstream f(path, std::ios::binary);
    const int32_t dim = d;
    for (int64_t i = 0; i < n; ++i) {
        f.write(reinterpret_cast<const char*>(&dim), 4);
        f.write(reinterpret_cast<const char*>(x + size_t(i) * d), size_t(d) * 4);
    }
    if (!f) throw std::runtime_error("cannot write " + path);
}

void writeRaw(const std::string& path, const float* x, size_t bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(x), bytes);
    if (!f) throw std::runtime_error("cannot write " + path);
}

/// Entries of a directory (-1 when it cannot be read).
int64_t countDirEntries(const std::string& dir) {
    std::error_code ec;
    int64_t c = 0;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++c;
    return ec ? -1 : c;
}

// ---- data sets ----

/// The real sets of ../shared/data (README there) and a generated one,
/// loaded once per process.
const Dataset& dataset(const std::string& name) {
    static std::map<std::string, Dataset> cache;
    auto it = cache.find(name);
    if (it != cache.end()) return it->second;
    Dataset ds;
    ds.name = name;
    const std::string dir = dataDir();
    try {
        if (name == "siftsmall" || name == "pointcloud-rs") {
            const std::string base = name == "siftsmall" ? dir + "/siftsmall/siftsmall_base.fvecs"
                                                         : dir + "/pointcloud-rs/rs1_base.fvecs";
            const std::string gt = name == "siftsmall" ? dir + "/siftsmall/siftsmall_base_knn100_l2.ivecs"
                                                       : dir + "/pointcloud-rs/rs1_base_knn32_l2.ivecs";
            // sanitizer-sized: a prefix of the rows with its exact graph (the
            // stored graph, over all rows, is then not needed)
            const int64_t prefixRows = sized<int64_t>(0, 2000);
            if (dir.empty() || !fileExists(base) || (prefixRows == 0 && !fileExists(gt))) {
                ds.missing = base + " or " + gt + " not found (set FAISS_EXT_DATA_DIR)";
            } else {
                ds.x = readFvecs(base, &ds.d);
                ds.n = int64_t(ds.x.size()) / ds.d;
                if (prefixRows > 0 && prefixRows < ds.n) {
                    ds.n = prefixRows;
                    ds.x.resize(size_t(ds.n) * ds.d);
                    ds.kGt = 16;
                    ds.gt = referenceGraph(ds.x.data(), ds.n, ds.d, ds.kGt, false);
                } else {
                    ds.gt = readIvecs(gt, &ds.kGt);
                    if (int64_t(ds.gt.size()) != ds.n * ds.kGt)
                        throw std::runtime_error(gt + " has " + std::to_string(ds.gt.size() / ds.kGt) +
                                                 " rows, the base " + std::to_string(ds.n));
                }
            }
        } else if (name == "fashion-mnist") {
            // The first 20k training images; exact graph by brute force (the
            // stored one is over all 60k). Small: fewer, as d = 784 makes each
            // GNND join about 25 times the d = 32 one under racecheck.
            const int64_t rows = sized<int64_t>(20000, 500);
            const std::string bv = dir + "/fashion-mnist/fashion-mnist_base.bvecs";
            const std::string idx = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
            if (!dir.empty() && fileExists(bv)) {
                ds.x = readBvecs(bv, rows, &ds.d);
            } else if (fileExists(idx)) {
                ds.x = readIdxGz(idx, rows, &ds.d);
            } else {
                ds.missing = bv + " and " + idx + " not found";
            }
            if (ds.missing.empty()) {
                ds.n = int64_t(ds.x.size()) / ds.d;
                ds.kGt = 16;
                ds.gt = referenceGraph(ds.x.data(), ds.n, ds.d, ds.kGt, false);
            }
        } else if (name == "clustered") {
            ds.n = sized<int64_t>(20000, 2000);
            ds.d = 64;
            ds.x = clusteredVectors(ds.n, ds.d, 40, kSeed);
            ds.kGt = 16;
            ds.gt = referenceGraph(ds.x.data(), ds.n, ds.d, ds.kGt, false);
        } else {
            ds.missing = "unknown data set " + name;
        }
    } catch (const std::exception& e) {
        ds.missing = std::string("unreadable: ") + e.what();
        ADD_FAILURE() << name << ": " << ds.missing;
    }
    return cache.emplace(name, std::move(ds)).first->second;
}

/// The graph of a file build, with its structure checked and its recall.
double fileGraphRecall(const std::string& graphPath, const std::vector<float>& x, int64_t n, int d, int k,
                       const std::vector<int64_t>& ref, const std::string& what) {
    int64_t gn = 0;
    int gk = 0;
    const std::vector<int> g32 = faiss_ext::gpu::readGraphIvecs(graphPath, &gn, &gk);
    EXPECT_EQ(gn, n) << what;
    EXPECT_EQ(gk, k) << what;
    if (gn != n || gk != k || g32.size() != size_t(n) * k) return 0;
    std::vector<int64_t> g(g32.begin(), g32.end());
    EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.data(), nullptr, k)) << what;
    const double r = graphRecall(x.data(), n, d, false, g.data(), k, ref.data(), kR, kR);
    std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), r);
    return r;
}

}  // namespace gnndtest
}  // namespace faiss_ext
