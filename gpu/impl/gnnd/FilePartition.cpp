#include "faiss_ext/gpu/impl/gnnd/FilePartition.h"

#include "faiss_ext/gpu/impl/gnnd/FlatEngineIndex.h"
#include "faiss_ext/gpu/impl/gnnd/PartitionPlan.h"

#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <memory>
#include <utility>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// Rows read per chunk of the assignment pass.
constexpr int64_t kChunkRows = 262144;
/// Blocks the sample is read in (evenly spread, so a file sorted by
/// cluster is sampled as fairly as a shuffled one).
constexpr int64_t kSampleBlocks = 1024;

/// `rows` rows of the file (at least `clusters`) in evenly spread blocks,
/// prepared for the metric.
std::vector<float> readSample(const VectorFile& file, int64_t rows, FlatMetric metric,
                              int64_t* got) {
    const int64_t n = file.n(), d = file.d();
    rows = std::min(n, rows);
    const int64_t blocks = std::min(kSampleBlocks, rows);
    const int64_t len = (rows + blocks - 1) / blocks;
    std::vector<float> x(size_t(rows) * d);
    int64_t filled = 0;
    for (int64_t b = 0; b < blocks && filled < rows; ++b) {
        const int64_t start = b * n / blocks, next = (b + 1) * n / blocks;
        const int64_t m = std::min({len, next - start, rows - filled});
        file.read(start, m, x.data() + size_t(filled) * d);
        filled += m;
    }
    x.resize(size_t(filled) * d);
    prepareVectors(metric, filled, int(d), x.data());
    *got = filled;
    return x;
}

/// The exact L2 index of the k-means and assignment searches: ours (the
/// flat engine, FlatEngineIndex.h) on the spec's device, else FAISS's on the
/// CPU (equal results, ties aside).
class CentroidIndex {
public:
    CentroidIndex(int d, const PartitionSpec& s) {
        if (s.res) {
            gpu_.reset(new FlatEngineIndex(s.res, s.device, d));
        } else {
            cpu_.reset(new faiss::IndexFlatL2(d));
        }
    }
    faiss::Index& get() { return gpu_ ? static_cast<faiss::Index&>(*gpu_) : *cpu_; }

private:
    std::unique_ptr<FlatEngineIndex> gpu_;
    std::unique_ptr<faiss::IndexFlatL2> cpu_;
};

/// k-means (FAISS) of the n x d rows x into c centroids.
std::vector<float> kmeans(const float* x, int64_t n, int d, int c, uint64_t seed,
                          const PartitionSpec& s) {
    if (c <= 1 || n <= c) {  // one centroid, or every row its own
        std::vector<float> out(x, x + size_t(std::min<int64_t>(n, std::max(c, 1))) * d);
        return out;
    }
    faiss::ClusteringParameters cp;
    cp.niter = 20;
    cp.seed = int(seed & 0x7fffffff);
    cp.max_points_per_centroid = int(std::min<int64_t>(n / c + 1, 1 << 30));  // use every row
    cp.min_points_per_centroid = 1;
    faiss::Clustering clus(d, c, cp);
    CentroidIndex index(d, s);
    clus.train(n, x, index.get());
    return clus.centroids;
}

/// For each of the n rows, its `overlap` nearest centroids (n x overlap)
/// in an index holding the centroids; with closure > 0, the j-th only when
/// its squared distance is at most closure times the nearest's (SPANN's
/// closure rule; -1 in its place otherwise).
std::vector<int64_t> nearest(faiss::Index& centroids, const float* x, int64_t n, int overlap,
                             double closure) {
    std::vector<float> D(size_t(n) * overlap);
    std::vector<int64_t> I(size_t(n) * overlap);
    centroids.search(n, x, overlap, D.data(), I.data());
    if (closure > 0) {
        for (int64_t r = 0; r < n; ++r)
            for (int j = 1; j < overlap; ++j)
                if (D[size_t(r) * overlap + j] > closure * D[size_t(r) * overlap])
                    I[size_t(r) * overlap + j] = -1;
    }
    return I;
}

/// Centroids whose share of the sample predicts more than kSplitAbove x
/// capacity rows are replaced by a k-means of their sampled members into
/// clusters of about kClusterFill x capacity (SPANN's balance constraint,
/// met from the sample before the file is read).
std::vector<float> splitLargeCentroids(std::vector<float> cent, const std::vector<float>& x,
                                       int64_t ns, int d, const PartitionSpec& s, int64_t n) {
    const int c = int(cent.size() / d), ov = std::min(s.overlap, c);
    CentroidIndex index(d, s);
    index.get().add(c, cent.data());
    const std::vector<int64_t> I = nearest(index.get(), x.data(), ns, ov, s.closure);
    std::vector<std::vector<int64_t>> members(c);
    for (int64_t r = 0; r < ns; ++r)
        for (int j = 0; j < ov; ++j)
            if (I[size_t(r) * ov + j] >= 0) members[I[size_t(r) * ov + j]].push_back(r);
    const double scale = double(n) / double(ns);
    std::vector<float> out;
    for (int i = 0; i < c; ++i) {
        const double est = members[i].size() * scale;
        const int parts = est > kSplitAbove * s.capacity
                                  ? int(std::ceil(est / (kClusterFill * s.capacity)))
                                  : 1;
        if (parts <= 1 || int64_t(members[i].size()) <= parts) {
            out.insert(out.end(), cent.begin() + size_t(i) * d, cent.begin() + size_t(i + 1) * d);
            continue;
        }
        std::vector<float> sub(members[i].size() * d);
        for (size_t r = 0; r < members[i].size(); ++r)
            std::copy_n(x.data() + size_t(members[i][r]) * d, d, sub.data() + r * d);
        const std::vector<float> parted =
                kmeans(sub.data(), int64_t(members[i].size()), d, parts, s.seed + i + 1, s);
        out.insert(out.end(), parted.begin(), parted.end());
    }
    return out;
}

/// One pass over the file: the sorted member list of every centroid.
std::vector<std::vector<int>> assignRows(const VectorFile& file, const std::vector<float>& cent,
                                         int overlap, const PartitionSpec& s) {
    const FlatMetric metric = s.metric;
    const int64_t n = file.n();
    const int d = file.d();
    const int c = int(cent.size() / d);
    std::vector<std::vector<int>> lists(c);
    CentroidIndex index(d, s);  // one index (and one upload) for every chunk
    index.get().add(c, cent.data());
    auto readChunk = [&](int64_t r0) {
        const int64_t m = std::min(kChunkRows, n - r0);
        std::vector<float> x(size_t(m) * d);
        file.read(r0, m, x.data());
        prepareVectors(metric, m, d, x.data());
        return x;
    };
    std::future<std::vector<float>> next = std::async(std::launch::async, readChunk, 0);
    for (int64_t r0 = 0; r0 < n; r0 += kChunkRows) {
        std::vector<float> x = next.get();
        if (r0 + kChunkRows < n) next = std::async(std::launch::async, readChunk, r0 + kChunkRows);
        const int64_t m = int64_t(x.size()) / d;
        const std::vector<int64_t> I = nearest(index.get(), x.data(), m, overlap, s.closure);
        for (int64_t r = 0; r < m; ++r)
            for (int j = 0; j < overlap; ++j) {
                const int64_t ci = I[size_t(r) * overlap + j];
                if (ci >= 0) lists[ci].push_back(int(r0 + r));  // rows ascending: lists stay sorted
            }
    }
    return lists;
}

}  // namespace

int64_t defaultSampleRows(int64_t n, int clusters) {
    return std::min<int64_t>(n, std::max<int64_t>(256 * int64_t(clusters), 262144));
}

std::vector<std::vector<int>> partitionFile(const VectorFile& file, const PartitionSpec& s) {
    const int64_t n = file.n();
    const int d = file.d();
    if (s.clusters <= 1) {  // one build holds every row
        std::vector<std::vector<int>> all(1, std::vector<int>(size_t(n)));
        for (int64_t i = 0; i < n; ++i) all[0][i] = int(i);
        return all;
    }
    int64_t ns = 0;
    const int64_t want = std::max<int64_t>(s.sampleRows > 0 ? s.sampleRows
                                                            : defaultSampleRows(n, s.clusters),
                                           s.clusters);
    const std::vector<float> x = readSample(file, want, s.metric, &ns);
    std::vector<float> cent = kmeans(x.data(), ns, d, s.clusters, s.seed, s);
    cent = splitLargeCentroids(std::move(cent), x, ns, d, s, n);
    const int c = int(cent.size() / d);
    const int ov = std::min(s.overlap, c);
    if (s.verbose) {
        std::printf("%s: partitioned: %d centroids (%d asked) from %lld sampled rows, each row "
                    "in %d\n",
                    s.who, c, s.clusters, (long long)ns, ov);
        std::fflush(stdout);
    }
    std::vector<std::vector<int>> lists = assignRows(file, cent, ov, s);
    return packAndSplit(std::move(lists), std::min(s.minRows, n),
                        s.cutAbove > 0 ? s.cutAbove : s.capacity);
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
