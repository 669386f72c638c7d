// bench_ann: approximate search (suite "ann") on the four kinds of data the
// benchmarks use (DESIGN.md): the easy clustered generator, the hard
// generator, Fashion-MNIST and a real-derived set of augmented Fashion-MNIST
// images (784-d, or 128-d by PCA). Per data set (--data takes a list, run
// one after the other in one process), in one run: our exact index
// (throughput and the ground truth), then the methods of --methods:
//   graph  GpuIndexSearchGraph (build time, recall@k against q/s over a sweep
//          of itopk, search width and entry points, single-query latency);
//   lsh    GpuIndexBiLevelLSH with the default configuration, then tuned by
//          the autotuner (faiss_ext/BiLevelLSHAutoTune.h, on the GPU) to
//          recall 0.95 and 0.9 on --tune-queries held-out queries of the same
//          distribution (the last rows of the query set, kept out of the
//          measured queries), each built and measured on the measured
//          queries with its chosen search settings and an nprobe sweep around
//          them, beside the tuner's own recall, predicted speedup and verdict.
// --write-dir writes the data and ground truth for the FAISS anchors
// (bench/anchor_ann.py), run in their own process.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "AnnData.h"
#include "BenchData.h"
#include "BenchUtil.h"
#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/GpuIndexSearchGraph.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage =
    "bench_ann --data LIST of clustered|hard|fmnist|fmnist-aug|fmnist-aug-pca|files [options]\n"
    "  --base F --query F  files: the vectors and queries (.fvecs, .bvecs or .fbin;\n"
    "                    e.g. bench/vdb_data.py's embedding-like sets)\n"
    "  --name NAME       files: the data set's name (default: the base file's stem)\n"
    "  --metric l2|ip    distances of the exact and graph indexes (default l2; ip:\n"
    "                    inner product, the name gets -ip; lsh takes l2 only)\n"
    "  --methods LIST    graph, lsh, exact (exact: our exact index only; default graph)\n"
    "  --nb N            base rows of generated / augmented sets (default 1M)\n"
    "  --nq N            queries (default 10000; Fashion-MNIST has 10000 in all)\n"
    "  --tune-queries N  lsh: held-out queries of the autotuner, taken from the end\n"
    "                    of the query set (default 1000)\n"
    "  --tune-depths LIST, --tune-lm LIST (LxM,...), --tune-widths LIST: lsh: the\n"
    "                    autotuner's build settings (default 0,3; 10x8,16x12; 2,3,4)\n"
    "  --tune-lattices LIST  lsh: 0 the Z^M grid, 1 E8 (M a multiple of 8) (default 0,1)\n"
    "  --suite NAME      suite written in every line (default ann; run_lsh_device.sh: ann-lsh)\n"
    "  --lsh-sweep N     lsh: nprobe sweep up to N around each chosen setting (default 64; 0: none)\n"
    "  --k K             neighbours (default 10)\n"
    "  --fmnist-dir DIR  Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)\n"
    "  --degrees LIST    search graph : k-NN graph degrees, one build each (default 32:64)\n"
    "  --fp16 LIST       1: FP16 traversal, 0: FP32 (default 1)\n"
    "  --itopk LIST      candidate buffers (default 32,64,128,256)\n"
    "  --width LIST      search widths (default 1)\n"
    "  --entry-seeds LIST  sampled entry points per query (default 8)\n"
    "  --runs N          timed runs, median reported (default 7)\n"
    "  --temp-gb G       the resources' temporary memory limit (default: theirs, at most\n"
    "                    16 GiB; a one-shot k-NN build past ~10M vectors needs more)\n"
    "  --verbose         the graph index prints its build's progress (stdout, not JSON)\n"
    "  --fp16-traversal 0  graph: build without the FP16 copy (2 d bytes a vector;\n"
    "                    searches then traverse the FP32 vectors; --fp16 defaults to 0)\n"
    "  --latency N       single-query searches for the latency (default 200)\n"
    "  --latency-blocks LIST  blocks per query of extra single-query runs, each\n"
    "                    reported with its recall (0: automatic; default none)\n"
    "  --hard-d D, --hard-clusters C  hard: dimension and mixture components (default 100, 500)\n"
    "  --hard-query-seed S  hard: queries from the mixture of seed S, whose centres\n"
    "                    differ from the data's (queries unlike the data; set hard-ood)\n"
    "  --entry-points N  graph: size of the entry-point sample (default: the index's)\n"
    "  --unlike-ratio R  graph: flag queries unlike the data at ratio R and answer them\n"
    "                    again (GpuIndexSearchGraphConfig::unlikeQueryRatio; default 0,\n"
    "                    off); each line then counts the flagged and answered queries\n"
    "  --unlike-probes LIST  graph: lists such a query probes, per search (0: exact\n"
    "                    search; default: the index's, GpuIndexSearchGraphConfig::\n"
    "                    unlikeQueryProbes)\n"
    "  --add-build B     graph: how the k-NN lists are built: auto (default), one-shot,\n"
    "                    partitioned, one-shot-where-it-fits\n"
    "  --knn-samples N, --knn-iterations N, --knn-threshold F\n"
    "                    GNND build of the k-NN graph (default 32, 6, 0.001)\n"
    "  --device-queries  also time each setting with queries and results in device\n"
    "                    memory (qps_device_queries)\n"
    "  --write-dir DIR   write base.fbin, query.fbin, gt.ivecs for the anchors\n"
    "  --write-root DIR  the same into DIR/<data set> (an existing folder each)\n";

struct Data {
    std::string name;
    Matrix base, queries;
    /// Held-out queries of the autotuner (the last rows of the query set).
    Matrix tuneQueries;
};

/// Moves the last `count` rows of m into a new matrix.
Matrix splitLastRows(Matrix& m, int64_t count) {
    Matrix tail;
    count = std::min(count, m.n);
    tail.n = count;
    tail.d = m.d;
    tail.x.assign(m.x.end() - count * m.d, m.x.end());
    m.n -= count;
    m.x.resize(size_t(m.n) * m.d);
    return tail;
}

Data loadData(const Args& a, const std::string& kind, int64_t tuneQueries) {
    Data out;
    int64_t nb = a.getInt("nb", 1000000), nq = a.getInt("nq", 10000) + tuneQueries;
    std::string dir = a.get("fmnist-dir", "/usr/share/datasets/fashion-mnist");
    if (kind == "clustered") {
        ClusteredSpec s;
        s.clusters = defaultClusters(nb);
        out.base = generateClustered(s, nb, 0);
        out.queries = generateClustered(s, nq, 1);
    } else if (kind == "hard") {
        HardSpec s;
        s.d = int(a.getInt("hard-d", s.d));
        s.clusters = int(a.getInt("hard-clusters", s.clusters));
        out.base = generateHard(s, nb, 0);
        HardSpec sq = s;
        if (a.has("hard-query-seed")) sq.seed = uint64_t(a.getInt("hard-query-seed", 0));
        out.queries = generateHard(sq, nq, 1);
        out.name = s.clusters == HardSpec().clusters ? kind
                                                     : kind + "-c" + std::to_string(s.clusters);
        if (sq.seed != s.seed) out.name += "-ood";
    } else if (kind == "fmnist" || kind == "fmnist-aug" || kind == "fmnist-aug-pca") {
        Matrix train = readVectors(dir + "/train-images-idx3-ubyte.gz");
        Matrix test = readVectors(dir + "/t10k-images-idx3-ubyte.gz", nq);
        if (kind == "fmnist") {
            out.base = std::move(train);
            out.queries = std::move(test);
        } else {
            out.base = augmentImages(train, nb, 11);
            out.queries = augmentImages(test, nq, 12);
            if (kind == "fmnist-aug-pca") reducePca(out.base, out.queries, 128, 200000);
        }
    } else if (kind == "files") {
        if (!a.has("base") || !a.has("query"))
            throw std::invalid_argument("--data files needs --base and --query");
        out.base = readVectors(a.get("base"));
        out.queries = readVectors(a.get("query"), nq);
        if (out.base.d != out.queries.d)
            throw std::invalid_argument("--base and --query differ in dimension");
        const std::string base = a.get("base");
        const size_t slash = base.find_last_of('/'), dot = base.find_last_of('.');
        const size_t from = slash == std::string::npos ? 0 : slash + 1;
        out.name = a.get("name", base.substr(from, dot == std::string::npos || dot < from
                                                           ? std::string::npos
                                                           : dot - from));
    } else {
        throw std::invalid_argument(
            "--data must be clustered, hard, fmnist, fmnist-aug, fmnist-aug-pca or files");
    }
    if (out.name.empty()) out.name = kind;
    if (tuneQueries > 0) {
        if (out.queries.n <= tuneQueries)
            throw std::invalid_argument("--tune-queries must be below the number of queries");
        out.tuneQueries = splitLastRows(out.queries, tuneQueries);
    }
    return out;
}

std::string deviceName() {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "no GPU";
    return p.name;
}

/// Median seconds of `runs` calls of f after three warm-up calls (the first
/// searches after a build were measured slow on the H100).
template <typename F>
double timeMedian(int runs, F f) {
    for (int w = 0; w < 3; ++w) f();
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
        double t0 = nowSeconds();
        f();
        t.push_back(nowSeconds() - t0);
    }
    return median(t);
}

struct Context {
    Data data;
    bool ip = false;  ///< --metric ip: inner product (larger is nearer)
    int k = 10;
    int runs = 7;
    int latencyQueries = 200;
    std::string suite = "ann", device, git;
    std::vector<int64_t> gt;  // nq x k exact ids
    double exactQps = 0;
};

JsonLine line(const Context& c, const std::string& method) {
    JsonLine j;
    j.str("suite", c.suite)
        .str("method", method)
        .str("device", c.device)
        .str("dataset", c.data.name)
        .integer("nb", c.data.base.n)
        .integer("d", c.data.base.d)
        .integer("nq", c.data.queries.n)
        .integer("k", c.k);
    return j;
}

/// Recall@k of I (the first `rows` queries' results; all queries when
/// rows < 0) against the exact ground truth.
double recallOf(const Context& c, const std::vector<int64_t>& I, int64_t rows = -1) {
    const Matrix& b = c.data.base;
    const Matrix& q = c.data.queries;
    // the distance that breaks ties: squared L2, or the negated product
    auto dist = [&](int64_t qi, int64_t id) {
        double s = 0;
        for (int j = 0; j < b.d; ++j) {
            const double u = q.x[size_t(qi) * q.d + j], v = b.x[size_t(id) * b.d + j];
            s += c.ip ? -u * v : (u - v) * (u - v);
        }
        return s;
    };
    return recallAtK(rows < 0 ? q.n : rows, c.k, I.data(), c.k, c.gt.data(), c.k, dist, false);
}

/// Single-query searches of the first queries: the median latency and the
/// recall of their results.
struct SingleQuery {
    double seconds = 0;
    double recall = 0;
};

template <typename Index>
SingleQuery singleQueries(const Context& c, const Index& index,
                          const faiss::SearchParameters* params) {
    const Matrix& q = c.data.queries;
    int64_t m = std::min<int64_t>(c.latencyQueries, q.n);
    std::vector<float> D(size_t(m) * c.k);
    std::vector<int64_t> I(size_t(m) * c.k);
    std::vector<double> t;
    for (int64_t i = 0; i < m; ++i) {
        double t0 = nowSeconds();
        index.search(1, q.x.data() + size_t(i) * q.d, c.k, D.data() + size_t(i) * c.k,
                     I.data() + size_t(i) * c.k, params);
        t.push_back(nowSeconds() - t0);
    }
    SingleQuery r;
    r.seconds = median(t);
    r.recall = recallOf(c, I, m);
    return r;
}

/// Median single-query latency (seconds) over the first queries.
template <typename Index>
double latency(const Context& c, const Index& index, const faiss::SearchParameters* params) {
    return singleQueries(c, index, params).seconds;
}

/// Median seconds of the batch search with the queries and results in
/// device memory (copied there once): the search without the host
/// transfers that the host-array timing includes.
template <typename Index>
double deviceResidentSeconds(const Context& c, const Index& index,
                             const faiss::SearchParameters* params) {
    const Matrix& q = c.data.queries;
    float *dq = nullptr, *dD = nullptr;
    int64_t* dI = nullptr;
    size_t nr = size_t(q.n) * c.k;
    if (cudaMalloc(reinterpret_cast<void**>(&dq), sizeof(float) * q.x.size()) != cudaSuccess ||
        cudaMalloc(reinterpret_cast<void**>(&dD), sizeof(float) * nr) != cudaSuccess ||
        cudaMalloc(reinterpret_cast<void**>(&dI), sizeof(int64_t) * nr) != cudaSuccess) {
        cudaFree(dq);
        cudaFree(dD);
        throw std::runtime_error("bench_ann: no device memory for the device-resident queries");
    }
    cudaMemcpy(dq, q.x.data(), sizeof(float) * q.x.size(), cudaMemcpyHostToDevice);
    double s = timeMedian(c.runs, [&] { index.search(q.n, dq, c.k, dD, dI, params); });
    cudaFree(dq);
    cudaFree(dD);
    cudaFree(dI);
    return s;
}

void runExact(Context& c, gpu::StandardGpuResources& res) {
    const Matrix& b = c.data.base;
    const Matrix& q = c.data.queries;
    gpu::GpuIndexQuickSelectFlat exact(&res, b.d,
                                       c.ip ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2);
    exact.add(b.n, b.x.data());
    std::vector<float> D(size_t(q.n) * c.k);
    c.gt.assign(size_t(q.n) * c.k, -1);
    double s =
        timeMedian(c.runs, [&] { exact.search(q.n, q.x.data(), c.k, D.data(), c.gt.data()); });
    c.exactQps = q.n / s;
    double lat = latency(c, exact, nullptr);
    std::printf("%s\n", line(c, "ours:exact")
                            .num("seconds", s)
                            .num("qps", q.n / s)
                            .num("recall", 1.0)
                            .num("latency_ms_nq1", lat * 1e3)
                            .str("git", c.git)
                            .text()
                            .c_str());
    std::fflush(stdout);
}

gpu::GnndAddBuild parseAddBuild(const std::string& s) {
    for (gpu::GnndAddBuild b : {gpu::GnndAddBuild::Auto, gpu::GnndAddBuild::OneShot,
                                gpu::GnndAddBuild::Partitioned,
                                gpu::GnndAddBuild::OneShotWhereItFits})
        if (s == gpu::addBuildName(b)) return b;
    throw std::invalid_argument("--add-build: auto, one-shot, partitioned or "
                                "one-shot-where-it-fits (got " + s + ")");
}

void runGraph(Context& c, gpu::StandardGpuResources& res, const Args& a, int degree,
              int knnDegree) {
    const Matrix& b = c.data.base;
    const Matrix& q = c.data.queries;
    gpu::GpuIndexSearchGraphConfig cfg;
    cfg.graphDegree = degree;
    cfg.knnDegree = knnDegree;
    if (a.has("knn-samples")) cfg.knnBuild.samples = int(a.getInt("knn-samples", 32));
    if (a.has("knn-iterations")) cfg.knnBuild.maxIterations = int(a.getInt("knn-iterations", 20));
    if (a.has("knn-threshold"))
        cfg.knnBuild.terminationThreshold = std::stof(a.get("knn-threshold", "0.001"));
    cfg.knnBuild.addBuild = parseAddBuild(a.get("add-build", "auto"));
    if (a.has("entry-points")) cfg.entryPoints = int(a.getInt("entry-points", cfg.entryPoints));
    if (a.has("unlike-ratio")) cfg.unlikeQueryRatio = std::stof(a.get("unlike-ratio", "0"));
    cfg.fp16Traversal = a.getInt("fp16-traversal", 1) != 0;
    gpu::GpuIndexSearchGraph index(&res, b.d, c.ip ? FlatMetric::InnerProduct : FlatMetric::L2,
                                   cfg);
    index.verbose = a.has("verbose");
    double t0 = nowSeconds();
    index.add(b.n, b.x.data());
    double build = nowSeconds() - t0;
    JsonLine bp;
    bp.integer("graph_degree", cfg.graphDegree)
        .integer("knn_degree", cfg.knnDegree)
        .integer("knn_samples", cfg.knnBuild.samples)
        .integer("entry_points", cfg.entryPoints)
        .integer("knn_iterations", index.getKnnBuildIterations())
        .num("knn_threshold", cfg.knnBuild.terminationThreshold)
        .num("knn_seconds", index.getKnnBuildSeconds())
        .num("optimize_seconds", index.getOptimizeSeconds())
        .str("add_build", addBuildName(index.getLastKnnAddBuild()))
        .integer("fp16_traversal", cfg.fp16Traversal ? 1 : 0);
    std::printf("%s\n", line(c, "ours:graph-build")
                            .raw("params", bp.text())
                            .num("seconds", build)
                            .str("git", c.git)
                            .text()
                            .c_str());
    std::fflush(stdout);
    std::vector<float> D(size_t(q.n) * c.k);
    std::vector<int64_t> I(size_t(q.n) * c.k);
    for (int64_t probes : parseIntList(a.get("unlike-probes", "-1")))
    for (int64_t half : parseIntList(a.get("fp16", cfg.fp16Traversal ? "1" : "0")))
        for (int64_t es : parseIntList(a.get("entry-seeds", "8")))
            for (int64_t w : parseIntList(a.get("width", "1")))
                for (int64_t itopk : parseIntList(a.get("itopk", "32,64,128,256"))) {
                    gpu::SearchParametersSearchGraph sp;
                    sp.itopk = int(itopk);
                    sp.searchWidth = int(w);
                    sp.entrySeeds = int(es);
                    sp.fp16 = int(half);
                    sp.unlikeQueryProbes = int(probes);
                    double s = timeMedian(c.runs, [&] {
                        index.search(q.n, q.x.data(), c.k, D.data(), I.data(), &sp);
                    });
                    double r = recallOf(c, I);
                    double lat = latency(c, index, &sp);
                    double devSeconds =
                        a.has("device-queries") ? deviceResidentSeconds(c, index, &sp) : 0;
                    JsonLine p;
                    p.integer("itopk", itopk)
                        .integer("search_width", w)
                        .integer("entry_seeds", es)
                        .integer("entry_points", cfg.entryPoints)
                        .integer("fp16", half)
                        .integer("graph_degree", cfg.graphDegree)
                        .integer("knn_degree", cfg.knnDegree)
                        .integer("knn_samples", cfg.knnBuild.samples)
                        .num("knn_threshold", cfg.knnBuild.terminationThreshold);
                    if (cfg.unlikeQueryRatio > 0.f) {
                        p.num("unlike_ratio", cfg.unlikeQueryRatio)
                            .integer("unlike_probes",
                                     probes >= 0 ? probes : cfg.unlikeQueryProbes);
                    }
                    JsonLine out = line(c, "ours:graph");
                    out.raw("params", p.text())
                        .num("seconds", s)
                        .num("qps", q.n / s)
                        .num("recall", r)
                        .num("latency_ms_nq1", lat * 1e3);
                    if (devSeconds > 0) out.num("qps_device_queries", q.n / devSeconds);
                    if (cfg.unlikeQueryRatio > 0.f) {
                        // one more search of the batch, counted alone
                        index.resetUnlikeQueryCounts();
                        index.search(q.n, q.x.data(), c.k, D.data(), I.data(), &sp);
                        const gpu::UnlikeQueryCounts u = index.getUnlikeQueryCounts();
                        out.integer("unlike_flagged", u.flagged)
                            .integer("unlike_answered_exactly", u.answeredExactly)
                            .integer("unlike_answered_by_probe", u.answeredByProbe);
                    }
                    std::printf("%s\n", out.str("git", c.git).text().c_str());
                    std::fflush(stdout);
                    for (int64_t blocks : parseIntList(a.get("latency-blocks", ""))) {
                        sp.blocksPerQuery = int(blocks);
                        SingleQuery one = singleQueries(c, index, &sp);
                        sp.blocksPerQuery = 0;
                        JsonLine p1;
                        p1.integer("itopk", itopk)
                            .integer("search_width", w)
                            .integer("entry_seeds", es)
                            .integer("entry_points", cfg.entryPoints)
                            .integer("fp16", half)
                            .integer("blocks_per_query", blocks)
                            .integer("graph_degree", cfg.graphDegree)
                            .integer("knn_degree", cfg.knnDegree);
                        std::printf("%s\n", line(c, "ours:graph-nq1")
                                                .raw("params", p1.text())
                                                .num("latency_ms_nq1", one.seconds * 1e3)
                                                .num("recall_nq1", one.recall)
                                                .integer("nq1_queries",
                                                         std::min<int64_t>(c.latencyQueries, q.n))
                                                .str("git", c.git)
                                                .text()
                                                .c_str());
                        std::fflush(stdout);
                    }
                }
}

/// The build and search settings of a Bi-level LSH line.
JsonLine lshParams(const BiLevelLSHConfig& cfg, const SearchParametersBiLevelLSH& sp) {
    JsonLine p;
    p.integer("depth", cfg.treeDepth)
        .integer("L", cfg.nTables)
        .integer("M", cfg.nProjections)
        .num("bucket_width", cfg.bucketWidth)
        .str("width_rule", cfg.widthRule == BiLevelWidthRule::NeighbourDistance
                               ? "neighbour-distance"
                               : "rms-radius")
        .str("lattice", cfg.lattice == lsh::kLatticeE8 ? "E8" : "ZM")
        .integer("nprobe", sp.nprobe)
        .integer("group_probes", sp.groupProbes)
        .num("group_margin", sp.groupMargin)
        .integer("min_candidates", sp.minCandidates);
    return p;
}

/// Builds a GpuIndexBiLevelLSH with cfg on the base set (trained on all of
/// it) and prints one line per search setting: `method` for the settings the
/// configuration holds, `method`-sweep for the nprobe values around them.
/// extra: fields of the tuner (or none).
void measureLsh(Context& c, gpu::StandardGpuResources& res, const BiLevelLSHConfig& cfg,
                const std::string& method, const JsonLine* extra, int sweepMax) {
    const Matrix& b = c.data.base;
    const Matrix& q = c.data.queries;
    gpu::GpuIndexBiLevelLSH index(&res, b.d, cfg);
    const double t0 = nowSeconds();
    index.train(b.n, b.x.data());
    const double trained = nowSeconds();
    index.add(b.n, b.x.data());
    const double built = nowSeconds();
    JsonLine bp = lshParams(cfg, searchParametersOf(cfg));
    bp.num("train_seconds", trained - t0).num("add_seconds", built - trained);
    std::printf("%s\n", line(c, method + "-build")
                            .raw("params", bp.text())
                            .num("seconds", built - t0)
                            .str("git", c.git)
                            .text()
                            .c_str());
    std::fflush(stdout);
    const SearchParametersBiLevelLSH chosen = searchParametersOf(cfg);
    std::vector<int> probes = {chosen.nprobe};
    for (int np : {1, 2, 4, 8, 16, 32, 64})
        if (np != chosen.nprobe && np <= sweepMax &&
            np <= 1 + lsh::maxPerturbations(cfg.nProjections) &&
            cfg.lattice != lsh::kLatticeE8)  // E8: nprobe 1 only
            probes.push_back(np);
    std::vector<float> D(size_t(q.n) * c.k);
    std::vector<int64_t> I(size_t(q.n) * c.k);
    const int64_t nCand = std::min<int64_t>(q.n, 1000);
    for (size_t i = 0; i < probes.size(); ++i) {
        SearchParametersBiLevelLSH sp = chosen;
        sp.nprobe = probes[i];
        const double s = timeMedian(
            c.runs, [&] { index.search(q.n, q.x.data(), c.k, D.data(), I.data(), &sp); });
        const double r = recallOf(c, I);
        std::vector<int64_t> lims, ids;
        index.getCandidates(nCand, q.x.data(), c.k, &lims, &ids, &sp);
        JsonLine p = lshParams(cfg, sp);
        JsonLine j = line(c, i == 0 ? method : method + "-sweep");
        j.raw("params", p.text())
            .num("seconds", s)
            .num("qps", q.n / s)
            .num("recall", r)
            .num("candidates_per_query", double(lims[nCand]) / double(nCand))
            .num("speedup_vs_exact", (q.n / s) / c.exactQps);
        if (i == 0) j.num("latency_ms_nq1", latency(c, index, &sp) * 1e3);
        if (i == 0 && extra) j.raw("tuner", extra->text());
        std::printf("%s\n", j.str("git", c.git).text().c_str());
        std::fflush(stdout);
    }
}

/// Bi-level LSH: the defaults, then the autotuner at 0.95 and 0.9 (one
/// sweep, measured at 0.95, serves both choices).
void runLsh(Context& c, gpu::StandardGpuResources& res, const Args& a) {
    const Matrix& b = c.data.base;
    const Matrix& t = c.data.tuneQueries;
    // --lsh-sweep: the largest nprobe of the sweeps (0: the chosen setting
    // only; on the augmented 1M sets a sweep to 64 takes minutes)
    const int sweepMax = int(a.getInt("lsh-sweep", 64));
    measureLsh(c, res, BiLevelLSHConfig(), "ours:bilsh-default", nullptr, sweepMax);
    if (t.n < 10) throw std::invalid_argument("lsh: --tune-queries must be >= 10");
    BiLevelAutoTuneOptions opt;
    opt.k = c.k;
    opt.treeDepths.clear();
    for (int64_t v : parseIntList(a.get("tune-depths", "0,3"))) opt.treeDepths.push_back(int(v));
    opt.tablesProjections.clear();
    for (const std::string& lm : parseList(a.get("tune-lm", "10x8,16x12"))) {
        const size_t x = lm.find('x');
        if (x == std::string::npos) throw std::invalid_argument("--tune-lm takes LxM items");
        opt.tablesProjections.push_back({std::stoi(lm.substr(0, x)), std::stoi(lm.substr(x + 1))});
    }
    opt.bucketWidths.clear();
    for (const std::string& w : parseList(a.get("tune-widths", "2,3,4")))
        opt.bucketWidths.push_back(std::stof(w));
    opt.lattices.clear();
    for (int64_t v : parseIntList(a.get("tune-lattices", "0,1"))) opt.lattices.push_back(int(v));
    gpu::GpuBiLevelLSHTuneEvaluator evaluator(&res);
    std::vector<BiLevelTunePoint> points;
    for (double target : {0.95, 0.9}) {
        opt.targetRecall = target;
        const double t0 = nowSeconds();
        const BiLevelAutoTuneResult r =
            autoTuneBiLevelLSH(b.d, b.n, b.x.data(), t.n, t.x.data(), opt, &evaluator,
                               points.empty() ? nullptr : &points);
        const double tuneSeconds = nowSeconds() - t0;
        if (points.empty()) {
            // every setting the sweep measured, on the tuner's selection
            // queries (recall and candidates; no timing): the grid against
            // E8 and the group settings at equal builds
            points = r.points;
            for (const BiLevelTunePoint& p : points) {
                JsonLine pp = lshParams(p.config, searchParametersOf(p.config));
                std::printf("%s\n", line(c, "ours:bilsh-tune-point")
                                        .raw("params", pp.text())
                                        .integer("tune_queries", t.n)
                                        .num("recall", p.recall)
                                        .num("candidates_per_query", p.candidates)
                                        .num("predicted_speedup", p.predictedSpeedup)
                                        .str("git", c.git)
                                        .text()
                                        .c_str());
            }
            std::fflush(stdout);
        }
        std::fprintf(stderr, "[bench_ann] %s, autotune %.2f: %s (%d builds, %.1f s)\n",
                     c.data.name.c_str(), target, r.verdict.c_str(), r.builds, tuneSeconds);
        JsonLine tuner;
        tuner.num("target", target)
            .num("tuned_recall", r.recall)
            .num("selection_recall", r.selectionRecall)
            .num("predicted_speedup", r.predictedSpeedup)
            .boolean("reached_target", r.reachedTarget)
            .boolean("beats_exact", r.beatsExact)
            .integer("builds", r.builds)
            .integer("settings", int64_t(r.points.size()))
            .integer("tune_queries", t.n)
            .num("tune_seconds", tuneSeconds)
            .str("verdict", r.verdict);
        char name[64];
        std::snprintf(name, sizeof(name), "ours:bilsh-auto%.2f", target);
        measureLsh(c, res, r.config, name, &tuner, sweepMax);
    }
}

void writeForAnchors(const Context& c, const std::string& dir) {
    writeFbin(dir + "/base.fbin", c.data.base);
    writeFbin(dir + "/query.fbin", c.data.queries);
    std::vector<int32_t> gt(c.gt.begin(), c.gt.end());
    writeIvecs(dir + "/gt.ivecs", c.data.queries.n, c.k, gt.data());
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args a(argc, argv, {"help", "git", "device-queries", "verbose"});
        if (a.printedHelpOrGit(kUsage)) return 0;
        a.checkKnown({"data",
                      "methods",
                      "nb",
                      "nq",
                      "k",
                      "fmnist-dir",
                      "degrees",
                      "fp16",
                      "itopk",
                      "width",
                      "entry-seeds",
                      "runs",
                      "latency",
                      "write-dir",
                      "tune-queries",
                      "write-root",
                      "tune-lattices",
                      "lsh-sweep",
                      "suite",
                      "tune-depths",
                      "tune-lm",
                      "tune-widths",
                      "latency-blocks",
                      "knn-samples",
                      "knn-iterations",
                      "knn-threshold",
                      "hard-d",
                      "hard-clusters",
                      "hard-query-seed",
                      "entry-points",
                      "unlike-ratio",
                      "unlike-probes",
                      "add-build",
                      "temp-gb",
                      "verbose",
                      "fp16-traversal",
                      "base",
                      "query",
                      "name",
                      "metric",
                      "device-queries",
                      "help",
                      "git"});
        bool doGraph = false, doLsh = false;
        for (const std::string& m : parseList(a.get("methods", "graph"))) {
            if (m == "graph")
                doGraph = true;
            else if (m == "lsh")
                doLsh = true;
            else if (m != "exact")  // exact: our exact index only (and the anchors' files)
                throw std::invalid_argument("--methods takes graph, lsh and/or exact, got " + m);
        }
        const std::vector<std::string> sets = parseList(a.get("data"));
        if (sets.size() > 1 && a.has("write-dir"))
            throw std::invalid_argument("--write-dir takes one data set (--write-root: several)");
        const std::string metric = a.get("metric", "l2");
        if (metric != "l2" && metric != "ip")
            throw std::invalid_argument("--metric takes l2 or ip (got " + metric + ")");
        const bool ip = metric == "ip";
        if (ip && doLsh) throw std::invalid_argument("--methods lsh takes --metric l2 only");
        gpu::StandardGpuResources res;
        if (a.has("temp-gb")) res.setTempMemory(size_t(a.getInt("temp-gb", 16)) << 30);
        for (const std::string& kind : sets) {
            Context c;
            double t0 = nowSeconds();
            // the tuner's queries held out whenever they are named, so that
            // an exact-only run writes the lsh run's query set for the anchors
            const bool holdOut = doLsh || a.has("tune-queries");
            c.data = loadData(a, kind, holdOut ? a.getInt("tune-queries", 1000) : 0);
            c.ip = ip;
            const std::string& name = c.data.name;
            if (c.ip && (name.size() < 2 || name.compare(name.size() - 2, 2, "ip") != 0))
                c.data.name += "-ip";
            std::fprintf(stderr, "[bench_ann] %s: nb %lld, nq %lld, d %d (%.1f s to make)\n",
                         c.data.name.c_str(), (long long)c.data.base.n, (long long)c.data.queries.n,
                         c.data.base.d, nowSeconds() - t0);
            c.k = int(a.getInt("k", 10));
            c.runs = int(a.getInt("runs", 7));
            c.latencyQueries = int(a.getInt("latency", 200));
            c.device = deviceName();
            c.suite = a.get("suite", "ann");
            c.git = gitCommit();
            runExact(c, res);
            if (a.has("write-dir")) writeForAnchors(c, a.get("write-dir"));
            if (a.has("write-root")) writeForAnchors(c, a.get("write-root") + "/" + kind);
            if (doGraph) {
                for (const std::string& pair : parseList(a.get("degrees", "32:64"))) {
                    size_t colon = pair.find(':');
                    if (colon == std::string::npos)
                        throw std::invalid_argument("--degrees takes GRAPH:KNN pairs, e.g. 32:64");
                    runGraph(c, res, a, std::stoi(pair.substr(0, colon)),
                             std::stoi(pair.substr(colon + 1)));
                }
            }
            if (doLsh) {
                const double tl = nowSeconds();
                runLsh(c, res, a);
                std::fprintf(stderr, "[bench_ann] %s: lsh %.1f s\n", c.data.name.c_str(),
                             nowSeconds() - tl);
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_ann: %s\n", e.what());
        return 2;
    }
}
