#include "faiss_ext/gpu/impl/gnnd/NeighbourMerges.h"

#include "faiss_ext/gpu/impl/flat/VectorPrep.h"
#include "faiss_ext/gpu/impl/gnnd/ClusterGather.h"
#include "faiss_ext/gpu/impl/gnnd/PartitionPlan.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstring>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

NeighbourMergePlan planNeighbourMerges(const std::vector<std::vector<int>>& groups,
                                       const std::vector<int>& rowGroups, int overlap, int m,
                                       int64_t capacity) {
    NeighbourMergePlan plan;
    plan.pairs = neighbourPairs(groups, rowGroups, overlap, m);
    for (const auto& pr : plan.pairs) {
        const auto& a = groups[pr.first];
        const int64_t nB = int64_t(positionsNotIn(groups[pr.second], a).size());
        plan.pieces.push_back(mergePieces(int64_t(a.size()), nB, capacity));
        for (const MergePiece& q : plan.pieces.back())
            plan.largestMerge = std::max(plan.largestMerge, q.rows());
        plan.merges += int(plan.pieces.back().size());
    }
    return plan;
}

size_t neighbourMergeHostBytes(int64_t n, int64_t rows, int d, int K) {
    return size_t(rows) * (sizeof(float) * d + (sizeof(int) + sizeof(float)) * K + sizeof(int)) +
           size_t(n) * sizeof(int);
}

namespace {

/// One device's buffers for merges of up to `capacity` rows, and the host
/// buffers of the piece being merged.
struct PairMergeWorker {
    int device = 0;
    GpuResources* res = nullptr;
    cudaStream_t stream = nullptr;
    DeviceVector<float> x, norms, dists;
    DeviceVector<int> ids;
    std::vector<int> rows;     ///< the piece's rows (file row ids), the first cluster's first
    std::vector<int> localOf;  ///< file row -> local id (-1 outside the piece)
    std::vector<float> hostX;
    std::vector<int> hostIds;
    std::vector<float> hostDists;

    PairMergeWorker(int dev, GpuResources* r, int64_t capacity, int d, int K, int64_t n)
            : device(dev), res(r), localOf(size_t(n), -1) {
        DeviceScope scope(device);
        FAISS_EXT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        const char* who = "gnndBuildFromFile (neighbour merges)";
        x.allocate(res, device, size_t(capacity) * d, who, "pair vectors");
        norms.allocate(res, device, size_t(capacity), who, "pair norms");
        ids.allocate(res, device, size_t(capacity) * K, who, "pair graph ids");
        dists.allocate(res, device, size_t(capacity) * K, who, "pair graph distances");
    }
    ~PairMergeWorker() {
        DeviceScope scope(device);
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }

    /// GGM of hostX (nA rows of the first side, then nB) with the lists
    /// hostIds / hostDists (local ids), replaced by the merged lists.
    void merge(int64_t nA, int64_t nB, int d, FlatMetric metric, const Params& p) {
        const int64_t m = nA + nB;
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(x.data(), hostX.data(), sizeof(float) * m * d,
                                             cudaMemcpyHostToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(ids.data(), hostIds.data(), sizeof(int) * m * p.K,
                                             cudaMemcpyHostToDevice, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dists.data(), hostDists.data(),
                                             sizeof(float) * m * p.K, cudaMemcpyHostToDevice,
                                             stream));
        prepareVectorsDevice(metric, x.data(), m, d, stream);
        rowSquaredNorms(x.data(), m, d, norms.data(), stream);
        // local ids: the first side [0, nA), the second [nA, nA + nB)
        gnnd::merge(res, device, stream, x.data(), norms.data(), nA, nB, d, 0, nA, p, ids.data(),
                    dists.data(), nullptr);
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostIds.data(), ids.data(), sizeof(int) * m * p.K,
                                             cudaMemcpyDeviceToHost, stream));
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(hostDists.data(), dists.data(),
                                             sizeof(float) * m * p.K, cudaMemcpyDeviceToHost,
                                             stream));
        FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
};

/// Batches of pair indices whose clusters' vectors fit `budget` bytes
/// together (a batch holds at least one pair).
std::vector<std::vector<int>> pairBatches(const NeighbourMergePlan& plan,
                                          const std::vector<std::vector<int>>& groups, int d,
                                          size_t budget) {
    std::vector<std::vector<int>> out(1);
    std::vector<char> in(groups.size(), 0);
    size_t bytes = 0;
    for (int p = 0; p < int(plan.pairs.size()); ++p) {
        const int a = plan.pairs[p].first, b = plan.pairs[p].second;
        auto cost = [&](int g) { return in[g] ? size_t(0) : groups[g].size() * d * sizeof(float); };
        if (!out.back().empty() && bytes + cost(a) + cost(b) > budget) {
            out.emplace_back();
            std::fill(in.begin(), in.end(), 0);
            bytes = 0;
        }
        bytes += cost(a) + cost(b);
        in[a] = in[b] = 1;
        out.back().push_back(p);
    }
    if (out.back().empty()) out.pop_back();
    return out;
}

/// Merges the pieces of the pairs of one batch on the workers.
class BatchMerger {
public:
    BatchMerger(const NeighbourMergeInput& in, const NeighbourMergePlan& plan,
                std::vector<std::unique_ptr<PairMergeWorker>>& workers)
            : in_(in), plan_(plan), workers_(workers), d_(in.file->d()), K_(in.params.K) {}

    /// Gathers the batch's clusters, then runs its pieces; returns the merges run.
    int run(const std::vector<int>& batch) {
        gather_(batch);
        std::vector<std::pair<int, int>> jobs;  // (pair, piece)
        for (int p : batch)
            for (int q = 0; q < int(plan_.pieces[p].size()); ++q) jobs.emplace_back(p, q);
        std::atomic<int> next(0), done(0);
        runOnWorkers(in_.devices, in_.failed, [&](size_t w) {
            if (!workers_[w]) {
                workers_[w].reset(new PairMergeWorker(in_.devices[w], in_.res[w].get(),
                                                      plan_.largestMerge, d_, K_, in_.file->n()));
            }
            for (int j = next++; j < int(jobs.size()) && !*in_.failed; j = next++) {
                mergePiece_(*workers_[w], jobs[j].first, jobs[j].second);
                ++done;
            }
        });
        return done.load();
    }

private:
    void gather_(const std::vector<int>& batch) {
        std::vector<int> which;
        for (int p : batch) {
            which.push_back(plan_.pairs[p].first);
            which.push_back(plan_.pairs[p].second);
        }
        std::sort(which.begin(), which.end());
        which.erase(std::unique(which.begin(), which.end()), which.end());
        buf_ = gatherClusters(*in_.file, *in_.groups, *in_.rowGroups, in_.overlap, which);
        slot_.assign(in_.groups->size(), -1);
        for (size_t i = 0; i < which.size(); ++i) slot_[which[i]] = int(i);
    }

    /// The piece's rows and vectors into the worker's host buffers.
    void stagePiece_(PairMergeWorker& wk, int a, int b, const MergePiece& q) const {
        const auto& ga = (*in_.groups)[a];
        const auto& gb = (*in_.groups)[b];
        const std::vector<int64_t> bPos = positionsNotIn(gb, ga);
        const std::vector<float>& xa = buf_[slot_[a]];
        const std::vector<float>& xb = buf_[slot_[b]];
        const int64_t nA = q.a1 - q.a0, m = q.rows();
        wk.rows.resize(size_t(m));
        wk.hostX.resize(size_t(m) * d_);
        std::copy(ga.begin() + q.a0, ga.begin() + q.a1, wk.rows.begin());
        std::memcpy(wk.hostX.data(), xa.data() + size_t(q.a0) * d_, sizeof(float) * nA * d_);
#pragma omp parallel for schedule(static)
        for (int64_t j = q.b0; j < q.b1; ++j) {
            const int64_t r = nA + (j - q.b0);
            wk.rows[r] = gb[bPos[j]];
            std::memcpy(wk.hostX.data() + size_t(r) * d_, xb.data() + size_t(bPos[j]) * d_,
                        sizeof(float) * d_);
        }
        for (int64_t r = 0; r < m; ++r) wk.localOf[wk.rows[r]] = int(r);
    }

    void mergePiece_(PairMergeWorker& wk, int p, int q) {
        const auto t = Clock::now();
        const int a = plan_.pairs[p].first, b = plan_.pairs[p].second;
        const MergePiece& piece = plan_.pieces[p][q];
        stagePiece_(wk, a, b, piece);
        const int64_t m = piece.rows();
        wk.hostIds.resize(size_t(m) * K_);
        wk.hostDists.resize(size_t(m) * K_);
        {
            // the global lists of rows other workers' folds may touch
            std::lock_guard<std::mutex> lock(*in_.foldMutex);
            pairLocalLists(in_.globalIds, in_.globalDists, in_.k, wk.rows, wk.localOf, K_,
                           wk.hostIds.data(), wk.hostDists.data());
        }
        for (int r : wk.rows) wk.localOf[r] = -1;
        Params prm = in_.params;
        prm.seed = in_.params.seed + 104729 * uint64_t(p + 1) + 7919 * uint64_t(q);
        wk.merge(piece.a1 - piece.a0, piece.b1 - piece.b0, d_, in_.metric, prm);
        {
            std::lock_guard<std::mutex> lock(*in_.foldMutex);
            foldCluster(in_.globalIds, in_.globalDists, in_.k, wk.rows, wk.hostIds.data(),
                        wk.hostDists.data(), K_);
        }
        in_.progress->clustersMerged(a, b, wk.device, since(t));
    }

    const NeighbourMergeInput& in_;
    const NeighbourMergePlan& plan_;
    std::vector<std::unique_ptr<PairMergeWorker>>& workers_;
    const int d_, K_;
    std::vector<std::vector<float>> buf_;
    std::vector<int> slot_;
};

}  // namespace

int runNeighbourMerges(const NeighbourMergeInput& in, const NeighbourMergePlan& plan) {
    FAISS_THROW_IF_NOT_MSG(in.file && in.groups && in.rowGroups && in.globalIds &&
                                   in.globalDists && in.foldMutex && in.progress && in.failed &&
                                   !in.devices.empty() && in.res.size() == in.devices.size(),
                           "runNeighbourMerges: incomplete input");
    if (plan.merges == 0) return 0;
    std::vector<std::unique_ptr<PairMergeWorker>> workers(in.devices.size());
    int done = 0;
    for (const auto& batch : pairBatches(plan, *in.groups, in.file->d(), in.gatherBudget)) {
        BatchMerger bm(in, plan, workers);
        done += bm.run(batch);
    }
    return done;
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
