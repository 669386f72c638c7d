#include "faiss_ext/gpu/impl/gnnd/ClusterGather.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cstring>
#include <future>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

namespace {

/// Rows read per chunk of a gather pass.
constexpr int64_t kGatherChunkRows = 262144;

/// Copies each row of the chunk x (rows r0..) to its place in the buffers
/// of its clusters that are gathered (slot[g] >= 0: buffer slot[g]).
void scatterChunk(const std::vector<float>& x, int64_t r0, int d,
                  const std::vector<std::vector<int>>& groups, const std::vector<int>& rowGroups,
                  int overlap, const std::vector<int>& slot, std::vector<std::vector<float>>& buf) {
    const int64_t m = int64_t(x.size()) / d;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
        const int row = int(r0 + r);
        for (int j = 0; j < overlap; ++j) {
            const int g = rowGroups[size_t(row) * overlap + j];
            if (g < 0 || slot[g] < 0) continue;
            const auto& mem = groups[g];
            const size_t pos = size_t(std::lower_bound(mem.begin(), mem.end(), row) - mem.begin());
            std::memcpy(buf[slot[g]].data() + pos * d, x.data() + size_t(r) * d,
                        sizeof(float) * d);
        }
    }
}

}  // namespace

std::vector<std::vector<float>> gatherClusters(const VectorFile& file,
                                               const std::vector<std::vector<int>>& groups,
                                               const std::vector<int>& rowGroups, int overlap,
                                               const std::vector<int>& which) {
    const int d = file.d();
    std::vector<std::vector<float>> buf(which.size());
    std::vector<int> slot(groups.size(), -1);
    int64_t lo = file.n(), hi = 0;
    for (size_t i = 0; i < which.size(); ++i) {
        const auto& mem = groups[which[i]];
        FAISS_THROW_IF_NOT_MSG(!mem.empty(), "gatherClusters: internal error: empty cluster");
        slot[which[i]] = int(i);
        buf[i].resize(mem.size() * d);
        lo = std::min<int64_t>(lo, mem.front());
        hi = std::max<int64_t>(hi, int64_t(mem.back()) + 1);
    }
    auto readChunk = [&file, d, hi](int64_t r0) {
        std::vector<float> x(size_t(std::min(kGatherChunkRows, hi - r0)) * d);
        file.read(r0, int64_t(x.size()) / d, x.data());
        return x;
    };
    if (which.empty()) return buf;
    std::future<std::vector<float>> next = std::async(std::launch::async, readChunk, lo);
    for (int64_t r0 = lo; r0 < hi; r0 += kGatherChunkRows) {
        const std::vector<float> x = next.get();
        if (r0 + kGatherChunkRows < hi)
            next = std::async(std::launch::async, readChunk, r0 + kGatherChunkRows);
        scatterChunk(x, r0, d, groups, rowGroups, overlap, slot, buf);
    }
    return buf;
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
