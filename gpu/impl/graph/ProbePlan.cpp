#include "faiss_ext/gpu/impl/graph/ProbePlan.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>

namespace faiss_ext {
namespace gpu {
namespace graph {

namespace {
constexpr int64_t kMaxProbeLists = 65536;
}

int64_t probeListCount(int64_t nb) {
    const int64_t p = std::llround(4.0 * std::sqrt(double(std::max<int64_t>(nb, 1))));
    return std::max<int64_t>(1, std::min<int64_t>({p, nb, kMaxProbeLists}));
}

std::vector<ProbeWorkItem> probeWorkItems(const std::vector<unsigned>& counts, int perItem,
                                          std::vector<unsigned>& firsts) {
    FAISS_THROW_IF_NOT_FMT(perItem >= 1, "probeWorkItems: perItem = %d must be >= 1", perItem);
    std::vector<ProbeWorkItem> items;
    firsts.assign(counts.size(), 0);
    uint32_t first = 0;
    for (size_t l = 0; l < counts.size(); ++l) {
        firsts[l] = first;
        for (uint32_t t = 0; t < counts[l]; t += uint32_t(perItem)) {
            items.push_back(ProbeWorkItem{int32_t(l), first + t,
                                          std::min<uint32_t>(uint32_t(perItem), counts[l] - t)});
        }
        first += counts[l];
    }
    return items;
}

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
