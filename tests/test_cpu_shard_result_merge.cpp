// mergeShardResults (faiss_ext/ShardResultMerge.h) against a brute-force
// oracle: every present entry of every shard, stable-sorted by (distance,
// shard, position), the first k kept. Data with many ties, -1 padding whose
// distances are not to be trusted, for L2 and keepMax.
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "BadInputTestUtils.h"
#include "TestUtils.h"
#include "faiss_ext/ShardResultMerge.h"

namespace faiss_ext {
namespace {

using test::kSeed;

constexpr float kInf = std::numeric_limits<float>::infinity();

/// nshards results of nq x k, row-major, each row sorted best first.
struct ShardResults {
    int64_t nq = 0;
    int64_t k = 0;
    std::vector<std::vector<float>> D;
    std::vector<std::vector<int64_t>> I;

    std::vector<const float*> dPtrs() const {
        std::vector<const float*> p;
        for (const auto& d : D) p.push_back(d.data());
        return p;
    }
    std::vector<const int64_t*> iPtrs() const {
        std::vector<const int64_t*> p;
        for (const auto& i : I) p.push_back(i.data());
        return p;
    }
};

/// Random shard results: per row a random count of present entries (0..k),
/// distances drawn from `distinct` integer values (ties within and across
/// shards), sorted best first, then -1 labels. The padding's distances are
/// the metric's worst value, or a value that would win (0 / a huge
/// similarity), or NaN: the merge must go by the label. With midGaps, some
/// rows also get a -1 among their present entries.
ShardResults randomShards(int nshards, int64_t nq, int64_t k, bool keepMax, int distinct,
                          uint64_t seed, bool midGaps = false) {
    std::mt19937_64 rng(seed);
    ShardResults r;
    r.nq = nq;
    r.k = k;
    r.D.assign(size_t(nshards), std::vector<float>(size_t(nq * k)));
    r.I.assign(size_t(nshards), std::vector<int64_t>(size_t(nq * k)));
    int64_t nextId = 0;
    for (int s = 0; s < nshards; ++s) {
        for (int64_t q = 0; q < nq; ++q) {
            float* d = r.D[s].data() + q * k;
            int64_t* id = r.I[s].data() + q * k;
            const int64_t present = int64_t(rng() % uint64_t(k + 1));
            for (int64_t j = 0; j < present; ++j) {
                d[j] = float(rng() % uint64_t(distinct)) * 0.5f;
                id[j] = nextId++;
            }
            if (keepMax) {
                std::sort(d, d + present, [](float a, float b) { return a > b; });
            } else {
                std::sort(d, d + present);
            }
            float pad = keepMax ? -kInf : kInf;
            switch (rng() % 4) {
                case 0:
                    pad = keepMax ? 1e30f : 0.f;  // would win if it were trusted
                    break;
                case 1:
                    pad = std::numeric_limits<float>::quiet_NaN();
                    break;
                default:
                    break;
            }
            for (int64_t j = present; j < k; ++j) {
                d[j] = pad;
                id[j] = -1;
            }
            if (midGaps && present > 1 && rng() % 3 == 0) id[rng() % uint64_t(present)] = -1;
        }
    }
    return r;
}

/// The oracle: per query every entry with a label other than -1, stable
/// sorted by distance (best first) after the (shard, position) order in
/// which they are gathered; padded with (+-inf, -1).
void bruteForce(const ShardResults& r, bool keepMax, std::vector<float>& D,
                std::vector<int64_t>& I) {
    const int64_t nq = r.nq, k = r.k;
    D.assign(size_t(nq * k), keepMax ? -kInf : kInf);
    I.assign(size_t(nq * k), -1);
    struct Entry {
        float d;
        int64_t id;
    };
    for (int64_t q = 0; q < nq; ++q) {
        std::vector<Entry> all;
        for (size_t s = 0; s < r.D.size(); ++s) {
            for (int64_t j = 0; j < k; ++j) {
                const int64_t id = r.I[s][size_t(q * k + j)];
                if (id != -1) all.push_back({r.D[s][size_t(q * k + j)], id});
            }
        }
        std::stable_sort(all.begin(), all.end(), [keepMax](const Entry& a, const Entry& b) {
            return keepMax ? a.d > b.d : a.d < b.d;
        });
        for (int64_t j = 0; j < std::min<int64_t>(k, int64_t(all.size())); ++j) {
            D[size_t(q * k + j)] = all[size_t(j)].d;
            I[size_t(q * k + j)] = all[size_t(j)].id;
        }
    }
}

/// The first differing entry of (D, I) against the oracle, "" when equal
/// (distances bit for bit); the merge on at most maxThreads threads.
std::string firstDifference(const ShardResults& r, bool keepMax, int maxThreads = 0) {
    std::vector<float> refD, D(size_t(r.nq * r.k), 123.f);
    std::vector<int64_t> refI, I(size_t(r.nq * r.k), 123);
    bruteForce(r, keepMax, refD, refI);
    const auto dp = r.dPtrs();
    const auto ip = r.iPtrs();
    mergeShardResults(r.nq, r.k, int(r.D.size()), dp.data(), ip.data(), keepMax, D.data(),
                      I.data(), maxThreads);
    for (size_t e = 0; e < D.size(); ++e) {
        if (I[e] != refI[e] || std::memcmp(&D[e], &refD[e], sizeof(float)) != 0) {
            return "query " + std::to_string(int64_t(e) / r.k) + " rank " +
                   std::to_string(int64_t(e) % r.k) + ": got (" + std::to_string(D[e]) + ", " +
                   std::to_string(I[e]) + "), expected (" + std::to_string(refD[e]) + ", " +
                   std::to_string(refI[e]) + ")";
        }
    }
    return "";
}

class ShardResultMergeGrid : public ::testing::TestWithParam<std::tuple<bool, int, int64_t>> {};

TEST_P(ShardResultMergeGrid, EqualsStableSortOracle) {
    const auto [keepMax, nshards, k] = GetParam();
    // 3001 queries: groups of 8 interleaved and one left over; the parallel
    // path (> 2^15 entries) for the larger grids, the sequential one for the
    // small.
    const int64_t nq = 3001;
    for (int distinct : {3, 1000}) {
        const uint64_t seed =
            kSeed + uint64_t(nshards) * 131 + uint64_t(k) * 7 + uint64_t(distinct);
        const ShardResults r = randomShards(nshards, nq, k, keepMax, distinct, seed);
        for (int threads : {0, 1, 2}) {  // the same entries whatever the split
            EXPECT_EQ(firstDifference(r, keepMax, threads), "")
                << "keepMax=" << keepMax << " nshards=" << nshards << " k=" << k
                << " distinct=" << distinct << " seed=" << seed << " threads=" << threads;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(ShardResultMerge, ShardResultMergeGrid,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(1, 3, 8),
                                            ::testing::Values(int64_t(1), int64_t(10))),
                         [](const auto& info) {
                             return std::string(std::get<0>(info.param) ? "IP" : "L2") + "_shards" +
                                    std::to_string(std::get<1>(info.param)) + "_k" +
                                    std::to_string(std::get<2>(info.param));
                         });

TEST(ShardResultMerge, AbsentLabelsInsideRowsAreSkipped) {
    for (bool keepMax : {false, true}) {
        const ShardResults r = randomShards(4, 500, 16, keepMax, 5, kSeed, /*midGaps=*/true);
        EXPECT_EQ(firstDifference(r, keepMax), "") << "keepMax=" << keepMax << " seed=" << kSeed;
    }
}

TEST(ShardResultMerge, LargeKAndManyShards) {
    const ShardResults r = randomShards(37, 50, 300, false, 50, kSeed + 1);
    EXPECT_EQ(firstDifference(r, false), "") << "seed=" << kSeed + 1;
}

TEST(ShardResultMerge, TiesGoToTheLowerShardThenThePosition) {
    // every distance equal: shard 0's row, then shard 1's, then shard 2's
    const int64_t k = 4;
    std::vector<float> d0(k, 1.f), d1(k, 1.f), d2(k, 1.f);
    std::vector<int64_t> i0 = {10, 11, -1, -1}, i1 = {20, 21, 22, 23}, i2 = {30, 31, 32, 33};
    const float* dp[] = {d0.data(), d1.data(), d2.data()};
    const int64_t* ip[] = {i0.data(), i1.data(), i2.data()};
    std::vector<float> D(k);
    std::vector<int64_t> I(k);
    for (bool keepMax : {false, true}) {
        mergeShardResults(1, k, 3, dp, ip, keepMax, D.data(), I.data());
        EXPECT_EQ(I, (std::vector<int64_t>{10, 11, 20, 21})) << "keepMax=" << keepMax;
        EXPECT_EQ(D, std::vector<float>(k, 1.f));
    }
}

TEST(ShardResultMerge, MissingEntriesArePaddedWithInfinity) {
    const int64_t k = 5;
    std::vector<float> dL2 = {1.f, 3.f, 0.f, 0.f, 0.f}, dIp = {3.f, 1.f, 9.f, 9.f, 9.f};
    std::vector<float> eL2 = {2.f, kInf, kInf, kInf, kInf}, eIp = {2.f, -kInf, 0, 0, 0};
    std::vector<int64_t> i0 = {7, 8, -1, -1, -1}, i1 = {9, -1, -1, -1, -1};
    const int64_t* ip[] = {i0.data(), i1.data()};
    std::vector<float> D(k);
    std::vector<int64_t> I(k);
    const float* l2[] = {dL2.data(), eL2.data()};
    mergeShardResults(1, k, 2, l2, ip, false, D.data(), I.data());
    EXPECT_EQ(I, (std::vector<int64_t>{7, 9, 8, -1, -1}));
    EXPECT_EQ(D, (std::vector<float>{1.f, 2.f, 3.f, kInf, kInf}));
    const float* sim[] = {dIp.data(), eIp.data()};
    mergeShardResults(1, k, 2, sim, ip, true, D.data(), I.data());
    EXPECT_EQ(I, (std::vector<int64_t>{7, 9, 8, -1, -1}));
    EXPECT_EQ(D, (std::vector<float>{3.f, 2.f, 1.f, -kInf, -kInf}));
}

TEST(ShardResultMerge, SignedZerosTie) {
    // -0 == +0: the lower shard first, whichever sign it has
    for (bool keepMax : {false, true}) {
        const float next = keepMax ? -1.f : 1.f;
        for (bool negativeFirst : {false, true}) {
            std::vector<float> d0 = {negativeFirst ? -0.f : 0.f, next};
            std::vector<float> d1 = {negativeFirst ? 0.f : -0.f, next};
            std::vector<int64_t> i0 = {1, 2}, i1 = {3, 4};
            const float* dp[] = {d0.data(), d1.data()};
            const int64_t* ip[] = {i0.data(), i1.data()};
            std::vector<float> D(2);
            std::vector<int64_t> I(2);
            mergeShardResults(1, 2, 2, dp, ip, keepMax, D.data(), I.data());
            EXPECT_EQ(I, (std::vector<int64_t>{1, 3}))
                << "keepMax=" << keepMax << " negativeFirst=" << negativeFirst;
            EXPECT_EQ(std::signbit(D[0]), negativeFirst) << "distances are copied bit for bit";
        }
    }
}

TEST(ShardResultMerge, NaNRanksAfterEveryNumber) {
    // NaNs of either sign (x86 computes -NaN)
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> d0 = {1.f, -nan, nan}, d1 = {2.f, kInf, nan};
    std::vector<int64_t> i0 = {1, 2, 3}, i1 = {4, 5, 6};
    const float* dp[] = {d0.data(), d1.data()};
    const int64_t* ip[] = {i0.data(), i1.data()};
    std::vector<float> D(3);
    std::vector<int64_t> I(3);
    mergeShardResults(1, 3, 2, dp, ip, false, D.data(), I.data());
    EXPECT_EQ(I, (std::vector<int64_t>{1, 4, 5}));
    std::vector<float> s0 = {1.f, -nan, nan}, s1 = {-kInf, nan, -nan};
    const float* sp[] = {s0.data(), s1.data()};
    mergeShardResults(1, 3, 2, sp, ip, true, D.data(), I.data());
    EXPECT_EQ(I, (std::vector<int64_t>{1, 4, 2}));
    EXPECT_TRUE(std::isnan(D[2]));
}

TEST(ShardResultMerge, NoQueriesReadAndWriteNothing) {
    const float* dp[] = {nullptr};
    const int64_t* ip[] = {nullptr};
    EXPECT_NO_THROW(mergeShardResults(0, 3, 1, dp, ip, false, nullptr, nullptr));
}

TEST(ShardResultMerge, BadArgumentsThrowWithTheirValues) {
    const int64_t k = 2;
    std::vector<float> d(k, 1.f), outD(k, 5.f);
    std::vector<int64_t> i = {1, 2}, outI(k, 5);
    const float* dp[] = {d.data()};
    const int64_t* ip[] = {i.data()};
    const float* dNull[] = {nullptr};
    const int64_t* iNull[] = {nullptr};
    float* oD = outD.data();
    int64_t* oI = outI.data();
    const std::pair<const char*, std::function<void()>> cases[] = {
        {"nq = -1", [&] { mergeShardResults(-1, k, 1, dp, ip, false, oD, oI); }},
        {"k = 0", [&] { mergeShardResults(1, 0, 1, dp, ip, false, oD, oI); }},
        {"k = -3", [&] { mergeShardResults(1, -3, 1, dp, ip, false, oD, oI); }},
        {"nshards = 0", [&] { mergeShardResults(1, k, 0, dp, ip, false, oD, oI); }},
        {"overflow", [&] { mergeShardResults(int64_t(1) << 62, 8, 1, dp, ip, false, oD, oI); }},
        {"null array", [&] { mergeShardResults(1, k, 1, nullptr, ip, false, oD, oI); }},
        {"null array", [&] { mergeShardResults(1, k, 1, dp, nullptr, false, oD, oI); }},
        {"shard 0 of 1", [&] { mergeShardResults(1, k, 1, dNull, ip, false, oD, oI); }},
        {"shard 0 of 1", [&] { mergeShardResults(1, k, 1, dp, iNull, false, oD, oI); }},
        {"null output", [&] { mergeShardResults(1, k, 1, dp, ip, false, nullptr, oI); }},
        {"null output", [&] { mergeShardResults(1, k, 1, dp, ip, true, oD, nullptr); }},
        {"maxThreads = -2", [&] { mergeShardResults(1, k, 1, dp, ip, false, oD, oI, -2); }},
    };
    for (const auto& [needle, call] : cases) {
        EXPECT_EQ(test::refusalProblem(call, {needle}), "") << needle;
    }
    // nothing written by a refused call
    EXPECT_EQ(outD, std::vector<float>(k, 5.f));
    EXPECT_EQ(outI, std::vector<int64_t>(k, 5));
}

}  // namespace
}  // namespace faiss_ext
