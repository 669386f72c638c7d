// Min-max heap of TH-heap's CPU stage (see MinMaxHeap.h). The trickle-down
// routines are Atkinson et al.'s TrickleDown as the paper's Alg. 4 gives it
// one step at a time (PTRICKLEMINONCE / PTRICKLEMAXONCE), run to completion
// here with a "hole" (the moving key is kept in a register and written once).
#include "faiss_ext/MinMaxHeap.h"

#include <faiss/impl/FaissAssert.h>

#include <omp.h>

#include <algorithm>

namespace faiss_ext {

namespace {

/// Whether node i is on a min level (root = level 0 = min).
inline bool isMinLevel(size_t i) {
    return ((63 - __builtin_clzll(uint64_t(i) + 1)) & 1) == 0;
}

/// Places x at node i (a min level) of h[0, n) and trickles it down. The
/// subtrees below i must be valid min-max heaps.
inline void trickleDownMin(uint64_t* h, size_t n, size_t i, uint64_t x) {
    for (;;) {
        const size_t g = 4 * i + 3;  // first grandchild
        if (g + 3 < n) {
            // All four grandchildren exist; each child (a max level) is >=
            // its own children, so the smallest descendant is a grandchild.
            size_t m = g;
            uint64_t v = h[g];
            if (h[g + 1] < v) { m = g + 1; v = h[m]; }
            if (h[g + 2] < v) { m = g + 2; v = h[m]; }
            if (h[g + 3] < v) { m = g + 3; v = h[m]; }
            if (v >= x) break;
            h[i] = v;
            const size_t p = (m - 1) >> 1;
            if (x > h[p]) std::swap(x, h[p]);
            i = m;
            continue;
        }
        const size_t c = 2 * i + 1;
        if (c >= n) break;
        // Bottom of the heap: children and the grandchildren that exist.
        size_t m = c;
        uint64_t v = h[c];
        if (c + 1 < n && h[c + 1] < v) { m = c + 1; v = h[m]; }
        for (size_t j = g; j < n && j < g + 4; ++j) {
            if (h[j] < v) { m = j; v = h[j]; }
        }
        if (v >= x) break;
        h[i] = v;
        if (m >= g) {
            const size_t p = (m - 1) >> 1;
            if (x > h[p]) std::swap(x, h[p]);
            i = m;
            continue;  // m has no children here: the loop ends next round
        }
        i = m;
        break;
    }
    h[i] = x;
}

/// Max-level twin of trickleDownMin (all comparisons reversed).
inline void trickleDownMax(uint64_t* h, size_t n, size_t i, uint64_t x) {
    for (;;) {
        const size_t g = 4 * i + 3;
        if (g + 3 < n) {
            size_t m = g;
            uint64_t v = h[g];
            if (h[g + 1] > v) { m = g + 1; v = h[m]; }
            if (h[g + 2] > v) { m = g + 2; v = h[m]; }
            if (h[g + 3] > v) { m = g + 3; v = h[m]; }
            if (v <= x) break;
            h[i] = v;
            const size_t p = (m - 1) >> 1;
            if (x < h[p]) std::swap(x, h[p]);
            i = m;
            continue;
        }
        const size_t c = 2 * i + 1;
        if (c >= n) break;
        size_t m = c;
        uint64_t v = h[c];
        if (c + 1 < n && h[c + 1] > v) { m = c + 1; v = h[m]; }
        for (size_t j = g; j < n && j < g + 4; ++j) {
            if (h[j] > v) { m = j; v = h[j]; }
        }
        if (v <= x) break;
        h[i] = v;
        if (m >= g) {
            const size_t p = (m - 1) >> 1;
            if (x < h[p]) std::swap(x, h[p]);
            i = m;
            continue;
        }
        i = m;
        break;
    }
    h[i] = x;
}

/// Moves x up from node i along min levels (grandparent steps), then writes it.
inline void bubbleUpMin(uint64_t* h, size_t i, uint64_t x) {
    while (i >= 3) {
        const size_t gp = (i - 3) >> 2;
        if (x < h[gp]) {
            h[i] = h[gp];
            i = gp;
        } else {
            break;
        }
    }
    h[i] = x;
}

inline void bubbleUpMax(uint64_t* h, size_t i, uint64_t x) {
    while (i >= 3) {
        const size_t gp = (i - 3) >> 2;
        if (x > h[gp]) {
            h[i] = h[gp];
            i = gp;
        } else {
            break;
        }
    }
    h[i] = x;
}

int resolveThreads(int nthreads) {
    return nthreads > 0 ? nthreads : omp_get_max_threads();
}

}  // namespace

MinMaxKHeap::MinMaxKHeap(size_t k) {
    reset(k);
}

void MinMaxKHeap::reset(size_t k) {
    FAISS_THROW_IF_NOT_FMT(k >= 1, "MinMaxKHeap: capacity k must be >= 1 (got %zu)", k);
    h_.resize(k);
    cap_ = k;
    clear();
}

void MinMaxKHeap::clear() {
    size_ = 0;
    maxIdx_ = 0;
    maxKey_ = 0;
}

uint64_t MinMaxKHeap::min() const {
    FAISS_THROW_IF_NOT_MSG(size_ > 0, "MinMaxKHeap::min(): heap is empty");
    return h_[0];
}

uint64_t MinMaxKHeap::max() const {
    FAISS_THROW_IF_NOT_MSG(size_ > 0, "MinMaxKHeap::max(): heap is empty");
    return maxKey_;
}

void MinMaxKHeap::updateMax() {
    const uint64_t* h = h_.data();
    if (size_ >= 3) {
        maxIdx_ = h[1] >= h[2] ? 1 : 2;
    } else {
        maxIdx_ = size_ == 2 ? 1 : 0;
    }
    maxKey_ = size_ > 0 ? h[maxIdx_] : 0;
}

void MinMaxKHeap::append(uint64_t key) {
    uint64_t* h = h_.data();
    size_t i = size_++;
    if (i == 0) {
        h[0] = key;
    } else {
        const size_t p = (i - 1) >> 1;
        if (isMinLevel(i)) {
            if (key > h[p]) {  // belongs on the max levels above
                h[i] = h[p];
                bubbleUpMax(h, p, key);
            } else {
                bubbleUpMin(h, i, key);
            }
        } else {
            if (key < h[p]) {  // belongs on the min levels above
                h[i] = h[p];
                bubbleUpMin(h, p, key);
            } else {
                bubbleUpMax(h, i, key);
            }
        }
    }
    updateMax();
}

// PINSERT (Alg. 5): the heap is full and key < max. The key replaces the max;
// if it is also below the min it takes the root instead and the old min is
// what goes into the max's slot. That slot (a max level, index 1 or 2) is then
// trickled down.
void MinMaxKHeap::replaceMax(uint64_t key) {
    uint64_t* h = h_.data();
    if (size_ == 1) {
        h[0] = key;
        maxKey_ = key;
        return;
    }
    uint64_t x = key;
    if (key < h[0]) {
        x = h[0];
        h[0] = key;
    }
    trickleDownMax(h, size_, maxIdx_, x);
    if (size_ >= 3) {
        maxIdx_ = h[1] >= h[2] ? 1 : 2;
    }
    maxKey_ = h[maxIdx_];
}

// PHEAPIFYMINMAX (Alg. 6): bottom-up over the internal nodes, each trickled
// down by its level's rule. O(size).
void MinMaxKHeap::heapify() {
    uint64_t* h = h_.data();
    const size_t n = size_;
    if (n >= 2) {
        for (size_t i = (n - 2) / 2 + 1; i-- > 0;) {
            if (isMinLevel(i)) {
                trickleDownMin(h, n, i, h[i]);
            } else {
                trickleDownMax(h, n, i, h[i]);
            }
        }
    }
    updateMax();
}

void MinMaxKHeap::pushMany(const uint64_t* keys, size_t n) {
    if (n == 0) return;
    FAISS_THROW_IF_NOT_MSG(keys != nullptr, "MinMaxKHeap::pushMany: keys is null");
    size_t i = 0;
    if (size_ < cap_) {
        const size_t m = std::min(n, cap_ - size_);
        if (m >= size_) {
            // Bulk fill: append the run and rebuild (Alg. 6) in O(size).
            std::copy(keys, keys + m, h_.data() + size_);
            size_ += m;
            heapify();
        } else {
            for (size_t j = 0; j < m; ++j) append(keys[j]);
        }
        i = m;
    }
    // Full: the hot loop. The max is kept in a local so the reject test does
    // not reload it (keys may alias nothing here, but the compiler cannot know).
    uint64_t mx = maxKey_;
    for (; i < n; ++i) {
        const uint64_t key = keys[i];
        if (key < mx) {
            replaceMax(key);
            mx = maxKey_;
        }
    }
}

// Alg. 7's second half: repeated delete-min. The last key fills the root's
// place and is trickled down from the root.
void MinMaxKHeap::popAllSorted(uint64_t* out) {
    const size_t n = size_;
    if (n > 0) {
        FAISS_THROW_IF_NOT_MSG(out != nullptr, "MinMaxKHeap::popAllSorted: out is null");
    }
    uint64_t* h = h_.data();
    for (size_t j = 0; j < n; ++j) {
        out[j] = h[0];
        const size_t rest = n - 1 - j;
        if (rest > 0) {
            trickleDownMin(h, rest, 0, h[rest]);
        }
    }
    clear();
}

bool MinMaxKHeap::checkInvariant() const {
    if (cap_ < 1 || size_ > cap_ || h_.size() < cap_) return false;
    const uint64_t* h = h_.data();
    // Every node against its parent and grandparent: this is the same set of
    // pairs as every node against its children and grandchildren, which
    // implies the global property by induction.
    for (size_t i = 1; i < size_; ++i) {
        const size_t p = (i - 1) >> 1;
        if (isMinLevel(p) ? h[p] > h[i] : h[p] < h[i]) return false;
        if (i >= 3) {
            const size_t gp = (i - 3) >> 2;
            if (isMinLevel(gp) ? h[gp] > h[i] : h[gp] < h[i]) return false;
        }
    }
    if (size_ > 0) {
        if (maxIdx_ >= size_ || maxKey_ != h[maxIdx_]) return false;
        for (size_t i = 0; i < size_ && i < 3; ++i) {
            if (h[i] > maxKey_) return false;
        }
    }
    return true;
}

size_t minMaxHeapPartialSort(const uint64_t* keys, size_t n, size_t k, uint64_t* out) {
    FAISS_THROW_IF_NOT_FMT(k >= 1, "minMaxHeapPartialSort: k must be >= 1 (got %zu)", k);
    const size_t m = std::min(n, k);
    if (m == 0) return 0;
    FAISS_THROW_IF_NOT_MSG(keys != nullptr && out != nullptr,
                           "minMaxHeapPartialSort: null keys or out");
    MinMaxKHeap heap(m);
    heap.pushMany(keys, n);
    heap.popAllSorted(out);
    return m;
}

void minMaxHeapFeedRows(MinMaxKHeap* heaps, size_t rows, const uint64_t* keys,
                        const int64_t* offsets, int nthreads) {
    if (rows == 0) return;
    FAISS_THROW_IF_NOT_MSG(heaps != nullptr && offsets != nullptr,
                           "minMaxHeapFeedRows: null heaps or offsets");
    // Checked here, serially: nothing may throw inside the parallel region.
    for (size_t r = 0; r < rows; ++r) {
        FAISS_THROW_IF_NOT_FMT(offsets[r + 1] >= offsets[r],
                               "minMaxHeapFeedRows: offsets decrease at row %zu (%lld > %lld)", r,
                               (long long)offsets[r], (long long)offsets[r + 1]);
    }
    const int64_t base = offsets[0];
    FAISS_THROW_IF_NOT_MSG(offsets[rows] == base || keys != nullptr,
                           "minMaxHeapFeedRows: keys is null");
    const int nt = resolveThreads(nthreads);
    const int64_t nrows = int64_t(rows);
#pragma omp parallel for schedule(dynamic, 16) num_threads(nt) if (nrows > 1 && nt > 1)
    for (int64_t r = 0; r < nrows; ++r) {
        const int64_t len = offsets[r + 1] - offsets[r];
        if (len > 0) {
            heaps[r].pushMany(keys + (offsets[r] - base), size_t(len));
        }
    }
}

void minMaxHeapPopRows(MinMaxKHeap* heaps, size_t rows, uint64_t* out, size_t outStride,
                       int nthreads) {
    if (rows == 0) return;
    FAISS_THROW_IF_NOT_MSG(heaps != nullptr, "minMaxHeapPopRows: heaps is null");
    bool any = false;
    for (size_t r = 0; r < rows; ++r) {
        FAISS_THROW_IF_NOT_FMT(heaps[r].size() <= outStride,
                               "minMaxHeapPopRows: row %zu holds %zu keys > outStride %zu", r,
                               heaps[r].size(), outStride);
        any = any || heaps[r].size() > 0;
    }
    if (!any) return;
    FAISS_THROW_IF_NOT_MSG(out != nullptr, "minMaxHeapPopRows: out is null");
    const int nt = resolveThreads(nthreads);
    const int64_t nrows = int64_t(rows);
#pragma omp parallel for schedule(dynamic, 16) num_threads(nt) if (nrows > 1 && nt > 1)
    for (int64_t r = 0; r < nrows; ++r) {
        heaps[r].popAllSorted(out + size_t(r) * outStride);
    }
}

}  // namespace faiss_ext
