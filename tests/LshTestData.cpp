#include "LshTestData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

#include "TestUtils.h"

namespace faiss_ext {
namespace lshtest {

namespace {

bool fileExists(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return bool(f);
}

/// Reads the rows of a TEXMEX file (.fvecs: float, .bvecs: uint8) as floats,
/// the rows listed in `rows` only (ascending) or all when rows is null.
template <typename T>
std::vector<float> readVecsRows(const std::string& path, const std::vector<int64_t>* rows, int* d,
                                int64_t* nRows) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<float> out;
    std::vector<T> row;
    int32_t dim = 0;
    int64_t r = 0;
    size_t next = 0;
    while (f.read(reinterpret_cast<char*>(&dim), 4)) {
        if (dim <= 0 || dim > (1 << 20)) throw std::runtime_error("bad record in " + path);
        row.resize(dim);
        if (!f.read(reinterpret_cast<char*>(row.data()), std::streamsize(sizeof(T)) * dim))
            throw std::runtime_error("truncated file " + path);
        if (*d != 0 && *d != dim) throw std::runtime_error("rows of different lengths in " + path);
        *d = dim;
        if (!rows || (next < rows->size() && (*rows)[next] == r)) {
            out.insert(out.end(), row.begin(), row.end());
            ++next;
        }
        ++r;
    }
    if (rows && next != rows->size())
        throw std::runtime_error(path + " has only " + std::to_string(r) + " rows");
    *nRows = r;
    return out;
}

/// Rows of a file without reading its values (record length from the header).
int64_t countRows(const std::string& path, size_t elemSize) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw std::runtime_error("cannot open " + path);
    const int64_t bytes = int64_t(f.tellg());
    f.seekg(0);
    int32_t dim = 0;
    if (!f.read(reinterpret_cast<char*>(&dim), 4) || dim <= 0)
        throw std::runtime_error("bad header in " + path);
    const int64_t rec = 4 + int64_t(elemSize) * dim;
    if (bytes % rec != 0) throw std::runtime_error(path + " is not a whole number of records");
    return bytes / rec;
}

/// Files of a real set (README of ../shared/data) and its base size.
struct SetFiles {
    std::string base, query, gtDist;
    bool bytes = false;  ///< .bvecs (uint8) rather than .fvecs
    int64_t nb = 0;      ///< rows of the complete base file
};

bool setFiles(const std::string& name, SetFiles* f) {
    const std::string dir = test::dataDir();
    if (name == "siftsmall") {
        f->base = dir + "/siftsmall/siftsmall_base.fvecs";
        f->query = dir + "/siftsmall/siftsmall_query.fvecs";
        f->gtDist = dir + "/siftsmall/siftsmall_query_gt100_l2_dist.fvecs";
        f->nb = 10000;
    } else if (name == "fashion-mnist") {
        f->base = dir + "/fashion-mnist/fashion-mnist_base.bvecs";
        f->query = dir + "/fashion-mnist/fashion-mnist_query.bvecs";
        f->gtDist = dir + "/fashion-mnist/fashion-mnist_query_gt100_l2_dist.fvecs";
        f->bytes = true;
        f->nb = 60000;
    } else if (name == "pointcloud-rs") {
        f->base = dir + "/pointcloud-rs/rs1_base.fvecs";
        f->query = dir + "/pointcloud-rs/rs22_query.fvecs";
        f->gtDist = dir + "/pointcloud-rs/rs22_query_gt100_l2_dist.fvecs";
        f->nb = 114373;
    } else {
        return false;
    }
    return !dir.empty();
}

/// The first maxRows rows of a file (all when <= 0).
std::vector<float> readFirst(const std::string& path, bool bytes, int64_t maxRows, int* d,
                             int64_t* rows) {
    std::vector<int64_t> want;
    int64_t total = 0;
    if (maxRows > 0) {
        total = countRows(path, bytes ? 1 : 4);
        for (int64_t i = 0; i < std::min(maxRows, total); ++i) want.push_back(i);
    }
    std::vector<float> v =
        bytes ? readVecsRows<uint8_t>(path, maxRows > 0 ? &want : nullptr, d, &total)
              : readVecsRows<float>(path, maxRows > 0 ? &want : nullptr, d, &total);
    *rows = int64_t(v.size() / size_t(*d));
    return v;
}

}  // namespace

const std::vector<std::string>& realSetNames() {
    static const std::vector<std::string> names = {"siftsmall", "fashion-mnist", "pointcloud-rs"};
    return names;
}

const RealSet& realVectors(const std::string& name, int64_t maxBase, int64_t maxQueries) {
    static std::map<std::tuple<std::string, int64_t, int64_t>, RealSet> cache;
    const auto key = std::make_tuple(name, maxBase, maxQueries);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    RealSet s;
    s.name = name;
    SetFiles f;
    if (!setFiles(name, &f)) {
        s.missing = "unknown data set " + name + " or no data folder (set FAISS_EXT_DATA_DIR)";
    } else if (!fileExists(f.base)) {
        s.missing = f.base + " not found (set FAISS_EXT_DATA_DIR to the shared data folder)";
    } else if (!fileExists(f.query) && name != "fashion-mnist") {
        s.missing = f.query + " not found (set FAISS_EXT_DATA_DIR to the shared data folder)";
    }
    if (s.missing.empty()) {
        try {
            int dq = 0;
            if (fileExists(f.query)) {
                s.base = readFirst(f.base, f.bytes, maxBase, &s.d, &s.nb);
                s.query = readFirst(f.query, f.bytes, maxQueries, &dq, &s.nq);
                if (dq != s.d) throw std::runtime_error("base and query dimensions differ");
            } else {  // fashion-mnist: queries from the base rows after maxBase
                if (maxBase <= 0 || maxQueries <= 0)
                    throw std::runtime_error(f.query + " not found, and no base rows are held out");
                int64_t rows = 0;
                std::vector<float> all =
                    readFirst(f.base, f.bytes, maxBase + maxQueries, &s.d, &rows);
                if (rows <= maxBase)
                    throw std::runtime_error(f.base + " has no rows past " +
                                             std::to_string(maxBase));
                s.nb = maxBase;
                s.nq = rows - maxBase;
                s.base.assign(all.begin(), all.begin() + size_t(maxBase) * s.d);
                s.query.assign(all.begin() + size_t(maxBase) * s.d, all.end());
            }
        } catch (const std::exception& e) {
            s.missing = std::string("unreadable: ") + e.what();
            ADD_FAILURE() << name << ": " << s.missing;
        }
    }
    return cache.emplace(key, std::move(s)).first->second;
}

const RealSet& realSet(const std::string& name, int64_t maxQueries) {
    static std::map<std::pair<std::string, int64_t>, RealSet> cache;
    const auto key = std::make_pair(name, maxQueries);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    RealSet s;
    s.name = name;
    SetFiles files;
    if (!setFiles(name, &files))
        s.missing = "unknown data set " + name + " or no data folder (set FAISS_EXT_DATA_DIR)";
    const std::string base = files.base, query = files.query, gtd = files.gtDist;
    const bool bytes = files.bytes;
    if (s.missing.empty()) {
        for (const std::string& f : {base, query, gtd})
            if (!fileExists(f)) {
                s.missing = f + " not found (set FAISS_EXT_DATA_DIR to the shared data folder)";
                break;
            }
    }
    if (s.missing.empty()) {
        try {
            const int64_t allQ = countRows(query, bytes ? 1 : 4);
            const int64_t m = maxQueries > 0 ? std::min(maxQueries, allQ) : allQ;
            std::vector<int64_t> rows(m);
            for (int64_t i = 0; i < m; ++i) rows[i] = i * allQ / m;
            int64_t nRows = 0;
            int dq = 0, kg = 0;
            // a staged partial copy (the GPU machine's) is skipped, not scored
            if (countRows(base, bytes ? 1 : 4) != files.nb || countRows(gtd, 4) != allQ) {
                s.missing = base + " or " + query + " is not the complete set (the stored ground " +
                            "truth is for " + std::to_string(files.nb) +
                            " base rows and every query)";
                return cache.emplace(key, std::move(s)).first->second;
            }
            s.base = bytes ? readVecsRows<uint8_t>(base, nullptr, &s.d, &s.nb)
                           : readVecsRows<float>(base, nullptr, &s.d, &s.nb);
            s.query = bytes ? readVecsRows<uint8_t>(query, &rows, &dq, &nRows)
                            : readVecsRows<float>(query, &rows, &dq, &nRows);
            s.gtDist = readVecsRows<float>(gtd, &rows, &kg, &nRows);
            if (dq != s.d) throw std::runtime_error("base and query dimensions differ");
            if (nRows != allQ)
                throw std::runtime_error(gtd + " has a row count unlike the queries'");
            if (kg < 10) throw std::runtime_error(gtd + " has fewer than 10 columns");
            s.kGt = kg;
            s.nq = m;
        } catch (const std::exception& e) {
            s.missing = std::string("unreadable: ") + e.what();
            ADD_FAILURE() << name << ": " << s.missing;
        }
    }
    return cache.emplace(key, std::move(s)).first->second;
}

double recallAt10(const RealSet& set, int64_t nq, const int64_t* labels, int64_t k) {
    if (nq <= 0 || k < 10) return 0.0;
    int64_t hits = 0;
    const int d = set.d;
    for (int64_t q = 0; q < nq; ++q) {
        const double t10 = double(set.gtDist[size_t(q) * set.kGt + 9]);
        const float* a = set.query.data() + size_t(q) * d;
        std::set<int64_t> seen;
        for (int j = 0; j < 10; ++j) {
            const int64_t id = labels[size_t(q) * k + j];
            if (id < 0 || id >= set.nb || !seen.insert(id).second) continue;
            const float* b = set.base.data() + size_t(id) * d;
            double s = 0;
            for (int t = 0; t < d; ++t) {
                const double u = double(a[t]) - double(b[t]);
                s += u * u;
            }
            if (s <= t10 * (1.0 + 1e-6)) ++hits;
        }
    }
    return double(hits) / double(nq * 10);
}

namespace {

/// Position of the first differing element (bitwise for floats), or -1.
template <typename T>
int64_t firstDifference(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return int64_t(std::min(a.size(), b.size()));
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return int64_t(i);
    return -1;
}

}  // namespace

std::string modelDifference(const BiLevelLSHModel& a, const BiLevelLSHModel& b) {
    std::string out;
    auto field = [&](const char* name, int64_t at) {
        if (at >= 0)
            out += std::string(out.empty() ? "" : ", ") + name + " (at " + std::to_string(at) + ")";
    };
    if (a.d != b.d || a.depth != b.depth || a.nTables != b.nTables ||
        a.nProjections != b.nProjections || a.bits != b.bits || a.lattice != b.lattice)
        out = "sizes";
    field("nodeRule", firstDifference(a.nodeRule, b.nodeRule));
    field("nodeVec", firstDifference(a.nodeVec, b.nodeVec));
    field("nodeThreshold", firstDifference(a.nodeThreshold, b.nodeThreshold));
    field("leafMean", firstDifference(a.leafMean, b.leafMean));
    field("leafWidth", firstDifference(a.leafWidth, b.leafWidth));
    field("leafOffset", firstDifference(a.leafOffset, b.leafOffset));
    field("leafTrainCount", firstDifference(a.leafTrainCount, b.leafTrainCount));
    field("proj", firstDifference(a.proj, b.proj));
    field("projBias", firstDifference(a.projBias, b.projBias));
    return out;
}

std::vector<float> coreAndOutliers(int64_t n, int d, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    const int far = 6;
    std::vector<float> dirs(size_t(far) * d);
    for (int c = 0; c < far; ++c) {
        double norm = 0;
        for (int j = 0; j < d; ++j) {
            dirs[size_t(c) * d + j] = g(rng);
            norm += double(dirs[size_t(c) * d + j]) * dirs[size_t(c) * d + j];
        }
        for (int j = 0; j < d; ++j)
            dirs[size_t(c) * d + j] = float(dirs[size_t(c) * d + j] / std::sqrt(norm));
    }
    std::vector<float> x(size_t(n) * d);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int64_t i = 0; i < n; ++i) {
        const bool outlier = u(rng) < 0.03f;
        const int c = int(u(rng) * far) % far;
        for (int j = 0; j < d; ++j)
            x[size_t(i) * d + j] = g(rng) + (outlier ? 60.f * dirs[size_t(c) * d + j] : 0.f);
    }
    return x;
}

std::vector<uint64_t> distinctKeys(size_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::unordered_set<uint64_t> seen;
    std::vector<uint64_t> keys;
    keys.reserve(n);
    if (n >= 2) {
        keys.push_back(0);
        keys.push_back(~uint64_t(0));
        seen.insert(0);
        seen.insert(~uint64_t(0));
    }
    while (keys.size() < n) {
        const uint64_t k = rng();
        if (seen.insert(k).second) keys.push_back(k);
    }
    return keys;
}

BiLevelAutoTuneOptions smallTuneOptions(double target) {
    BiLevelAutoTuneOptions opt;
    opt.targetRecall = target;
    opt.treeDepths = {0, 2};
    opt.tablesProjections = {{8, 8}, {12, 10}};
    opt.bucketWidths = {2.f, 3.f, 4.f};
    opt.nprobes = {1, 4, 16};
    opt.groupSettings = {{1, 0.f}, {4, 0.05f}};
    return opt;
}

bool sameTunedSettings(const BiLevelLSHConfig& a, const BiLevelLSHConfig& b) {
    return a.treeDepth == b.treeDepth && a.nTables == b.nTables &&
           a.nProjections == b.nProjections && a.bucketWidth == b.bucketWidth &&
           a.lattice == b.lattice && a.defaultNprobe == b.defaultNprobe &&
           a.defaultGroupProbes == b.defaultGroupProbes &&
           a.defaultGroupMargin == b.defaultGroupMargin &&
           a.defaultMinCandidates == b.defaultMinCandidates;
}

RecallPlan recallPlan(const std::string& name) {
    RecallPlan p;
    p.tables = {1, 2, 5, 10};
    p.config.nTables = 10;
    // the widths below were found with the RMS radius rule (before widths
    // came from neighbour distances); the new rule has its own tests
    p.config.widthRule = BiLevelWidthRule::RmsRadius;
    if (name == "siftsmall") {
        p.config.treeDepth = 2;
        p.config.nProjections = 8;
        p.config.bucketWidth = 2.f;
        p.groupProbes = 2;
        p.nprobes = {1, 4, 16, 64};
        p.tablesNprobe = 16;
        p.queries = 100;
    } else if (name == "fashion-mnist") {
        p.config.treeDepth = 2;
        p.config.nProjections = 10;
        p.config.bucketWidth = 2.f;
        p.groupProbes = 3;
        p.nprobes = {1, 4, 16, 32};
        p.tablesNprobe = 16;
        p.queries = 300;
    } else {  // pointcloud-rs
        p.config.treeDepth = 4;
        p.config.nProjections = 2;
        p.config.bucketWidth = 0.2f;
        p.groupProbes = 4;
        p.nprobes = {1, 3, 5, 9};
        p.tablesNprobe = 9;
        p.queries = 500;
    }
    return p;
}

}  // namespace lshtest
}  // namespace faiss_ext
