// Host cuckoo hash table (see CuckooHashTable.h).
#include "faiss_ext/CuckooHashTable.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cmath>

namespace faiss_ext {

int CuckooHashTable::maxChain(size_t n) {
    return 200 + 20 * int(std::ceil(std::log2(double(n) + 2.0)));
}

bool CuckooHashTable::hasRepeatedKeys(const uint64_t* keys, size_t n) {
    std::vector<uint64_t> sorted(keys, keys + n);
    std::sort(sorted.begin(), sorted.end());
    return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
}

void CuckooHashTable::clear() {
    keys_.clear();
    slots_.clear();
    subSize_ = 0;
    subTables_ = 0;
    attempts_ = growths_ = 0;
}

lsh::CuckooView CuckooHashTable::view() const {
    lsh::CuckooView v;
    v.slots = slots_.data();
    v.keys = keys_.data();
    v.subSize = subSize_;
    v.subTables = subTables_;
    for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) v.seeds[s] = seeds_[s];
    return v;
}

void CuckooHashTable::build(const uint64_t* keys, size_t n, int subTables, float maxLoad,
                            uint64_t seed, int maxAttempts) {
    FAISS_THROW_IF_NOT_FMT(subTables >= 2 && subTables <= lsh::kMaxCuckooSubTables,
                           "CuckooHashTable: subTables must be in [2, %d], got %d",
                           lsh::kMaxCuckooSubTables, subTables);
    FAISS_THROW_IF_NOT_FMT(maxLoad > 0.f && maxLoad < 1.f,
                           "CuckooHashTable: maxLoad must be in (0, 1), got %g", double(maxLoad));
    FAISS_THROW_IF_NOT_FMT(maxAttempts >= 1, "CuckooHashTable: maxAttempts must be >= 1, got %d",
                           maxAttempts);
    FAISS_THROW_IF_NOT_FMT(n < (size_t(1) << 32) - 1,
                           "CuckooHashTable: at most 2^32 - 2 keys, got %zu", n);
    FAISS_THROW_IF_NOT_MSG(n == 0 || keys, "CuckooHashTable: null keys");
    FAISS_THROW_IF_NOT_MSG(!hasRepeatedKeys(keys, n), "CuckooHashTable: keys must be distinct");
    std::vector<uint64_t> newKeys(keys, keys + n);
    const double want = std::ceil(double(n) / double(maxLoad) / subTables);
    uint64_t subSize = std::max<uint64_t>(1, uint64_t(want));
    const int chain = maxChain(n);
    int attempts = 0, growths = 0;
    std::vector<uint32_t> slots;
    uint64_t seeds[lsh::kMaxCuckooSubTables] = {};
    for (;;) {
        bool ok = false;
        for (int a = 0; a < maxAttempts && !ok; ++a) {
            const int attempt = attempts++;
            for (int s = 0; s < subTables; ++s) seeds[s] = lsh::cuckooSubSeed(seed, attempt, s);
            slots.assign(size_t(subSize) * subTables, 0u);
            ok = true;
            for (size_t i = 0; i < n && ok; ++i) {
                uint32_t cur = uint32_t(i) + 1;
                int sub = 0;
                int steps = 0;
                for (;;) {
                    const uint32_t slot = lsh::cuckooSlot(newKeys[cur - 1], seeds[sub], uint32_t(subSize));
                    uint32_t& cell = slots[size_t(sub) * subSize + slot];
                    std::swap(cell, cur);
                    if (cur == 0) break;
                    sub = (sub + 1) % subTables;
                    if (++steps > chain) {
                        ok = false;
                        break;
                    }
                }
            }
        }
        if (ok) break;
        subSize = subSize + std::max<uint64_t>(1, subSize / 20);
        ++growths;
        FAISS_THROW_IF_NOT_FMT(subSize * subTables < (uint64_t(1) << 40),
                               "CuckooHashTable: cannot place %zu keys", n);
    }
    keys_.swap(newKeys);
    slots_.swap(slots);
    subSize_ = uint32_t(subSize);
    subTables_ = subTables;
    for (int s = 0; s < lsh::kMaxCuckooSubTables; ++s) seeds_[s] = s < subTables ? seeds[s] : 0;
    attempts_ = attempts;
    growths_ = growths;
}

}  // namespace faiss_ext
