// The host side of the probe search's plan (ProbeSearch.h): how many lists
// a corpus gets and how the query-list pairs of a batch are cut into work
// items, one thread block each. Plain C++ (tests/test_cpu_probe_plan.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace graph {

/// Lists of a corpus of nb >= 1 vectors: round(4 sqrt(nb)) (the lower end
/// of FAISS's 4..16 sqrt(nb) for inverted files: short lists make a probe
/// scan fewer vectors for the same recall), at least 1, at most
/// min(nb, 65,536). On a hard 1M x 100 set queried from other centres
/// (4,000 lists of p50 253 vectors, DeviceKMeans.h's k-means), a CPU
/// emulation of the probe (bench/probe_emulation.py) reached recall@10
/// 0.929 / 0.963 / 0.980 / 0.993 at 32 / 48 / 64 / 96 lists probed,
/// scanning 0.85% / 1.3% / 1.7% / 2.5% of the vectors.
int64_t probeListCount(int64_t nb);

/// Whether a filtered search's queries unlike the data are probed (the
/// scan skipping rows outside the selection) rather than searched exactly
/// over the selection: for selections of at least half the vectors. A
/// narrower one costs its exact search less than half a scan, and leaves
/// fewer selected vectors in the lists a query probes (not measured: the
/// line between them is where the exact search costs half as much as
/// over every vector).
inline bool probeServesSelection(int64_t selected, int64_t ntotal) {
    return selected >= 1 && 2 * selected >= ntotal;
}

/// One block's share of a list: the grouped pairs first .. first + count - 1
/// (1 <= count), all probing `list`.
struct ProbeWorkItem {
    int32_t list;
    uint32_t first;
    uint32_t count;
};

/// The work items of a batch whose pairs, grouped by list in list order,
/// number counts[l] for list l: each list's pairs in items of perItem (>= 1)
/// but the last; lists without pairs get none. firsts[l] receives the
/// first grouped index of list l.
std::vector<ProbeWorkItem> probeWorkItems(const std::vector<unsigned>& counts, int perItem,
                                          std::vector<unsigned>& firsts);

}  // namespace graph
}  // namespace gpu
}  // namespace faiss_ext
