// Cuckoo hash table on the host (Pagh & Rodler; the layout of Alcantara et
// al.'s GPU tables that section 5.2 of Pan & Manocha 2011 uses; docs/references.md):
// f sub-tables with their own hash function, one key per slot; an insert
// that finds its slot taken evicts the occupant, which moves on to its slot
// in the next sub-table. When a chain of evictions grows too long the build
// restarts with fresh hash seeds. The GPU version is
// faiss_ext::gpu::GpuCuckooHashTable; both answer lookups through
// faiss_ext::lsh::CuckooView, so they find the same keys.
#pragma once

#include "faiss_ext/BiLevelLSHCommon.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace faiss_ext {

/// Map from distinct 64-bit keys to their index in the key array.
class CuckooHashTable {
public:
    /// Builds the table over keys[0..n) (distinct; a repeated key throws).
    /// subTables: f in [2, 8]; maxLoad in (0, 1): slots = ceil(n / maxLoad)
    /// rounded up to a multiple of f. Up to maxAttempts builds with fresh
    /// seeds; when all fail the table grows by 5% and tries again (growths()
    /// counts how often).
    void build(const uint64_t* keys, size_t n, int subTables, float maxLoad, uint64_t seed,
               int maxAttempts = 16);

    /// Index i with keys[i] == key, or -1.
    int64_t find(uint64_t key) const { return view().find(key); }

    /// Lookup view (valid while this table lives and is not rebuilt).
    lsh::CuckooView view() const;

    size_t size() const { return keys_.size(); }
    /// Slots in all sub-tables.
    size_t capacity() const { return slots_.size(); }
    /// size() / capacity().
    double load() const { return slots_.empty() ? 0.0 : double(keys_.size()) / slots_.size(); }
    /// Builds started (1 + restarts) by the last build().
    int attempts() const { return attempts_; }
    /// Times the last build() grew the table.
    int growths() const { return growths_; }
    int subTables() const { return subTables_; }
    const std::vector<uint64_t>& keys() const { return keys_; }
    void clear();

    /// Whether keys[0..n) hold a key twice.
    static bool hasRepeatedKeys(const uint64_t* keys, size_t n);

    /// Longest eviction chain allowed for n keys.
    static int maxChain(size_t n);

private:
    std::vector<uint64_t> keys_;
    std::vector<uint32_t> slots_;
    uint32_t subSize_ = 0;
    int subTables_ = 0;
    uint64_t seeds_[lsh::kMaxCuckooSubTables] = {};
    int attempts_ = 0;
    int growths_ = 0;
};

}  // namespace faiss_ext
