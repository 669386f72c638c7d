#include "LshTestData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

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

}  // namespace

const std::vector<std::string>& realSetNames() {
    static const std::vector<std::string> names = {"siftsmall", "fashion-mnist", "pointcloud-rs"};
    return names;
}

const RealSet& realSet(const std::string& name, int64_t maxQueries) {
    static std::map<std::pair<std::string, int64_t>, RealSet> cache;
    const auto key = std::make_pair(name, maxQueries);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    RealSet s;
    s.name = name;
    const std::string dir = test::dataDir();
    std::string base, query, gtd;
    bool bytes = false;
    if (name == "siftsmall") {
        base = dir + "/siftsmall/siftsmall_base.fvecs";
        query = dir + "/siftsmall/siftsmall_query.fvecs";
        gtd = dir + "/siftsmall/siftsmall_query_gt100_l2_dist.fvecs";
    } else if (name == "fashion-mnist") {
        base = dir + "/fashion-mnist/fashion-mnist_base.bvecs";
        query = dir + "/fashion-mnist/fashion-mnist_query.bvecs";
        gtd = dir + "/fashion-mnist/fashion-mnist_query_gt100_l2_dist.fvecs";
        bytes = true;
    } else if (name == "pointcloud-rs") {
        base = dir + "/pointcloud-rs/rs1_base.fvecs";
        query = dir + "/pointcloud-rs/rs22_query.fvecs";
        gtd = dir + "/pointcloud-rs/rs22_query_gt100_l2_dist.fvecs";
    } else {
        s.missing = "unknown data set " + name;
    }
    if (s.missing.empty()) {
        for (const std::string& f : {base, query, gtd})
            if (dir.empty() || !fileExists(f)) {
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

RecallPlan recallPlan(const std::string& name) {
    RecallPlan p;
    p.tables = {1, 2, 5, 10};
    p.config.nTables = 10;
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
