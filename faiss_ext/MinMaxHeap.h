// CPU stage of Matsumoto & Yiu's TH-heap (ICDM 2015, docs/references.md,
// sections III.B and III.C, Algorithms 4-7): a fixed-capacity min-max heap
// (Atkinson, Sack, Santoro & Strothotte 1986) that keeps the k smallest keys
// offered to it, plus batched OpenMP entry points over CSR rows.
//
// Keys are plain uint64 values compared as such (callers pack an
// order-preserving float in the high 32 bits and an id in the low 32 bits;
// nothing here decodes them).
//
// Layout: the heap lives in one contiguous array, node i has children 2i+1
// and 2i+2; levels alternate min / max starting with a min level at the root
// (index 0). A node on a min level is <= all of its descendants, a node on a
// max level is >= all of its descendants, so the min is h[0] and the max is
// the larger of h[1], h[2] (or h[0] / h[1] for sizes 1 / 2).
//
// Filling: while not full, push() appends the key and bubbles it up
// (Atkinson's BubbleUp), so the invariant holds after every call and min() /
// max() are always O(1). pushMany() instead appends a whole run at once and
// rebuilds the heap bottom-up with PHEAPIFYMINMAX (Alg. 6, O(size)) when the
// run is at least as long as what the heap already held (always the case for
// the first call on an empty heap), else it bubbles each key up.
// Once full, a key is kept only if it is smaller than the max: it replaces
// the max (PINSERT, Alg. 5; if it is also smaller than the min it takes the
// root and the old min goes to the max's slot) and the slot is trickled down
// (PTRICKLEMAX, Alg. 4's max twin). The index and value of the max are
// cached so the reject test is one comparison with a member.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace faiss_ext {

/// Fixed-capacity min-max heap (Atkinson et al. 1986) as TH-heap uses it:
/// keeps the k smallest keys offered; min and max in O(1), insert O(log k).
class MinMaxKHeap {
public:
    explicit MinMaxKHeap(size_t k = 1);  // k >= 1, else FAISS_THROW
    void reset(size_t k);                // empty, capacity k (>= 1)
    void clear();                        // empty, same capacity

    size_t size() const { return size_; }
    size_t capacity() const { return cap_; }
    bool full() const { return size_ == cap_; }

    uint64_t min() const;  // require size() > 0 (throws otherwise)
    uint64_t max() const;  // require size() > 0 (throws otherwise)

    /// Offers a key: while not full it is appended and bubbled up (the
    /// invariant holds after every push); when full it replaces the max if
    /// smaller (PINSERT, Alg. 5) and is dropped otherwise. Returns whether it
    /// was kept.
    bool push(uint64_t key) {
        if (size_ == cap_) {
            if (key >= maxKey_) {
                return false;
            }
            replaceMax(key);
            return true;
        }
        append(key);
        return true;
    }

    /// Offers n keys (same result as n pushes; bulk fill uses PHEAPIFYMINMAX).
    void pushMany(const uint64_t* keys, size_t n);

    /// Writes the held keys in ascending order to out (size() of them) by
    /// repeated delete-min (Alg. 7's second half); the heap is left empty.
    void popAllSorted(uint64_t* out);

    /// Whether the min-max heap invariant holds (for tests); also checks the
    /// cached max.
    bool checkInvariant() const;

private:
    void append(uint64_t key);      // size_ < cap_: add and bubble up
    void replaceMax(uint64_t key);  // full, key < maxKey_
    void heapify();                 // PHEAPIFYMINMAX over h_[0, size_)
    void updateMax();               // recompute maxIdx_ / maxKey_

    std::vector<uint64_t> h_;  // capacity cap_, first size_ entries used
    size_t size_ = 0;
    size_t cap_ = 1;
    size_t maxIdx_ = 0;
    uint64_t maxKey_ = 0;  // h_[maxIdx_] when size_ > 0
};

/// The k smallest of keys[0..n) sorted ascending into out; returns min(n, k).
/// k >= 1 (throws otherwise); out holds min(n, k) keys.
size_t minMaxHeapPartialSort(const uint64_t* keys, size_t n, size_t k, uint64_t* out);

/// TH-heap's CPU stage over a CSR batch: row r's keys are
/// keys[offsets[r] - offsets[0] .. offsets[r+1] - offsets[0]) and are offered
/// to heaps[r] (r in [0, rows)); rows are spread over OpenMP threads
/// (nthreads <= 0: OpenMP's default). offsets must be non-decreasing
/// (checked before any heap is touched; throws otherwise).
void minMaxHeapFeedRows(MinMaxKHeap* heaps, size_t rows, const uint64_t* keys,
                        const int64_t* offsets, int nthreads = 0);

/// Pops every heap of heaps[0..rows) sorted into out + r * outStride, OpenMP
/// over rows: row r gets heaps[r].size() keys (the rest of the row is left
/// untouched) and every heap is left empty. Throws, before touching
/// anything, if some heaps[r].size() > outStride.
void minMaxHeapPopRows(MinMaxKHeap* heaps, size_t rows, uint64_t* out, size_t outStride,
                       int nthreads = 0);

}  // namespace faiss_ext
