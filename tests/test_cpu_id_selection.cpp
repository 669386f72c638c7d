// IdSelection (the host form of a FAISS IDSelector that the GPU searches
// take) against the selector's own is_member, for every selector type FAISS
// 1.7.3 has, a user subclass, and index sizes around word boundaries.
#include "faiss_ext/gpu/utils/IdSelection.h"

#include <faiss/impl/FaissException.h>
#include <faiss/impl/IDSelector.h>

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

using faiss_ext::gpu::IdSelection;

namespace {

/// Keeps ids whose remainder mod 3 is 1: a subclass IdSelection knows
/// nothing of (the is_member path).
struct ModuloSelector : faiss::IDSelector {
    bool is_member(idx_t id) const override { return id % 3 == 1; }
};

/// Every position of `s` agrees with sel->is_member, and the count, first
/// position, run flag and positions() agree with a scan.
void expectMatches(const faiss::IDSelector* sel, int64_t n, const std::string& what) {
    IdSelection s(sel, n);
    int64_t count = 0, first = n, last = -1;
    std::vector<uint32_t> expected;
    for (int64_t i = 0; i < n; ++i) {
        const bool in = sel->is_member(i);
        ASSERT_EQ(s.contains(i), in) << what << " n=" << n << " position " << i;
        if (in) {
            ++count;
            if (first == n) first = i;
            last = i;
            expected.push_back(uint32_t(i));
        }
    }
    EXPECT_EQ(s.count(), count) << what << " n=" << n;
    EXPECT_EQ(s.first(), first) << what << " n=" << n;
    EXPECT_EQ(s.contiguous(), count > 0 && last - first + 1 == count) << what << " n=" << n;
    EXPECT_EQ(s.positions(), expected) << what << " n=" << n;
    std::vector<uint32_t> others;
    for (int64_t i = 0; i < n; ++i)
        if (!sel->is_member(i)) others.push_back(uint32_t(i));
    EXPECT_EQ(s.unselectedPositions(), others) << what << " n=" << n;
    EXPECT_EQ(s.words().size(), size_t((n + 31) / 32)) << what;
}

}  // namespace

TEST(IdSelection, MatchesIsMemberForEverySelectorType) {
    std::mt19937_64 rng(7);
    for (int64_t n : {0, 1, 31, 32, 33, 64, 100, 1000, 4099}) {
        faiss::IDSelectorRange range(n / 4, n / 2 + 3);
        faiss::IDSelectorRange outside(n + 5, n + 50);
        faiss::IDSelectorRange negative(-10, n / 3);
        std::vector<int64_t> ids;
        for (int j = 0; j < 40; ++j) ids.push_back(int64_t(rng() % uint64_t(n + 20)) - 5);
        ids.push_back(ids.empty() ? 0 : ids[0]);  // a repeat
        faiss::IDSelectorArray array(ids.size(), ids.data());
        faiss::IDSelectorBatch batch(ids.size(), ids.data());
        std::vector<uint8_t> bitmap(size_t(n / 8 + 3));
        for (auto& b : bitmap) b = uint8_t(rng());
        faiss::IDSelectorBitmap bits(bitmap.size(), bitmap.data());
        faiss::IDSelectorBitmap shortBits(bitmap.size() / 2, bitmap.data());
        faiss::IDSelectorAll all;
        faiss::IDSelectorNot notRange(&range);
        faiss::IDSelectorNot notBits(&bits);
        ModuloSelector modulo;
        faiss::IDSelectorNot notModulo(&modulo);
        expectMatches(&range, n, "range");
        expectMatches(&outside, n, "range past the end");
        expectMatches(&negative, n, "range from a negative id");
        expectMatches(&array, n, "array");
        expectMatches(&batch, n, "batch");
        expectMatches(&bits, n, "bitmap");
        expectMatches(&shortBits, n, "bitmap shorter than the index");
        expectMatches(&all, n, "all");
        expectMatches(&notRange, n, "not(range)");
        expectMatches(&notBits, n, "not(bitmap)");
        expectMatches(&modulo, n, "user subclass");
        expectMatches(&notModulo, n, "not(user subclass)");
    }
}

TEST(IdSelection, UserSubclassOverManyPositionsRunsInParallel) {
    ModuloSelector modulo;
    expectMatches(&modulo, 200000, "user subclass, 200k positions");
}

TEST(IdSelection, RefusesNullSelectorsAndBitmaps) {
    EXPECT_THROW(IdSelection(nullptr, 10), faiss::FaissException);
    faiss::IDSelectorBitmap nullBitmap(4, nullptr);
    EXPECT_THROW(IdSelection(&nullBitmap, 10), faiss::FaissException);
    faiss::IDSelectorArray nullArray(3, nullptr);
    EXPECT_THROW(IdSelection(&nullArray, 10), faiss::FaissException);
    faiss::IDSelectorNot nullInner(nullptr);
    EXPECT_THROW(IdSelection(&nullInner, 10), faiss::FaissException);
    faiss::IDSelectorAll all;
    EXPECT_THROW(IdSelection(&all, -1), faiss::FaissException);
    EXPECT_THROW(IdSelection(&all, int64_t(1) << 32), faiss::FaissException);
}
