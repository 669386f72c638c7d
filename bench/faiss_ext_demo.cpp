// faiss_ext_demo: the README's main job. Exact k-NN on a data set, on the GPU
// with faiss_ext::gpu::GpuIndexQuickSelectFlat when there is one, otherwise
// on the CPU twin (faiss::IndexFlat, built by faiss_ext::index_factory),
// printing recall@k against an exact ground truth and the throughput.
//
//   faiss_ext_demo                         generated clustered data (seeded)
//   faiss_ext_demo --base B.fvecs --query Q.fvecs [--gt G.ivecs]
//   faiss_ext_demo --fashion-mnist [DIR]   Debian's dataset-fashion-mnist
//
// Run with --help for every option.
#include "bench/BenchData.h"
#include "bench/BenchUtil.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/IndexFlat.h>
#include <omp.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

using namespace faiss_ext;
using namespace faiss_ext::bench;

namespace {

const char* kUsage = R"(faiss_ext_demo: exact k-NN with faiss_ext, recall and throughput.

Data (default: a generated, seeded, clustered set):
  --nb N            base vectors to generate (default 200k)
  --nq N            queries (generated; for files: at most N of them; default 1000)
  --d D             dimension of generated data (default 128)
  --seed S          generator seed (default 1234)
  --base F          base vectors from a file (.fvecs, .bvecs, .fbin, IDX[.gz])
  --query F         query vectors from a file (same formats)
  --gt F.ivecs      ground-truth ids for the queries (else computed exactly)
  --fashion-mnist [DIR]  Fashion-MNIST from DIR (default /usr/share/datasets/fashion-mnist):
                    60k training images as base, test images as queries
Search:
  --k K             neighbours per query (default 10)
  --metric M        L2 (default), IP, Cosine or Pearson
  --reps R          timed repetitions, median reported (default 3 on a GPU, 1 on the CPU)
  --cpu             use the CPU twin even when a GPU is present
  --min-recall R    exit with status 1 when recall@k < R (default: no check)
)";

struct Dataset {
    std::string name;
    Matrix base, query;
    IntMatrix gt;  // empty unless given
};

Dataset loadDataset(const Args& args) {
    Dataset ds;
    const int64_t nq = args.getInt("nq", 1000);
    if (args.has("fashion-mnist")) {
        std::string dir = args.get("fashion-mnist");
        if (dir.empty() || dir == "1") dir = "/usr/share/datasets/fashion-mnist";
        ds.name = "Fashion-MNIST (" + dir + ")";
        ds.base = readVectors(dir + "/train-images-idx3-ubyte.gz");
        ds.query = readVectors(dir + "/t10k-images-idx3-ubyte.gz", nq);
    } else if (args.has("base") || args.has("query")) {
        if (!args.has("base") || !args.has("query"))
            throw std::invalid_argument("--base and --query go together");
        ds.name = args.get("base");
        ds.base = readVectors(args.get("base"));
        ds.query = readVectors(args.get("query"), nq);
        if (args.has("gt")) ds.gt = readIvecs(args.get("gt"), ds.query.n);
    } else {
        ClusteredSpec spec;
        spec.d = int(args.getInt("d", 128));
        spec.seed = uint64_t(args.getInt("seed", 1234));
        const int64_t nb = args.getInt("nb", 200000);
        spec.clusters = defaultClusters(nb);
        ds.name = "generated clustered set (seed " + std::to_string(spec.seed) + ", " +
                  std::to_string(spec.clusters) + " clusters, intrinsic dimension " +
                  std::to_string(spec.latentDim) + ")";
        ds.base = generateClustered(spec, nb, 0);
        ds.query = generateClustered(spec, nq, 1);
    }
    if (ds.base.d != ds.query.d)
        throw std::invalid_argument("base has d = " + std::to_string(ds.base.d) +
                                    " but queries have d = " + std::to_string(ds.query.d));
    return ds;
}

const char* factoryString(FlatMetric m) {
    switch (m) {
        case FlatMetric::Cosine: return "QSFlatCosine";
        case FlatMetric::Pearson: return "QSFlatPearson";
        default: return "QSFlat";
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args args(argc, argv, {"fashion-mnist", "cpu", "help"});
        if (args.has("help")) {
            std::printf("%s", kUsage);
            return 0;
        }
        args.checkKnown({"nb", "nq", "d", "seed", "base", "query", "gt", "fashion-mnist", "k",
                         "metric", "reps", "cpu", "min-recall", "help"});
        const int64_t k = args.getInt("k", 10);
        const FlatMetric metric = parseFlatMetric(args.get("metric", "L2"));
        if (k <= 0) throw std::invalid_argument("--k must be positive");

        double t0 = nowSeconds();
        Dataset ds = loadDataset(args);
        const int d = ds.base.d;
        const int64_t nb = ds.base.n, nq = ds.query.n;
        std::printf("data: %s\n      nb = %lld base vectors, nq = %lld queries, d = %d, k = %lld, "
                    "metric %s (loaded in %.2f s)\n",
                    ds.name.c_str(), (long long)nb, (long long)nq, d, (long long)k,
                    flatMetricName(metric), nowSeconds() - t0);
        if (k > nb)
            std::printf("note: k > nb, so rows are padded with id -1 past the %lld-th neighbour\n",
                        (long long)nb);

        // Exact ground truth: FAISS's own brute force (on prepared vectors for
        // cosine / Pearson), unless the user gave one.
        const bool largerIsBetter = metric != FlatMetric::L2;
        std::vector<float> preparedBase = ds.base.x, preparedQuery = ds.query.x;
        prepareVectors(metric, nb, d, preparedBase.data());
        prepareVectors(metric, nq, d, preparedQuery.data());
        std::vector<int64_t> gtI;
        int64_t gtK = k;
        if (ds.gt.n > 0 && ds.gt.d >= k && ds.gt.n >= nq) {
            gtK = ds.gt.d;
            gtI.assign(ds.gt.x.begin(), ds.gt.x.begin() + nq * gtK);
            std::printf("ground truth: read from %s (%d neighbours per query)\n",
                        args.get("gt").c_str(), ds.gt.d);
        } else {
            if (ds.gt.n > 0)
                std::printf("ground truth file has too few rows or columns for k = %lld: "
                            "computing it instead\n", (long long)k);
            t0 = nowSeconds();
            std::unique_ptr<faiss::IndexFlat> exact;
            if (largerIsBetter) exact.reset(new faiss::IndexFlatIP(d));
            else exact.reset(new faiss::IndexFlatL2(d));
            exact->add(nb, preparedBase.data());
            std::vector<float> gtD(size_t(nq) * k);
            gtI.resize(size_t(nq) * k);
            exact->search(nq, preparedQuery.data(), k, gtD.data(), gtI.data());
            std::printf("ground truth: exact, by %s on the CPU (%.2f s, %d threads)\n",
                        largerIsBetter ? "faiss::IndexFlatIP" : "faiss::IndexFlatL2",
                        nowSeconds() - t0, omp_get_max_threads());
        }

        // The index under test: GPU when present, else the CPU twin.
        const int numGpus = gpu::getNumDevices();
        const bool useGpu = numGpus > 0 && !args.has("cpu");
        std::unique_ptr<gpu::StandardGpuResources> res;
        std::unique_ptr<faiss::Index> index;
        std::string where;
        if (useGpu) {
            cudaDeviceProp prop;
            FAISS_EXT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
            where = std::string("GPU 0 (") + prop.name + ") with faiss_ext::gpu::GpuIndexQuickSelectFlat";
            res.reset(new gpu::StandardGpuResources());
            index.reset(new gpu::GpuIndexQuickSelectFlat(res.get(), d, metric));
        } else {
            where = std::string("CPU (") + cpuName() + ", " + std::to_string(omp_get_max_threads()) +
                    " OpenMP threads) with the CPU twin faiss::IndexFlat from "
                    "faiss_ext::index_factory(d, \"" + factoryString(metric) + "\")";
            index.reset(faiss_ext::index_factory(d, factoryString(metric),
                                                 metric == FlatMetric::InnerProduct
                                                         ? faiss::METRIC_INNER_PRODUCT
                                                         : faiss::METRIC_L2));
        }
        if (numGpus == 0)
            std::printf("no GPU found (faiss_ext::gpu::getNumDevices() == 0)\n");
        std::printf("searching on the %s\n", where.c_str());

        // Raw vectors go in: the index prepares them itself for cosine / Pearson.
        t0 = nowSeconds();
        index->add(nb, ds.base.x.data());
        std::printf("add: %.3f s\n", nowSeconds() - t0);

        std::vector<float> D(size_t(nq) * k);
        std::vector<int64_t> I(size_t(nq) * k);
        const int reps = int(args.getInt("reps", useGpu ? 3 : 1));
        if (useGpu) index->search(nq, ds.query.x.data(), k, D.data(), I.data());  // warm-up
        std::vector<double> times;
        for (int r = 0; r < std::max(1, reps); ++r) {
            t0 = nowSeconds();
            index->search(nq, ds.query.x.data(), k, D.data(), I.data());
            times.push_back(nowSeconds() - t0);
        }
        const double sec = median(times);

        // Recall with ties counted as hits, distances recomputed exactly.
        auto dist = [&](int64_t q, int64_t id) {
            const float* a = preparedQuery.data() + q * d;
            const float* b = preparedBase.data() + id * d;
            double s = 0;
            for (int j = 0; j < d; ++j) {
                double t = largerIsBetter ? double(a[j]) * b[j] : double(a[j]) - b[j];
                s += largerIsBetter ? t : t * t;
            }
            return s;
        };
        const int64_t kEval = std::min<int64_t>(k, nb);
        const double recall =
                recallAtK(nq, int(kEval), I.data(), k, gtI.data(), gtK, dist, largerIsBetter);

        std::printf("\nresult (%s):\n", useGpu ? "GPU" : "CPU twin");
        std::printf("  recall@%lld   = %.4f  (against exact ground truth; ties count as hits)\n",
                    (long long)k, recall);
        std::printf("  search time = %.4f s for %lld queries (median of %d run%s%s)\n", sec,
                    (long long)nq, int(times.size()), times.size() > 1 ? "s" : "",
                    useGpu ? ", after a warm-up, host arrays in and out" : "");
        std::printf("  throughput  = %.0f queries/s\n", sec > 0 ? nq / sec : 0.0);
        if (!useGpu)
            std::printf("  (the CPU twin is exact brute force too, so recall 1 is expected)\n");

        if (args.has("min-recall") && !(recall >= args.getDouble("min-recall", 0))) {
            std::fprintf(stderr, "FAIL: recall %.4f is below --min-recall %s\n", recall,
                         args.get("min-recall").c_str());
            return 1;
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "faiss_ext_demo: error: %s\n", e.what());
        return 2;
    }
}
