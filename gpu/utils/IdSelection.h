// A FAISS IDSelector evaluated over the positions 0 .. ntotal - 1 of an
// index: a bitmap (bit i of word i / 32) and the count of selected
// positions. The GPU searches take this form instead of calling is_member
// from kernels (FAISS's IDSelector is a host-side virtual class).
//
// Cost (host, once per search): IDSelectorRange, IDSelectorArray,
// IDSelectorBatch, IDSelectorBitmap, IDSelectorAll and IDSelectorNot of one
// of these are read directly (O(ntotal / 32) words plus O(ids)); any other
// subclass (IDSelectorTranslated of IndexIDMap in newer FAISS, user
// subclasses) costs one is_member call per position, run with OpenMP.
// docs/filters.md gives the measured costs.
#pragma once

#include <faiss/Index.h>
#include <faiss/impl/IDSelector.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {

/// Which positions of an index a selector keeps.
class IdSelection {
public:
    /// Evaluates `sel` (not null) over positions 0 .. ntotal - 1 (ntotal
    /// < 2^32). Throws, before anything else happens, for an
    /// IDSelectorBitmap with a null bitmap or an IDSelectorArray with null
    /// ids and n > 0.
    IdSelection(const faiss::IDSelector* sel, int64_t ntotal);

    /// Positions covered (the index's ntotal when built).
    int64_t size() const { return ntotal_; }
    /// Number of selected positions.
    int64_t count() const { return count_; }
    /// Whether the selected positions are one run first() .. first() + count() - 1.
    bool contiguous() const { return contiguous_; }
    /// The smallest selected position (ntotal when none).
    int64_t first() const { return first_; }
    /// Bitmap words, (ntotal + 31) / 32 of them: bit i % 32 of word i / 32.
    const std::vector<uint32_t>& words() const { return words_; }
    /// Whether position i is selected.
    bool contains(int64_t i) const { return (words_[size_t(i >> 5)] >> (i & 31)) & 1u; }
    /// The selected positions, ascending.
    std::vector<uint32_t> positions() const;
    /// The positions not selected, ascending (the survivors of a remove_ids).
    std::vector<uint32_t> unselectedPositions() const;

    /// The selection of params->sel over positions 0 .. ntotal - 1, or null
    /// when params (may be null) carries no selector.
    static std::unique_ptr<IdSelection> fromParams(const faiss::SearchParameters* params,
                                                   int64_t ntotal);

    /// Queues a copy of the words() to dst (words().size() device words) on
    /// `stream`; the caller keeps this selection alive until it has run.
    void copyWordsTo(uint32_t* dst, cudaStream_t stream) const;

private:
    void setRange_(int64_t lo, int64_t hi);
    void setIds_(const int64_t* ids, size_t n);
    void fill_(const faiss::IDSelector* sel);
    void finish_();

    int64_t ntotal_;
    std::vector<uint32_t> words_;
    int64_t count_ = 0;
    int64_t first_ = 0;
    bool contiguous_ = false;
};

}  // namespace gpu
}  // namespace faiss_ext
