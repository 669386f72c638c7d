// GpuKnnGraphGNND (GNND and GGM, Wang, Zhao & Zeng 2021, docs/references.md) and
// gnndBuildFromFile (its section 5): recall@10 against exact brute force
// (faiss::IndexFlat on the CPU, or the data sets' stored exact graphs) on
// real and generated data; the structure of the graph; metrics; degrees;
// edge cases; merges of incremental adds; out-of-core and two-worker builds;
// search(); the CPU twin faiss::IndexNNDescentFlat, FAISS I/O and NSG; bad
// input. GnndSanitize.* is a small group for compute-sanitizer runs.
//
// Recall@r of a graph row i: the fraction of the r true nearest neighbours
// found among the first r entries of our list, where an id counts when it is
// valid, not i itself, not repeated, and no farther from x_i (in double) than
// the true r-th neighbour (so ties count). No test asserts a time.
#include "TestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexNSG.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <cuda_runtime_api.h>

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
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GnndFileBuildOptions;
using faiss_ext::gpu::GnndFileBuildReport;
using faiss_ext::gpu::GpuIndexQuickSelectFlat;
using faiss_ext::gpu::GpuKnnGraphGNND;
using faiss_ext::gpu::GpuKnnGraphGNNDConfig;
using faiss_ext::gpu::GpuResourcesProvider;
using faiss_ext::gpu::SearchParametersGNND;
using faiss_ext::gpu::StandardGpuResources;
using faiss_ext::gpu::VectorFileFormat;
using namespace faiss_ext::test;

namespace {

/// Recall@10 is what every quality check measures.
constexpr int kR = 10;

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
                                bool onGpu = true) {
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
    std::unique_ptr<faiss::IndexFlat> index;
    if (ip) {
        index.reset(new faiss::IndexFlatIP(d));
    } else {
        index.reset(new faiss::IndexFlatL2(d));
    }
    index->add(n, x);
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

/// While in scope, the split builds act as on machines without peer access
/// (gnnd::setPeerAccessIgnoredForTesting), when `ignore`; restored on any exit.
struct PeerAccessIgnored {
    explicit PeerAccessIgnored(bool ignore) {
        faiss_ext::gpu::gnnd::setPeerAccessIgnoredForTesting(ignore);
    }
    ~PeerAccessIgnored() { faiss_ext::gpu::gnnd::setPeerAccessIgnoredForTesting(false); }
    PeerAccessIgnored(const PeerAccessIgnored&) = delete;
    PeerAccessIgnored& operator=(const PeerAccessIgnored&) = delete;
};

/// Exact k-NN of queries q (nq x d) among x (n x d), both prepared; k <= n.
std::vector<int64_t> exactSearch(const float* x, int64_t n, const float* q, int64_t nq, int d, int k,
                                 bool ip) {
    std::unique_ptr<faiss::IndexFlat> index;
    if (ip) {
        index.reset(new faiss::IndexFlatIP(d));
    } else {
        index.reset(new faiss::IndexFlatL2(d));
    }
    index->add(n, x);
    std::vector<float> D(size_t(nq) * k);
    std::vector<int64_t> I(size_t(nq) * k);
    index->search(nq, q, k, D.data(), I.data());
    return I;
}

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

/// A graph as getGraph returns it.
struct Graph {
    int64_t n = 0;
    int k = 0;
    std::vector<int64_t> ids;
    std::vector<float> dist;
};

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
                     GpuKnnGraphGNNDConfig cfg = {}) {
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

/// A temporary directory removed at the end of the scope.
struct TempDir {
    std::string path;
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/faiss_ext_gnnd_XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
        path = buf.data();
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return path + "/" + name; }
};

/// Entries of a directory (-1 when it cannot be read).
int64_t countDirEntries(const std::string& dir) {
    std::error_code ec;
    int64_t c = 0;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) ++c;
    return ec ? -1 : c;
}

// ---- data sets ----

/// A data set with its exact k-NN graph (self excluded).
struct Dataset {
    std::string name;
    int64_t n = 0;
    int d = 0;
    std::vector<float> x;
    std::vector<int64_t> gt;  ///< n x kGt
    int kGt = 0;
    std::string missing;      ///< why it is not available ("" when it is)
};

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

struct RecallCase {
    std::string data;
    int k;
};

class GpuGnndRecall : public ::testing::TestWithParam<RecallCase> {};

std::string recallCaseName(const ::testing::TestParamInfo<RecallCase>& info) {
    std::string s = info.param.data + "_k" + std::to_string(info.param.k);
    for (auto& c : s)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
}

}  // namespace

// ---- recall on real and generated data, default configuration ----

TEST_P(GpuGnndRecall, DefaultConfigRecallAt10) {
    FAISS_EXT_REQUIRE_GPU();
    const RecallCase c = GetParam();
    const Dataset& ds = dataset(c.data);
    if (!ds.missing.empty()) GTEST_SKIP() << c.data << ": " << ds.missing;
    StandardGpuResources res;
    const std::string what = describe(ds.name, ds.n, ds.d, c.k, FlatMetric::L2);
    const double recall = buildAndScore(res, ds.x, ds.n, ds.d, c.k, FlatMetric::L2, ds.gt.data(), ds.kGt, what);
    std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
    EXPECT_GE(recall, 0.95) << what;
}

INSTANTIATE_TEST_SUITE_P(Data, GpuGnndRecall,
                         ::testing::Values(RecallCase{"siftsmall", 32}, RecallCase{"siftsmall", 64},
                                           RecallCase{"fashion-mnist", 32}, RecallCase{"fashion-mnist", 64},
                                           RecallCase{"pointcloud-rs", 32}, RecallCase{"pointcloud-rs", 64},
                                           RecallCase{"clustered", 32}, RecallCase{"clustered", 64}),
                         recallCaseName);

// ---- structure of getGraph ----

TEST(GpuGnnd, GraphStructureAndAccessors) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(10000, 2000);
    const int64_t nAgain = sized<int64_t>(2000, 1000);  // the build after reset()
    const int d = 32, k = 32;
    auto x = clusteredVectors(n, d, 20, kSeed);
    GpuKnnGraphGNND index(&res, d, k);
    EXPECT_EQ(index.getGraphDegree(), k);
    EXPECT_EQ(index.getBuildDegree(), 32);
    EXPECT_EQ(index.getFlatMetric(), FlatMetric::L2);
    EXPECT_EQ(index.metric_type, faiss::METRIC_L2);
    index.add(n, x.data());
    ASSERT_EQ(index.ntotal, n);
    EXPECT_TRUE(index.is_trained);

    const Graph g = fetchGraph(index);
    EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.ids.data(), g.dist.data(), k));

    // Labels alone, 32-bit ids, device outputs: the same graph.
    std::vector<int64_t> labels(size_t(n) * k);
    index.getGraph(labels.data());
    EXPECT_EQ(labels, g.ids);
    const std::vector<int> ids32 = index.getGraphInt();
    ASSERT_EQ(ids32.size(), size_t(n) * k);
    EXPECT_TRUE(std::equal(ids32.begin(), ids32.end(), g.ids.begin()));
    int64_t* dI = nullptr;
    float* dD = nullptr;
    ASSERT_EQ(cudaMalloc((void**)&dI, sizeof(int64_t) * n * k), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void**)&dD, sizeof(float) * n * k), cudaSuccess);
    index.getGraph(dI, dD);
    std::vector<int64_t> devI(size_t(n) * k);
    std::vector<float> devD(size_t(n) * k);
    cudaMemcpy(devI.data(), dI, sizeof(int64_t) * n * k, cudaMemcpyDeviceToHost);
    cudaMemcpy(devD.data(), dD, sizeof(float) * n * k, cudaMemcpyDeviceToHost);
    cudaFree(dI);
    cudaFree(dD);
    EXPECT_EQ(devI, g.ids);
    EXPECT_EQ(devD, g.dist);

    // Stored vectors: reconstruct and the device pointer give them back.
    std::vector<float> v(d);
    index.reconstruct(n - 1, v.data());
    EXPECT_TRUE(std::equal(v.begin(), v.end(), x.begin() + size_t(n - 1) * d));
    const float* dv = index.getVectorsDevice();
    ASSERT_NE(dv, nullptr);
    std::vector<float> first(d);
    cudaMemcpy(first.data(), dv, sizeof(float) * d, cudaMemcpyDeviceToHost);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), x.begin()));

    // One build's log: iterations numbered from 1, no merge.
    const auto& log = index.getBuildLog();
    ASSERT_FALSE(log.empty());
    EXPECT_LE(int(log.size()), index.getConfig().maxIterations);
    for (size_t i = 0; i < log.size(); ++i) {
        EXPECT_EQ(log[i].iteration, int(i) + 1);
        EXPECT_FALSE(log[i].merge);
        EXPECT_GE(log[i].updates, 0);
    }

    // reset() empties the index; it builds again afterwards.
    index.reset();
    EXPECT_EQ(index.ntotal, 0);
    EXPECT_TRUE(index.getGraphInt().empty());
    index.add(nAgain, x.data());
    EXPECT_EQ(index.ntotal, nAgain);
    const Graph g2 = fetchGraph(index);
    EXPECT_EQ("", checkStructure(x.data(), nAgain, d, false, g2.ids.data(), g2.dist.data(), k));
}

// ---- metrics: inner product, cosine, Pearson ----

TEST(GpuGnnd, MetricsAgainstExactBruteForce) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(10000, 1000);
    const int d = 48, k = 32;
    auto x = clusteredVectors(n, d, 20, kSeed + 7);
    for (FlatMetric m : {FlatMetric::InnerProduct, FlatMetric::Cosine, FlatMetric::Pearson}) {
        const std::string what = describe("clustered", n, d, k, m);
        auto xp = prepared(m, x, n, d);
        auto ref = referenceGraph(xp.data(), n, d, kR, true);
        GpuKnnGraphGNND index(&res, d, k, m);
        EXPECT_EQ(index.metric_type, faiss::METRIC_INNER_PRODUCT) << what;
        index.add(n, x.data());
        const double recall = checkIndex(index, xp, ref.data(), kR, what);
        std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
        // Inner product is not a metric (no triangle inequality): NN-Descent's
        // premise holds less well there, so its bar is lower.
        EXPECT_GE(recall, m == FlatMetric::InnerProduct ? 0.9 : 0.95) << what;
    }
    // The FAISS-metric constructor: inner product.
    GpuKnnGraphGNND ip(&res, d, k, faiss::METRIC_INNER_PRODUCT);
    EXPECT_EQ(ip.getFlatMetric(), FlatMetric::InnerProduct);
}

// ---- degrees ----

TEST(GpuGnnd, DegreeSweep) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: still past 2 x 256 (the longest list), else that build is the exact small-set path
    const int64_t n = sized<int64_t>(6000, 520);
    const int d = 32;
    auto x = clusteredVectors(n, d, 12, kSeed + 11);
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    for (int k : {1, 10, 31, 32, 33, 100, 256}) {
        const std::string what = describe("clustered", n, d, k, FlatMetric::L2);
        GpuKnnGraphGNND index(&res, d, k);
        EXPECT_EQ(index.getBuildDegree(), std::max(32, (k + 31) / 32 * 32)) << what;
        index.add(n, x.data());
        const double recall = checkIndex(index, x, ref.data(), kR, what);
        std::printf("[gnnd] %s: recall@%d %.4f\n", what.c_str(), std::min(k, kR), recall);
        EXPECT_GE(recall, 0.9) << what;
    }
    // A longer build list than the degree.
    GpuKnnGraphGNNDConfig cfg;
    cfg.buildDegree = 64;
    GpuKnnGraphGNND index(&res, d, 10, FlatMetric::L2, cfg);
    EXPECT_EQ(index.getBuildDegree(), 64);
    index.add(n, x.data());
    const double recall = checkIndex(index, x, ref.data(), kR, "k=10 buildDegree=64");
    EXPECT_GE(recall, 0.95) << "k=10 buildDegree=64 seed=" << kSeed;
}

// ---- edge cases ----

TEST(GpuGnnd, TooFewVectorsIsAnError) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 8, k = 32;
    auto x = clusteredVectors(200, d, 4, kSeed);
    GpuKnnGraphGNND index(&res, d, k);
    for (int64_t n : {int64_t(1), int64_t(k - 1), int64_t(k)}) {
        EXPECT_THROW(index.add(n, x.data()), faiss::FaissException) << "n=" << n << " k=" << k;
        EXPECT_EQ(index.ntotal, 0) << "n=" << n;
        EXPECT_TRUE(index.getGraphInt().empty()) << "n=" << n;
        EXPECT_TRUE(index.getBuildLog().empty()) << "n=" << n;
    }
    index.add(200, x.data());  // still usable
    EXPECT_EQ(index.ntotal, 200);
}

TEST(GpuGnnd, ExactGraphWhenNIsKPlusOne) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    for (int k : {1, 32, 64}) {
        const int64_t n = k + 1;
        const int d = 16;
        auto x = randomVectors(n, d, kSeed + k);
        GpuKnnGraphGNND index(&res, d, k);
        index.add(n, x.data());
        const Graph g = fetchGraph(index);
        // Every list holds all the other vectors, sorted: the exact graph.
        EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.ids.data(), g.dist.data(), k)) << "k=" << k;
        auto ref = exactGraph(x.data(), n, d, k, false);
        EXPECT_EQ(graphRecall(x.data(), n, d, false, g.ids.data(), k, ref.data(), k, k), 1.0) << "k=" << k;
    }
}

TEST(GpuGnnd, NMultipleOfTheDegree) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: still multiples of the degree, and of 2^9 and 2^7 as 64 * 200 and 32 * 100
    for (auto [n, k] : {std::pair<int64_t, int>{64 * sized(200, 24), 64},
                        std::pair<int64_t, int>{32 * sized(100, 28), 32}}) {
        const int d = 32;
        auto x = clusteredVectors(n, d, 16, kSeed + n);
        auto ref = referenceGraph(x.data(), n, d, kR, false);
        const std::string what = describe("clustered", n, d, k, FlatMetric::L2);
        const double recall = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR, what);
        EXPECT_GE(recall, 0.95) << what;
    }
}

TEST(GpuGnnd, DuplicatedPoints) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t m = sized<int64_t>(2000, 600), n = 3 * m;
    const int d = 16, k = 32;
    auto base = clusteredVectors(m, d, 10, kSeed + 3);
    std::vector<float> x;
    for (int rep = 0; rep < 3; ++rep) x.insert(x.end(), base.begin(), base.end());
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    const std::string what = describe("clustered x3 copies", n, d, k, FlatMetric::L2);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(n, x.data());
    // checkIndex: no self loop and no repeated id although copies tie at 0.
    const double recall = checkIndex(index, x, ref.data(), kR, what);
    std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
    EXPECT_GE(recall, 0.9) << what;
    // Each vector's two copies are at distance 0: they lead its list.
    const Graph g = fetchGraph(index);
    int64_t copiesFirst = 0;
    for (int64_t i = 0; i < n; ++i) {
        std::set<int64_t> head{g.ids[size_t(i) * k], g.ids[size_t(i) * k + 1]};
        std::set<int64_t> copies;
        for (int rep = 0; rep < 3; ++rep)
            if (rep * m + i % m != i) copies.insert(rep * m + i % m);
        copiesFirst += head == copies;
    }
    EXPECT_GE(double(copiesFirst) / n, 0.95) << what;
}

TEST(GpuGnnd, OneDimension) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 5000;
    const int d = 1, k = 32;
    auto x = randomVectors(n, d, kSeed + 1);
    auto ref = exactGraph(x.data(), n, d, kR, false);
    const std::string what = describe("uniform", n, d, k, FlatMetric::L2);
    const double recall = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR, what);
    std::printf("[gnnd] %s: recall@10 %.4f\n", what.c_str(), recall);
    EXPECT_GE(recall, 0.9) << what;
}

// ---- GGM: incremental adds ----

// Small batches added to a large index (found by the soak): the GGM merge
// used to seed each list with K/2 own-set entries and K/2 of the other set,
// so the lists of a batch smaller than K/2 started short, and the
// iterations could stop before they were filled: -1 entries in a graph of
// more than k + 1 vectors. Every list must hold k real neighbours.
TEST(GpuGnnd, SmallBatchesAddedToALargeIndexKeepFullLists) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 32, k = 32;
    const int64_t base = sized<int64_t>(6000, 300);  // small: still 7x the largest batch
    const std::vector<int64_t> batches = {1, 2, 5, 9, 15, 40, 1, 3};
    int64_t total = base;
    for (int64_t b : batches) total += b;
    auto x = clusteredVectors(total, d, 16, kSeed + 23);
    for (int degree : {0, 64}) {
        GpuKnnGraphGNNDConfig cfg;
        cfg.buildDegree = degree;
        GpuKnnGraphGNND index(&res, d, k, FlatMetric::L2, cfg);
        index.add(base, x.data());
        int64_t off = base;
        for (int64_t b : batches) {
            index.add(b, x.data() + size_t(off) * d);
            off += b;
            std::vector<int64_t> I(size_t(off) * k);
            std::vector<float> D(size_t(off) * k);
            index.getGraph(I.data(), D.data());
            const std::string problem = checkStructure(x.data(), off, d, false, I.data(), D.data(), k);
            EXPECT_EQ("", problem) << "buildDegree " << degree << ", after adding " << b << " to "
                                   << off - b;
            if (!problem.empty()) break;
        }
    }
}

TEST(GpuGnnd, IncrementalAddsMergeWithGgm) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(20000, 600);  // small: the smallest part (150) still past 2 K
    const int d = 64, k = 32;
    auto x = clusteredVectors(n, d, 40, kSeed + 5);
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    const std::string what = describe("clustered", n, d, k, FlatMetric::L2);
    const double oneShot = buildAndScore(res, x, n, d, k, FlatMetric::L2, ref.data(), kR, what + " one add");

    auto merged = [&](const std::vector<int64_t>& parts, const std::string& label) {
        GpuKnnGraphGNND index(&res, d, k);
        int64_t off = 0;
        for (int64_t p : parts) {
            index.add(p, x.data() + size_t(off) * d);
            off += p;
            EXPECT_EQ(index.ntotal, off) << label;
        }
        const auto& log = index.getBuildLog();
        const auto merges = std::count_if(log.begin(), log.end(), [](const auto& s) { return s.merge; });
        EXPECT_GT(merges, 0) << label << ": no merge iteration in the build log";
        EXPECT_GT(int64_t(log.size()), merges) << label << ": no build iteration in the build log";
        const double r = checkIndex(index, x, ref.data(), kR, label);
        std::printf("[gnnd] %s: recall@10 %.4f (one add: %.4f)\n", label.c_str(), r, oneShot);
        return r;
    };
    const double two = merged({n / 2, n / 2}, what + " two adds");
    EXPECT_GE(two, oneShot - 0.01) << what;
    const double three = merged({n * 8 / 20, n * 7 / 20, n - n * 15 / 20}, what + " three adds");
    EXPECT_GE(three, oneShot - 0.01) << what;
    EXPECT_GE(three, 0.95) << what;
}

// Issue 7: setBuildDevices splits add()'s GNND build over two GPUs (the
// same API as one GPU). Its refusals run on any GPU machine; the builds need
// two GPUs (skipped visibly with fewer): the quality of the one-GPU build
// for lists of one and two segments, a second add (GGM on the index's own
// device), and an allocation failing on either device leaving the index as
// it was and usable.
TEST(GpuGnnd, BuildDevicesSplitTheBuild) {
    FAISS_EXT_REQUIRE_GPU();
    const int ng = faiss_ext::gpu::getNumDevices();
    StandardGpuResources r0, r1;
    {
        GpuKnnGraphGNND index(&r0, 8, 4);
        auto refused = [&](std::vector<GpuResourcesProvider*> prov, std::vector<int> devs,
                           const char* needle) {
            try {
                index.setBuildDevices(prov, devs);
                ADD_FAILURE() << "setBuildDevices accepted " << needle;
            } catch (const faiss::FaissException& e) {
                EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
            }
            EXPECT_TRUE(index.getBuildDevices().empty()) << "a refused call changed the devices";
        };
        refused({&r1}, {0}, "own device");
        refused({&r1}, {ng}, "does not exist");
        refused({&r1}, {-1}, "does not exist");
        refused({nullptr}, {ng > 1 ? 1 : 0}, "null");
        refused({&r1, &r1}, {1}, "2 providers for 1 devices");
        if (ng > 1) refused({&r1, &r1}, {1, 1}, "listed twice");
        index.setBuildDevices({}, {});
        EXPECT_TRUE(index.getBuildDevices().empty());
    }
    if (ng < 2) GTEST_SKIP() << "the split builds need 2 GPUs (" << ng << " visible)";
    // small: every build still past 2 K, so split (n = 1200 at buildDegree
    // 64; the two adds of n / 2 at 32)
    const int64_t n = sized<int64_t>(40000, 1200);
    const int d = 32, k = 32;
    const auto x = clusteredVectors(n, d, 40, kSeed + 31);
    const auto ref = referenceGraph(x.data(), n, d, kR, false);
    // the last pass takes the path of machines without peer access
    for (int degree : {0, 64, -64}) {
        const bool noPeer = degree < 0;
        GpuKnnGraphGNNDConfig cfg;
        cfg.buildDegree = std::abs(degree);
        const std::string what = describe("clustered", n, d, k, FlatMetric::L2) + " buildDegree " +
                                 std::to_string(cfg.buildDegree) + (noPeer ? ", no peer access" : "");
        GpuKnnGraphGNND one(&r0, d, k, FlatMetric::L2, cfg);
        one.add(n, x.data());
        const double r1gpu = checkIndex(one, x, ref.data(), kR, what + ", one GPU");
        GpuKnnGraphGNND two(&r0, d, k, FlatMetric::L2, cfg);
        two.setBuildDevices({&r1}, {1});
        EXPECT_EQ(two.getBuildDevices(), std::vector<int>{1});
        {
            PeerAccessIgnored peer(noPeer);
            two.add(n, x.data());
        }
        EXPECT_EQ(two.ntotal, n);
        const double r2gpu = checkIndex(two, x, ref.data(), kR, what + ", two GPUs");
        std::printf("[gnnd] %s: recall@10 one GPU %.4f, two GPUs %.4f\n", what.c_str(), r1gpu, r2gpu);
        EXPECT_GE(r2gpu, 0.95) << what;
        EXPECT_GE(r2gpu, r1gpu - 0.01) << what << ": two GPUs lost quality against one";
        EXPECT_FALSE(two.getBuildLog().empty()) << what << ": the split build logged no iteration";
    }
    // two adds: the second build split, then GGM on device 0
    {
        GpuKnnGraphGNND index(&r0, d, k);
        index.setBuildDevices({&r1}, {1});
        index.add(n / 2, x.data());
        const std::vector<int> before = index.getGraphInt();
        // an allocation failing in the second add, on either device: a clear
        // error, the index unchanged and usable
        for (int64_t at : {int64_t(0), int64_t(4), int64_t(9), int64_t(20)}) {
            faiss_ext::gpu::setAllocFailureInjection(at);
            bool threw = false;
            try {
                index.add(n - n / 2, x.data() + size_t(n / 2) * d);
            } catch (const faiss::FaissException& e) {
                threw = true;
                EXPECT_NE(std::string(e.what()).find("memory"), std::string::npos) << e.what();
            }
            const bool pending = faiss_ext::gpu::allocFailureInjectionPending();
            faiss_ext::gpu::setAllocFailureInjection(-1);
            if (pending) {
                EXPECT_FALSE(threw) << "allocation " << at;
                break;  // the add made fewer allocations: it went through
            }
            EXPECT_TRUE(threw) << "allocation " << at << " failed, yet no exception";
            EXPECT_EQ(index.ntotal, n / 2) << "allocation " << at;
            EXPECT_EQ(index.getGraphInt(), before) << "a failed add changed the graph (allocation "
                                                   << at << ")";
        }
        if (index.ntotal == n / 2) index.add(n - n / 2, x.data() + size_t(n / 2) * d);
        EXPECT_EQ(index.ntotal, n);
        const auto& log = index.getBuildLog();
        EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const auto& s) { return s.merge; }))
                << "no GGM merge iteration after the second add";
        const double r = checkIndex(index, x, ref.data(), kR, "two adds, split builds");
        std::printf("[gnnd] two adds with split builds: recall@10 %.4f\n", r);
        EXPECT_GE(r, 0.95);
    }
}

// ---- out of core: gnndBuildFromFile ----

namespace {

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

}  // namespace

TEST(GpuGnndOutOfCore, FileBuildMatchesInMemoryBuild) {
    FAISS_EXT_REQUIRE_GPU();
    // small: shards of n / 4 = 80 still past 2 K (GNND builds, not the exact small-set path)
    const int64_t n = sized<int64_t>(40000, 320);
    const int d = 32, k = 32;
    auto x = clusteredVectors(n, d, 40, kSeed + 9);
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    TempDir tmp;
    const std::string fv = tmp.file("base.fvecs"), raw = tmp.file("base.f32");
    writeFvecs(fv, x.data(), n, d);
    writeRaw(raw, x.data(), x.size() * sizeof(float));
    const size_t dataBytes = x.size() * sizeof(float);

    StandardGpuResources inMem;
    const double memRecall =
            buildAndScore(inMem, x, n, d, k, FlatMetric::L2, ref.data(), kR, describe("in memory", n, d, k, FlatMetric::L2));

    // Device memory limit a quarter of the data: the builder must shard. Small:
    // the limit of two shards of n / 4 (vectors, norms and lists: 4 (d + 1) +
    // 16 K bytes a row), so 4 shards, where a quarter of the data cuts 41 (820
    // merges: far too slow under racecheck).
    const size_t limit = sized(dataBytes / 4, size_t(2 * (n / 4)) * (4 * (d + 1) + 16 * k));
    {
        StandardGpuResources res;
        res.setDeviceMemoryLimit(limit);
        GnndFileBuildOptions opt;
        opt.workDir = tmp.path;
        const std::string out = tmp.file("graph_limit.ivecs");
        const GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
                {&res}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out, opt);
        const std::string what = "fvecs, device memory limit " + std::to_string(limit) + " B";
        EXPECT_EQ(rep.n, n) << what;
        EXPECT_EQ(rep.d, d) << what;
        EXPECT_GT(rep.shards, 1) << what << ": the data does not fit, yet one shard";
        EXPECT_GT(rep.shardSize, 0) << what;
        EXPECT_LT(rep.shardSize, n) << what;
        EXPECT_GE(rep.shardSize * rep.shards, n) << what;
        EXPECT_EQ(rep.merges, rep.shards * (rep.shards - 1) / 2) << what;
        EXPECT_TRUE(rep.inHostMemory) << what << ": a few MB of shards were not kept in host memory";
        std::printf("[gnnd] %s: %d shards of %lld, %d merges\n", what.c_str(), rep.shards,
                    (long long)rep.shardSize, rep.merges);
        const double r = fileGraphRecall(out, x, n, d, k, ref, what);
        EXPECT_GE(r, memRecall - 0.01) << what << " (in memory: " << memRecall << ")";
        EXPECT_GE(r, 0.95) << what;
    }

    // Raw float32, explicit shard size, distances written too; shard files
    // (no host memory for the shards), left behind in no case.
    {
        StandardGpuResources res;
        GnndFileBuildOptions opt;
        opt.shardSize = n / 4;
        opt.hostMemoryBytes = 0;
        opt.workDir = tmp.file("work");
        ASSERT_TRUE(std::filesystem::create_directory(opt.workDir));
        opt.distancesPath = tmp.file("graph_raw_dist.fvecs");
        const std::string out = tmp.file("graph_raw.ivecs");
        const GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
                {&res}, raw, VectorFileFormat::RawFloat32, d, k, FlatMetric::L2, out, opt);
        const std::string what = "raw float32, shardSize n/4, shard files";
        EXPECT_FALSE(rep.inHostMemory) << what;
        EXPECT_EQ(countDirEntries(opt.workDir), 0) << what << ": shard files left in the work directory";
        EXPECT_EQ(rep.shards, 4) << what;
        EXPECT_EQ(rep.shardSize, n / 4) << what;
        EXPECT_EQ(rep.merges, 6) << what;
        const double r = fileGraphRecall(out, x, n, d, k, ref, what);
        EXPECT_GE(r, memRecall - 0.01) << what << " (in memory: " << memRecall << ")";

        // Distances: n x k fvecs, the exact distances of the written ids.
        int dk = 0;
        const std::vector<float> dist = readFvecs(opt.distancesPath, &dk);
        int64_t gn = 0;
        int gk = 0;
        const std::vector<int> g32 = faiss_ext::gpu::readGraphIvecs(out, &gn, &gk);
        ASSERT_EQ(dk, k);
        ASSERT_EQ(dist.size(), size_t(n) * k);
        std::vector<int64_t> g(g32.begin(), g32.end());
        EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.data(), dist.data(), k)) << what;
    }

    // Two workers on one GPU (devices {0, 0}): the same quality, in host
    // memory and with shard files.
    for (int64_t hostBytes : {int64_t(-1), int64_t(0)}) {
        StandardGpuResources res0, res1;
        GnndFileBuildOptions opt;
        opt.shardSize = n / 4;
        opt.devices = {0, 0};
        opt.hostMemoryBytes = hostBytes;
        const std::string out = tmp.file("graph_two_workers.ivecs");
        const GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
                {&res0, &res1}, fv, VectorFileFormat::Fvecs, d, k, FlatMetric::L2, out, opt);
        const std::string what = std::string("fvecs, devices {0, 0}, shardSize n/4, ") +
                                 (hostBytes ? "host memory" : "shard files");
        EXPECT_EQ(rep.shards, 4) << what;
        EXPECT_EQ(rep.inHostMemory, hostBytes != 0) << what;
        const double r = fileGraphRecall(out, x, n, d, k, ref, what);
        EXPECT_GE(r, memRecall - 0.01) << what << " (in memory: " << memRecall << ")";
    }
}

namespace {

/// A clustered set (40 centres) written as a raw float32 file, with its
/// exact graph, for the two-GPU file-build tests.
struct RawFileSet {
    int64_t n;
    int d;
    std::vector<float> x;
    std::vector<int64_t> ref;
    TempDir tmp;
    std::string raw;
    RawFileSet(int64_t n_, int d_, uint64_t seed)
            : n(n_), d(d_), x(clusteredVectors(n_, d_, 40, seed)),
              ref(referenceGraph(x.data(), n_, d_, kR, false)), raw(tmp.file("base.f32")) {
        writeRaw(raw, x.data(), x.size() * sizeof(float));
    }
};

/// gnndBuildFromFile of `set` with `opt` on devices {0}, then on {0, 1} (r0,
/// r1 one per device); `checkReport(rep, gpus, what)` checks each report,
/// each graph must reach recall@10 0.95 and the two-GPU one that of one GPU
/// (within 0.01).
void expectTwoGpusMatchOne(
        const RawFileSet& set, int k, GnndFileBuildOptions opt, StandardGpuResources& r0,
        StandardGpuResources& r1, const std::string& label,
        const std::function<void(const GnndFileBuildReport&, int, const std::string&)>& checkReport) {
    double recalls[2] = {0, 0};
    for (int g = 1; g <= 2; ++g) {
        opt.devices = g == 1 ? std::vector<int>{0} : std::vector<int>{0, 1};
        const std::string out = set.tmp.file("graph_" + std::to_string(g) + ".ivecs");
        std::vector<GpuResourcesProvider*> prov = {&r0};
        if (g == 2) prov.push_back(&r1);
        const GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
                prov, set.raw, VectorFileFormat::RawFloat32, set.d, k, FlatMetric::L2, out, opt);
        const std::string what = label + (g == 1 ? ", devices {0}" : ", devices {0, 1}");
        checkReport(rep, g, what);
        recalls[g - 1] = fileGraphRecall(out, set.x, set.n, set.d, k, set.ref, what);
        EXPECT_GE(recalls[g - 1], 0.95) << what;
    }
    EXPECT_GE(recalls[1], recalls[0] - 0.01) << label << ": two GPUs lost quality against one";
}

}  // namespace

// Issue 7: the same build spread over two GPUs (shard builds in parallel,
// each round's merges on both), with the shards in host memory and in files:
// the same quality as on one GPU. Skipped visibly below two GPUs.
TEST(GpuGnndOutOfCore, TwoGpusMatchOneGpu) {
    FAISS_EXT_REQUIRE_GPUS(2);
    const int k = 32;
    // small: shards of n / 5 = 80 still past 2 K
    const RawFileSet set(sized<int64_t>(40000, 400), 32, kSeed + 19);
    const int64_t n = set.n;
    StandardGpuResources r0, r1;
    for (int64_t hostBytes : {int64_t(-1), int64_t(0)}) {
        GnndFileBuildOptions opt;
        opt.shardSize = n / 5;  // 5 shards: rounds of 2 merges and a shard sitting out
        opt.hostMemoryBytes = hostBytes;
        opt.workDir = set.tmp.path;
        expectTwoGpusMatchOne(set, k, opt, r0, r1, hostBytes ? "host memory" : "shard files",
                              [&](const GnndFileBuildReport& rep, int, const std::string& what) {
                                  EXPECT_EQ(rep.shards, 5) << what;
                                  EXPECT_EQ(rep.merges, 10) << what;
                                  EXPECT_EQ(rep.inHostMemory, hostBytes != 0) << what;
                              });
    }
    // Two devices with an allocation failing part way (on either device):
    // a clear error, no output file, no shard file left behind.
    for (int64_t at : {int64_t(3), int64_t(40)}) {
        GnndFileBuildOptions opt;
        opt.shardSize = n / 5;
        opt.devices = {0, 1};
        opt.hostMemoryBytes = 0;
        opt.workDir = set.tmp.file("work_fail");
        std::filesystem::create_directory(opt.workDir);
        const std::string out = set.tmp.file("graph_fail.ivecs");
        faiss_ext::gpu::setAllocFailureInjection(at);
        bool threw = false;
        try {
            faiss_ext::gpu::gnndBuildFromFile({&r0, &r1}, set.raw, VectorFileFormat::RawFloat32, set.d, k,
                                              FlatMetric::L2, out, opt);
        } catch (const faiss::FaissException& e) {
            threw = true;
            EXPECT_NE(std::string(e.what()).find("memory"), std::string::npos) << e.what();
        }
        const bool pending = faiss_ext::gpu::allocFailureInjectionPending();
        faiss_ext::gpu::setAllocFailureInjection(-1);
        if (pending) {  // the build made fewer allocations than `at`
            EXPECT_FALSE(threw) << "allocation " << at;
            continue;
        }
        EXPECT_TRUE(threw) << "allocation " << at << " failed, yet no exception";
        EXPECT_FALSE(fileExists(out)) << "a failed build left an output file (allocation " << at << ")";
        EXPECT_EQ(countDirEntries(opt.workDir), 0) << "shard files left after a failure (allocation " << at << ")";
    }
}

// One shard split over two GPUs (splitOneShard, gnnd::buildSplit): the
// quality of the same build on one GPU, for list lengths of one and two
// segments. Skipped visibly below two GPUs.
TEST(GpuGnndOutOfCore, OneShardSplitOverTwoGpus) {
    FAISS_EXT_REQUIRE_GPUS(2);
    const int k = 32;
    // small: the one shard (600) still past 2 K at buildDegree 64, so split
    const RawFileSet set(sized<int64_t>(40000, 600), 32, kSeed + 29);
    StandardGpuResources r0, r1;
    for (int degree : {0, 64}) {
        GnndFileBuildOptions opt;
        opt.shardSize = set.n;
        opt.splitOneShard = true;
        opt.config.buildDegree = degree;
        opt.workDir = set.tmp.path;
        expectTwoGpusMatchOne(set, k, opt, r0, r1, "one shard, buildDegree " + std::to_string(degree),
                              [](const GnndFileBuildReport& rep, int gpus, const std::string& what) {
                                  EXPECT_EQ(rep.shards, 1) << what;
                                  EXPECT_EQ(rep.merges, 0) << what;
                                  EXPECT_EQ(rep.buildDevices, gpus) << what;
                              });
    }
}

TEST(GpuGnndOutOfCore, BadFilesAreClearErrors) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t n = 3000;
    const int d = 16, k = 16;
    auto x = clusteredVectors(n, d, 8, kSeed);
    TempDir tmp;
    const std::string fv = tmp.file("ok.fvecs"), raw = tmp.file("ok.f32"), cut = tmp.file("cut.fvecs");
    writeFvecs(fv, x.data(), n, d);
    writeRaw(raw, x.data(), x.size() * sizeof(float));
    {
        std::ifstream in(fv, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::ofstream outCut(cut, std::ios::binary);
        outCut.write(bytes.data(), bytes.size() - 10);  // the last record cut short
    }
    StandardGpuResources res;
    const std::string out = tmp.file("g.ivecs");
    auto build = [&](const std::string& path, VectorFileFormat f, int dd, const std::string& outPath) {
        return faiss_ext::gpu::gnndBuildFromFile({&res}, path, f, dd, k, FlatMetric::L2, outPath);
    };
    auto expectError = [&](auto&& fn, const std::string& what, const std::string& mention) {
        try {
            fn();
            ADD_FAILURE() << what << ": no exception";
        } catch (const faiss::FaissException& e) {
            if (!mention.empty()) {
                EXPECT_NE(std::string(e.what()).find(mention), std::string::npos)
                        << what << ": the message does not name " << mention << ": " << e.what();
            }
        } catch (const std::exception& e) {
            ADD_FAILURE() << what << ": not a faiss::FaissException: " << e.what();
        }
    };
    expectError([&] { build(tmp.file("absent.fvecs"), VectorFileFormat::Fvecs, 0, out); }, "absent file",
                "absent.fvecs");
    expectError([&] { build(fv, VectorFileFormat::Fvecs, d + 1, out); }, "fvecs with a wrong d", "");
    expectError([&] { build(cut, VectorFileFormat::Fvecs, 0, out); }, "truncated fvecs", "cut.fvecs");
    expectError([&] { build(raw, VectorFileFormat::RawFloat32, 0, out); }, "raw without d", "");
    // 3000 * 16 floats is not a whole number of rows of 31.
    expectError([&] { build(raw, VectorFileFormat::RawFloat32, 31, out); }, "raw with a wrong d", "");
    expectError([&] { build(fv, VectorFileFormat::Fvecs, 0, tmp.file("no/such/dir/g.ivecs")); },
                "unwritable output", "");
    {
        GnndFileBuildOptions opt;
        opt.hostMemoryBytes = 0;
        opt.workDir = tmp.file("no/such/work/dir");
        expectError([&] { faiss_ext::gpu::gnndBuildFromFile({&res}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out, opt); },
                    "unwritable work directory with shard files", "no/such/work/dir");
        opt.hostMemoryBytes = -2;
        opt.workDir.clear();
        expectError([&] { faiss_ext::gpu::gnndBuildFromFile({&res}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out, opt); },
                    "hostMemoryBytes = -2", "hostMemoryBytes");
    }
    expectError([&] { faiss_ext::gpu::gnndBuildFromFile({}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out); },
                "no providers", "");
    expectError([&] { faiss_ext::gpu::gnndBuildFromFile({&res}, fv, VectorFileFormat::Fvecs, 0, 0, FlatMetric::L2, out); },
                "k = 0", "");
    int64_t gn = 0;
    int gk = 0;
    expectError([&] { faiss_ext::gpu::readGraphIvecs(tmp.file("absent.ivecs"), &gn, &gk); }, "absent graph",
                "absent.ivecs");
    expectError([&] { faiss_ext::gpu::readGraphIvecs(cut, &gn, &gk); }, "graph file that is not ivecs", "");
    EXPECT_FALSE(fileExists(out)) << "a failed build left an output file";
    // The good files still build.
    const GnndFileBuildReport rep = build(fv, VectorFileFormat::Fvecs, 0, out);
    EXPECT_EQ(rep.n, n);
    EXPECT_EQ(rep.d, d);
}

// ---- search ----

namespace {

/// Checks search results (empty string when fine): ids valid and distinct
/// per query, distances sorted and equal to the exact ones (relative 1e-4).
std::string checkSearchResults(const float* x, int64_t n, const float* q, int64_t nq, int d, bool ip,
                               const float* D, const int64_t* I, int k) {
    for (int64_t i = 0; i < nq; ++i) {
        std::set<int64_t> seen;
        for (int j = 0; j < k; ++j) {
            const int64_t id = I[size_t(i) * k + j];
            std::ostringstream where;
            where << "query " << i << " rank " << j << " id " << id;
            if (id < 0 || id >= n) return where.str() + ": id out of range";
            if (!seen.insert(id).second) return where.str() + ": id repeated";
            double exact = 0;
            for (int t = 0; t < d; ++t) {
                const double a = q[size_t(i) * d + t], b = x[size_t(id) * d + t];
                exact += ip ? a * b : (a - b) * (a - b);
            }
            const float got = D[size_t(i) * k + j];
            if (!(std::fabs(got - exact) <= 1e-4 * std::fabs(exact) + 1e-4)) {
                where << ": distance " << got << ", exact " << exact;
                return where.str();
            }
            if (j > 0) {
                const float prev = D[size_t(i) * k + j - 1];
                if (ip ? got > prev : got < prev) {
                    where << ": not sorted (" << prev << " then " << got << ")";
                    return where.str();
                }
            }
        }
    }
    return "";
}

}  // namespace

TEST(GpuGnnd, SearchHeldOutQueries) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    // small: n still past the 1024 slots of the search's hash set and L = 256
    const int64_t n = sized<int64_t>(20000, 1500), nq = sized<int64_t>(1000, 100);
    const int d = 32, k = 32, kq = 10;
    auto all = clusteredVectors(n + nq, d, 40, kSeed + 13);  // one mixture: base and held-out queries
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    for (FlatMetric m : {FlatMetric::L2, FlatMetric::Cosine}) {
        const bool ip = similarity(m);
        auto xp = prepared(m, x, n, d);
        auto qp = prepared(m, q, nq, d);
        auto ref = exactSearch(xp.data(), n, qp.data(), nq, d, kq, ip);
        GpuKnnGraphGNND index(&res, d, k, m);
        index.add(n, x.data());
        for (int L : {0, 256}) {
            const std::string what = describe("clustered", n, d, k, m) + " searchL=" + std::to_string(L);
            std::vector<float> D(size_t(nq) * kq);
            std::vector<int64_t> I(size_t(nq) * kq);
            SearchParametersGNND params;
            params.searchL = L;
            index.search(nq, q.data(), kq, D.data(), I.data(), &params);
            const double recall = searchRecall(xp.data(), n, qp.data(), nq, d, ip, I.data(), kq, ref.data(), kq, kq);
            std::printf("[gnnd] search %s: recall@10 %.4f\n", what.c_str(), recall);
            EXPECT_GE(recall, 0.9) << what;
            EXPECT_EQ("", checkSearchResults(xp.data(), n, qp.data(), nq, d, ip, D.data(), I.data(), kq)) << what;
        }
    }
}

TEST(GpuGnnd, SearchPadsPastNtotal) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 100, nq = 5;
    const int d = 8, k = 32, kq = 150;
    auto x = clusteredVectors(n, d, 4, kSeed);
    auto q = clusteredVectors(nq, d, 4, kSeed + 1);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(n, x.data());
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    index.search(nq, q.data(), kq, D.data(), I.data());
    // The pool (>= kq > ntotal) holds every vector: the exact result, padded.
    faiss::IndexFlatL2 cpu(d);
    cpu.add(n, x.data());
    std::vector<float> refD(size_t(nq) * kq);
    std::vector<int64_t> refI(size_t(nq) * kq);
    cpu.search(nq, q.data(), kq, refD.data(), refI.data());
    for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = n; j < kq; ++j) EXPECT_EQ(I[size_t(i) * kq + j], -1) << "query " << i << " rank " << j;
    EXPECT_EQ("", compareKnn(nq, kq, D.data(), I.data(), refD.data(), refI.data(), false));

    // searchL below k is refused; an empty index pads everything.
    SearchParametersGNND params;
    params.searchL = 5;
    EXPECT_THROW(index.search(nq, q.data(), 10, D.data(), I.data(), &params), faiss::FaissException);
    GpuKnnGraphGNND empty(&res, d, k);
    std::fill(I.begin(), I.end(), 3);
    empty.search(nq, q.data(), 4, D.data(), I.data());
    for (int j = 0; j < nq * 4; ++j) EXPECT_EQ(I[j], -1);
}

// ---- the CPU twin: faiss::IndexNNDescentFlat, FAISS I/O, NSG ----

TEST(GpuGnnd, CpuTwinIoAndNsg) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = sized<int64_t>(10000, 3000), nq = sized<int64_t>(500, 100);
    const int d = 32, k = 32, kq = 10, L = 64;
    auto all = clusteredVectors(n + nq, d, 20, kSeed + 17);
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    auto ref = exactSearch(x.data(), n, q.data(), nq, d, kq, false);
    auto score = [&](const std::vector<int64_t>& I) {
        return searchRecall(x.data(), n, q.data(), nq, d, false, I.data(), kq, ref.data(), kq, kq);
    };

    GpuKnnGraphGNND index(&res, d, k);
    index.add(n, x.data());
    const std::vector<int> graph = index.getGraphInt();
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    SearchParametersGNND params;
    params.searchL = L;
    index.search(nq, q.data(), kq, D.data(), I.data(), &params);
    const double ours = score(I);

    // copyTo: vectors and graph; FAISS's own search on it.
    faiss::IndexNNDescentFlat cpu(d, 16);
    index.copyTo(&cpu);
    EXPECT_EQ(cpu.ntotal, n);
    EXPECT_EQ(cpu.d, d);
    EXPECT_EQ(cpu.nndescent.K, k);
    EXPECT_TRUE(cpu.nndescent.has_built);
    EXPECT_EQ(cpu.nndescent.ntotal, n);
    EXPECT_EQ(cpu.nndescent.final_graph, graph);
    std::vector<float> v(d);
    cpu.reconstruct(n / 2, v.data());
    EXPECT_TRUE(std::equal(v.begin(), v.end(), x.begin() + size_t(n / 2) * d));
    std::vector<float> cD(size_t(nq) * kq);
    std::vector<int64_t> cI(size_t(nq) * kq);
    {
        // With the search_L copyTo wrote (from our searchL = 0, "automatic"),
        // FAISS's search on the twin is as good as our default search.
        index.search(nq, q.data(), kq, D.data(), I.data());
        const double oursDefault = score(I);
        cpu.search(nq, q.data(), kq, cD.data(), cI.data());
        const double twinDefault = score(cI);
        std::printf("[gnnd] default search: ours %.4f, FAISS on the twin (search_L = %d) %.4f\n", oursDefault,
                    cpu.nndescent.search_L, twinDefault);
        EXPECT_GE(twinDefault, oursDefault - 0.05) << "the twin's search_L = " << cpu.nndescent.search_L;
    }
    cpu.nndescent.search_L = L;
    cpu.search(nq, q.data(), kq, cD.data(), cI.data());
    const double faissRecall = score(cI);
    std::printf("[gnnd] search recall@10 at L=%d: ours %.4f, FAISS CPU on our graph %.4f\n", L, ours, faissRecall);
    EXPECT_GE(ours, 0.9);
    EXPECT_GE(faissRecall, 0.9);
    EXPECT_NEAR(ours, faissRecall, 0.05);

    // FAISS I/O round trip.
    faiss::VectorIOWriter w;
    faiss::write_index(&cpu, &w);
    faiss::VectorIOReader r;
    r.data = w.data;
    std::unique_ptr<faiss::Index> back(faiss::read_index(&r));
    auto* nnd = dynamic_cast<faiss::IndexNNDescentFlat*>(back.get());
    ASSERT_NE(nnd, nullptr) << "read_index did not give an IndexNNDescentFlat";
    EXPECT_EQ(nnd->ntotal, n);
    EXPECT_EQ(nnd->nndescent.K, k);
    EXPECT_EQ(nnd->nndescent.final_graph, graph);
    std::vector<float> bD(size_t(nq) * kq);
    std::vector<int64_t> bI(size_t(nq) * kq);
    nnd->search(nq, q.data(), kq, bD.data(), bI.data());
    EXPECT_EQ(bI, cI);

    // copyFrom back: the same graph (K becomes the degree).
    GpuKnnGraphGNND again(&res, nnd);
    EXPECT_EQ(again.ntotal, n);
    EXPECT_EQ(again.getGraphDegree(), k);
    EXPECT_EQ(again.getGraphInt(), graph);
    GpuKnnGraphGNND other(&res, d, 16);
    other.copyFrom(nnd);
    EXPECT_EQ(other.getGraphDegree(), k);
    EXPECT_EQ(other.getGraphInt(), graph);
    const Graph g = fetchGraph(other);
    EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.ids.data(), g.dist.data(), k));
    other.search(nq, q.data(), kq, D.data(), I.data(), &params);
    EXPECT_GE(score(I), 0.9);

    // copyToCpuIndex: the twin as a new object.
    std::unique_ptr<faiss::Index> twin(index.copyToCpuIndex());
    auto* twinNnd = dynamic_cast<faiss::IndexNNDescentFlat*>(twin.get());
    ASSERT_NE(twinNnd, nullptr);
    EXPECT_EQ(twinNnd->nndescent.final_graph, graph);

    // NSG built from our graph.
    std::unique_ptr<faiss::IndexNSGFlat> nsg(index.toIndexNSG(32));
    ASSERT_NE(nsg, nullptr);
    EXPECT_EQ(nsg->ntotal, n);
    EXPECT_TRUE(nsg->is_built);
    nsg->nsg.search_L = L;
    std::vector<float> nD(size_t(nq) * kq);
    std::vector<int64_t> nI(size_t(nq) * kq);
    nsg->search(nq, q.data(), kq, nD.data(), nI.data());
    const double nsgRecall = score(nI);
    std::printf("[gnnd] NSG(32) from our graph: recall@10 %.4f at search_L=%d\n", nsgRecall, L);
    EXPECT_GE(nsgRecall, 0.9);
}

TEST(GpuGnnd, CosineCpuTwinPreparesQueries) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 5000, nq = 100;
    const int d = 24, k = 32, kq = 10;
    auto all = clusteredVectors(n + nq, d, 10, kSeed + 19);
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    GpuKnnGraphGNND index(&res, d, k, FlatMetric::Cosine);
    index.add(n, x.data());
    std::unique_ptr<faiss::Index> twin(index.copyToCpuIndex());
    ASSERT_NE(dynamic_cast<faiss::IndexPreTransform*>(twin.get()), nullptr);
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    twin->search(nq, q.data(), kq, D.data(), I.data());
    auto xp = prepared(FlatMetric::Cosine, x, n, d), qp = prepared(FlatMetric::Cosine, q, nq, d);
    auto ref = exactSearch(xp.data(), n, qp.data(), nq, d, kq, true);
    auto* inner = dynamic_cast<faiss::IndexNNDescentFlat*>(dynamic_cast<faiss::IndexPreTransform*>(twin.get())->index);
    ASSERT_NE(inner, nullptr);
    EXPECT_GE(searchRecall(xp.data(), n, qp.data(), nq, d, true, I.data(), kq, ref.data(), kq, kq), 0.9)
            << "FAISS search on the twin, its search_L = " << inner->nndescent.search_L;
    int aboveOne = 0;
    for (int64_t i = 0; i < nq * kq; ++i) aboveOne += D[i] > 1.0f + 1e-5f;
    EXPECT_EQ(aboveOne, 0) << "cosines above 1: the queries were not normalised";
}

// ---- memory estimate ----

TEST(GpuGnnd, MemoryEstimate) {
    FAISS_EXT_REQUIRE_GPU();
    const auto small = GpuKnnGraphGNND::estimateMemory(100000, 128, 64);
    const auto big = GpuKnnGraphGNND::estimateMemory(1000000, 128, 64);
    EXPECT_GE(small.vectors, size_t(100000) * 128 * 4);
    EXPECT_GE(small.graph, size_t(100000) * 64 * 4);
    EXPECT_GT(small.buildTemp, 0u);
    EXPECT_EQ(small.total(), small.vectors + small.graph + small.buildTemp);
    EXPECT_GT(big.total(), small.total());
    StandardGpuResources res;
    GpuKnnGraphGNND index(&res, 128, 64);
    EXPECT_TRUE(index.addFits(10000));
    StandardGpuResources tight;
    tight.setDeviceMemoryLimit(size_t(1) << 20);
    GpuKnnGraphGNND limited(&tight, 128, 64);
    EXPECT_FALSE(limited.addFits(1000000));
}

// ---- bad input ----

TEST(GpuGnnd, BadInputIsAClearError) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int d = 16;
    for (int k : {0, -1, 1025}) EXPECT_THROW(GpuKnnGraphGNND(&res, d, k), faiss::FaissException) << "k=" << k;
    EXPECT_THROW(GpuKnnGraphGNND(&res, 0, 32), faiss::FaissException);
    EXPECT_THROW(GpuKnnGraphGNND(&res, d, 32, faiss::METRIC_L1), faiss::FaissException);
    auto badConfig = [&](auto&& edit, const char* what) {
        GpuKnnGraphGNNDConfig cfg;
        edit(cfg);
        EXPECT_THROW(GpuKnnGraphGNND(&res, d, 32, FlatMetric::L2, cfg), faiss::FaissException) << what;
        GpuKnnGraphGNND index(&res, d, 32);
        const int before = index.getConfig().samples;
        EXPECT_THROW(index.setConfig(cfg), faiss::FaissException) << "setConfig: " << what;
        EXPECT_EQ(index.getConfig().samples, before) << "setConfig changed the index: " << what;
    };
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.samples = 0; }, "samples 0");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.samples = 33; }, "samples 33");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.maxIterations = 0; }, "maxIterations 0");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.terminationThreshold = -0.1f; }, "threshold -0.1");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.terminationThreshold = 1.0f; }, "threshold 1");
    badConfig([](GpuKnnGraphGNNDConfig& c) { c.buildDegree = 40; }, "buildDegree 40");
    {
        GpuKnnGraphGNNDConfig cfg;
        cfg.buildDegree = 32;
        EXPECT_THROW(GpuKnnGraphGNND(&res, d, 64, FlatMetric::L2, cfg), faiss::FaissException)
                << "buildDegree below the degree";
        GpuKnnGraphGNNDConfig neg;
        neg.searchL = -1;
        EXPECT_THROW(GpuKnnGraphGNND(&res, d, 32, FlatMetric::L2, neg), faiss::FaissException) << "searchL -1";
    }

    // Valid config changes are taken; buildDegree only while empty.
    auto x = clusteredVectors(500, d, 4, kSeed);
    GpuKnnGraphGNND index(&res, d, 32);
    GpuKnnGraphGNNDConfig cfg = index.getConfig();
    cfg.samples = 16;
    index.setConfig(cfg);
    EXPECT_EQ(index.getConfig().samples, 16);
    index.add(500, x.data());
    cfg.buildDegree = 64;
    EXPECT_THROW(index.setConfig(cfg), faiss::FaissException) << "buildDegree changed on a built index";
    EXPECT_EQ(index.getBuildDegree(), 32);

    // null x, wrong d in copyFrom: errors, the index unchanged.
    const std::vector<int> graph = index.getGraphInt();
    EXPECT_THROW(index.add(10, nullptr), faiss::FaissException);
    EXPECT_EQ(index.ntotal, 500);
    faiss::IndexNNDescentFlat wrongD(d + 1, 32);
    EXPECT_THROW(index.copyFrom(&wrongD), faiss::FaissException);
    EXPECT_EQ(index.ntotal, 500);
    EXPECT_EQ(index.getGraphInt(), graph);
    EXPECT_THROW(index.copyFrom(nullptr), faiss::FaissException);
    EXPECT_EQ(index.getGraphInt(), graph);
    std::vector<float> v(d);
    EXPECT_THROW(index.reconstruct(500, v.data()), faiss::FaissException);
    EXPECT_THROW(index.reconstruct(-1, v.data()), faiss::FaissException);
    EXPECT_THROW(index.add_with_ids(1, x.data(), nullptr), faiss::FaissException);
}

// ---- small shapes for compute-sanitizer (memcheck, racecheck, synccheck) ----

TEST(GnndSanitize, BuildMergeSearch) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t n = 3000, nq = 50;
    const int d = 32, k = 32, kq = 10;
    auto all = clusteredVectors(n + nq, d, 8, kSeed + 23);
    std::vector<float> x(all.begin(), all.begin() + size_t(n) * d);
    std::vector<float> q(all.begin() + size_t(n) * d, all.end());
    auto ref = exactGraph(x.data(), n, d, kR, false);
    GpuKnnGraphGNND index(&res, d, k);
    index.add(2000, x.data());                      // one GNND build
    index.add(n - 2000, x.data() + size_t(2000) * d);  // one GGM merge
    const auto& log = index.getBuildLog();
    EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const auto& s) { return s.merge; }));
    const double recall = checkIndex(index, x, ref.data(), kR, "sanitize build + merge");
    EXPECT_GE(recall, 0.9);
    auto qref = exactSearch(x.data(), n, q.data(), nq, d, kq, false);
    std::vector<float> D(size_t(nq) * kq);
    std::vector<int64_t> I(size_t(nq) * kq);
    SearchParametersGNND params;
    params.searchL = 32;
    index.search(nq, q.data(), kq, D.data(), I.data(), &params);
    EXPECT_GE(searchRecall(x.data(), n, q.data(), nq, d, false, I.data(), kq, qref.data(), kq, kq), 0.9);
}

// The split build's kernels (node-range joins, the in-place merge of the
// copies over peer access and the staged path without it) at a size the
// sanitizers finish quickly. Needs 2 GPUs (skipped visibly with fewer).
TEST(GnndSanitize, SplitBuildOverTwoGpus) {
    FAISS_EXT_REQUIRE_GPUS(2);
    StandardGpuResources r0, r1;
    const int64_t n = 3000;
    const int d = 32, k = 32;
    const auto x = clusteredVectors(n, d, 8, kSeed + 37);
    const auto ref = exactGraph(x.data(), n, d, kR, false);
    for (bool noPeer : {false, true}) {
        GpuKnnGraphGNNDConfig cfg;
        cfg.buildDegree = 64;
        GpuKnnGraphGNND index(&r0, d, k, FlatMetric::L2, cfg);
        index.setBuildDevices({&r1}, {1});
        {
            PeerAccessIgnored peer(noPeer);
            index.add(n, x.data());
        }
        const double recall = checkIndex(index, x, ref.data(), kR, noPeer ? "split, staged" : "split, peer");
        EXPECT_GE(recall, 0.9) << (noPeer ? "staged copies" : "peer access");
    }
}
