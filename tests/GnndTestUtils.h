// Shared helpers of the GNND tests (test_gpu_gnnd_build.cpp, _merge,
// _out_of_core, _multi_gpu, _search, _twin) and of the search-graph tests:
// exact references, recall, structure checks, data sets and files.
//
// Recall@r of a graph row i: the fraction of the r true nearest neighbours
// found among the first r entries of our list, where an id counts when it is
// valid, not i itself, not repeated, and no farther from x_i (in double) than
// the true r-th neighbour (so ties count).
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gnndtest {

/// Recall@10 is what every quality check measures.
constexpr int kR = 10;

/// Whether the metric is a similarity (larger is closer).
bool similarity(FlatMetric m);

/// The vectors as the metric compares them (normalised for Cosine, centred
/// and normalised for Pearson), so exact references use plain L2 / IP.
std::vector<float> prepared(FlatMetric m, const std::vector<float>& x, int64_t n, int d);

/// Exact distance (L2: squared) or similarity (IP) of rows i and j, in double.
double pairDistance(const float* x, int d, int64_t i, int64_t j, bool ip);

/// |x_i|^2 in double.
double squaredNorm(const float* x, int d, int64_t i);

/// Exact k-NN graph of x (n x d, already prepared) by faiss::IndexFlat on the
/// CPU: k + 1 neighbours, the row itself dropped by id (the last one dropped
/// when the row is not among them, e.g. for inner product). onGpu: by
/// GpuIndexQuickSelectFlat where a GPU is present.
std::vector<int64_t> exactGraph(const float* x, int64_t n, int d, int k, bool ip,
                                bool onGpu = true);

/// exactGraph, on the CPU in sanitizer-sized runs: the reference is not under
/// test, and the GPU brute force takes minutes under racecheck.
std::vector<int64_t> referenceGraph(const float* x, int64_t n, int d, int k, bool ip);

/// Exact k-NN of queries q (nq x d) among x (n x d), both prepared; k <= n.
std::vector<int64_t> exactSearch(const float* x, int64_t n, const float* q, int64_t nq, int d, int k,
                                 bool ip);

/// Recall@r of a graph (ids: n x k, row i = the list of vector i) against
/// exact lists (ref: n x kRef, self excluded), over all rows. x: the
/// (prepared) vectors; r <= min(k, kRef).
double graphRecall(const float* x, int64_t n, int d, bool ip, const int64_t* ids, int k,
                   const int64_t* ref, int kRef, int r);

/// Same for search results (I: nq x k) of queries q against base x,
/// reference ref (nq x kRef).
double searchRecall(const float* x, int64_t n, const float* q, int64_t nq, int d, bool ip,
                    const int64_t* I, int k, const int64_t* ref, int kRef, int r);

/// Recall@k of search results I (nq x k) against the ids of our exact GPU
/// index (the search-graph tests' measure: ids only, so a tie at the k-th
/// place can cost a hit).
double recallAgainstExactIndex(gpu::StandardGpuResources& res, const std::vector<float>& x,
                               int64_t n, const std::vector<float>& q, int64_t nq, int d, int k,
                               const std::vector<int64_t>& I, FlatMetric metric = FlatMetric::L2);

/// A graph as getGraph returns it.
struct Graph {
    int64_t n = 0;
    int k = 0;
    std::vector<int64_t> ids;
    std::vector<float> dist;
};

/// The graph of an index, from getGraph.
Graph fetchGraph(const gpu::GpuKnnGraphGNND& index);

/// Checks a graph's structure (empty string when fine): every id in
/// [0, n), no self loop, no id twice in a list, distances sorted (L2
/// ascending, similarities descending) and equal to the exact distance of
/// the pair (relative 1e-4, plus float rounding of the norms' scale).
/// dist may be null (ids only). x: the prepared vectors.
std::string checkStructure(const float* x, int64_t n, int d, bool ip, const int64_t* ids,
                           const float* dist, int k);

/// Structure and recall@min(k, 10) of an index's graph against exact lists
/// (ref: n x kRef over the index's own vectors `xp`, prepared).
double checkIndex(const gpu::GpuKnnGraphGNND& index, const std::vector<float>& xp,
                  const int64_t* ref, int kRef, const std::string& what);

/// Builds a graph of x in one add and returns it with its recall.
double buildAndScore(gpu::StandardGpuResources& res, const std::vector<float>& x, int64_t n, int d,
                     int k, FlatMetric metric, const int64_t* ref, int kRef,
                     const std::string& what, gpu::GpuKnnGraphGNNDConfig cfg = {});

/// "<data> n=.. d=.. k=.. metric=.. seed=..", for failure messages.
std::string describe(const std::string& data, int64_t n, int d, int k, FlatMetric m);

// ---- files ----

/// Whether the file can be opened.
bool fileExists(const std::string& p);

/// Reads an .ivecs file into int64 ids; *k receives the row length.
std::vector<int64_t> readIvecs(const std::string& path, int* k);

/// Reads at most maxRows rows of a .bvecs file as floats; *d receives the dimension.
std::vector<float> readBvecs(const std::string& path, int64_t maxRows, int* d);

/// Reads at most maxRows images of a gzip-compressed IDX file (Debian's
/// dataset-fashion-mnist) through `gzip -dc`, as floats.
std::vector<float> readIdxGz(const std::string& path, int64_t maxRows, int* d);

/// Writes n x d vectors as an .fvecs file.
void writeFvecs(const std::string& path, const float* x, int64_t n, int d);

/// Writes raw bytes (a raw float32 file).
void writeRaw(const std::string& path, const float* x, size_t bytes);

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
int64_t countDirEntries(const std::string& dir);

/// The graph file of a gnndBuildFromFile, with its structure checked and
/// its recall@10 against ref (n x kR), printed.
double fileGraphRecall(const std::string& graphPath, const std::vector<float>& x, int64_t n, int d,
                       int k, const std::vector<int64_t>& ref, const std::string& what);

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
/// loaded once per process: "siftsmall", "pointcloud-rs", "fashion-mnist",
/// "clustered".
const Dataset& dataset(const std::string& name);

}  // namespace gnndtest
}  // namespace faiss_ext
