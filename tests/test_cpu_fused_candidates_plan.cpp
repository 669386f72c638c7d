// The host side of the fused candidates (flat/FusedCandidates.h), without a
// GPU: which operands it takes, that its scratch grows with the rows, that
// bad calls are refused before anything touches the device, and that the
// vectors of the shared sample it gathers are distinct rows inside the
// corpus, one run of 8 in each stratum (select/SampledThresholdSelect.h),
// a sample that grows with the corpus up to its settable largest size; and
// that the warpgroup kernel is only planned where a device can run it.
#include <cuda_runtime_api.h>
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "faiss_ext/gpu/impl/flat/FusedCandidates.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidatesWgmma.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"

using faiss_ext::gpu::FusedOperands;
using namespace faiss_ext::gpu;

namespace {

/// Operands at 16-byte aligned fake addresses (never dereferenced here).
FusedOperands operands(bool bf16x3, int d, uintptr_t offset = 0) {
    FusedOperands o;
    o.bf16x3 = bf16x3;
    o.d = d;
    o.queries = reinterpret_cast<const void*>(uintptr_t(1) << 20 | offset);
    o.vectors = reinterpret_cast<const void*>(uintptr_t(1) << 30);
    return o;
}

}  // namespace

TEST(CpuFusedCandidates, TakesWholeChunkRowsAlignedAndLongEnough) {
    const int64_t nb = 1000000, m = 42;
    EXPECT_TRUE(fusedCandidatesApply(nb, m, operands(false, 128)));
    EXPECT_TRUE(fusedCandidatesApply(nb, m, operands(false, 4)));
    EXPECT_FALSE(fusedCandidatesApply(nb, m, operands(false, 130)));  // not whole 16-byte chunks
    EXPECT_FALSE(fusedCandidatesApply(nb, m, operands(false, 0)));
    EXPECT_TRUE(fusedCandidatesApply(nb, m, operands(true, 104)));  // BF16x3: the padded width
    EXPECT_FALSE(fusedCandidatesApply(nb, m, operands(true, 100)));
    EXPECT_FALSE(fusedCandidatesApply(nb, m, operands(false, 128, 4)));  // misaligned queries
    FusedOperands none = operands(false, 128);
    none.vectors = nullptr;
    EXPECT_FALSE(fusedCandidatesApply(nb, m, none));
    // Rows the sampled threshold cannot serve: too short, or m too large for them.
    EXPECT_FALSE(fusedCandidatesApply(10000, m, operands(false, 128)));
    EXPECT_FALSE(fusedCandidatesApply(20000, 4096, operands(false, 128)));
    // The testing hook turns it off.
    setFusedCandidatesEnabled(false);
    EXPECT_FALSE(fusedCandidatesApply(nb, m, operands(false, 128)));
    setFusedCandidatesEnabled(true);
    EXPECT_TRUE(fusedCandidatesEnabled());
}

TEST(CpuFusedCandidates, ScratchGrowsWithRowsAndHoldsTheSample) {
    for (const FusedOperands& ops : {operands(false, 96), operands(true, 96)}) {
        for (int64_t nb : {int64_t(20000), int64_t(1000000), int64_t(10000000)}) {
            const int64_t m = 42;
            const size_t one = fusedCandidatesScratchBytes(1, nb, m, ops);
            const size_t two = fusedCandidatesScratchBytes(2, nb, m, ops);
            const size_t many = fusedCandidatesScratchBytes(1000, nb, m, ops);
            const select::SampledThresholdPlan plan = select::sharedSampleThresholdPlan(nb, m);
            const int64_t words = ops.bf16x3 ? 3 * ops.d / 2 : ops.d;
            // The sample's rows, and per row its products and candidate buffer.
            EXPECT_GE(one, size_t(4 * plan.samples * words + 8 * plan.capacity));
            EXPECT_GT(two, one);
            EXPECT_GE(many - one, size_t(999) * size_t(4 * plan.samples + 8 * plan.capacity))
                    << "nb " << nb;
        }
    }
}

TEST(CpuFusedCandidates, BadCallsAreRefusedBeforeTheDevice) {
    // Every one of these throws from its checks; none reaches a kernel (the
    // pointers are fake, the machine may have no GPU).
    uint64_t keys[4];
    uint8_t flags[4];
    char scratch[16];
    const FusedOperands good = operands(false, 128);
    auto call = [&](const FusedOperands& ops, int64_t rows, int64_t nb, int64_t m, size_t bytes) {
        fusedCandidates(nullptr, ops, rows, nb, -2.f, nullptr, m, keys, flags, scratch, bytes,
                        nullptr);
    };
    EXPECT_THROW(call(operands(false, 130), 10, 1000000, 42, 16), faiss::FaissException);
    EXPECT_THROW(call(good, 10, 1000, 42, 16), faiss::FaissException);
    EXPECT_THROW(call(good, 0, 1000000, 42, 16), faiss::FaissException);
    EXPECT_THROW(call(good, fusedCandidatesMaxRows() + 1, 1000000, 42, 16),
                 faiss::FaissException);
    try {
        call(good, 10, 1000000, 42, 16);  // scratch far too small
        ADD_FAILURE() << "a call with 16 bytes of scratch was not refused";
    } catch (const faiss::FaissException& e) {
        EXPECT_NE(std::string(e.what()).find("scratch"), std::string::npos) << e.what();
    }
}

TEST(CpuFusedCandidates, SharedSampleIsDistinctRowsOneRunPerStratum) {
    for (int64_t n : {int64_t(16384), int64_t(20011), int64_t(1000003), int64_t(100000000),
                      int64_t(4294967295)}) {
        for (int64_t k : {int64_t(1), int64_t(42), int64_t(200), int64_t(1024)}) {
            if (!select::sampledThresholdKeysApply(n, k)) continue;
            const int64_t samples = select::sharedSampleThresholdPlan(n, k).samples;
            const int64_t runs = samples / select::kSampledThresholdRunLength;
            const int64_t stratum = n / runs;
            int64_t previous = -1;
            for (int64_t s = 0; s < samples; ++s) {
                const int64_t col = select::sampledThresholdSharedColumn(s, n, samples);
                ASSERT_GT(col, previous) << "n " << n << " k " << k << " sample " << s;
                ASSERT_LT(col, n) << "n " << n << " k " << k << " sample " << s;
                const int64_t run = s / select::kSampledThresholdRunLength;
                // A run starts inside its stratum (aligned down by at most 7).
                ASSERT_GE(col - s % select::kSampledThresholdRunLength, run * stratum - 7)
                        << "n " << n << " sample " << s;
                ASSERT_LT(col, (run + 1) * stratum + select::kSampledThresholdRunLength)
                        << "n " << n << " sample " << s;
                previous = col;
            }
        }
    }
}

namespace {
/// Forces the shared sample's size for a scope (process-wide hook).
struct ForcedSharedSample {
    explicit ForcedSharedSample(int64_t s) { select::setSharedSampleSize(s); }
    ~ForcedSharedSample() { select::setSharedSampleSize(0); }
};

/// sharedSampleThresholdPlan's sample size, written out: 16,384 halved
/// while n < 16 samples (down to 1,024).
int64_t expectedSharedSamples(int64_t n) {
    int64_t s = 16384;
    while (s > 1024 && s * 16 > n) s /= 2;
    return s;
}
}  // namespace

TEST(CpuFusedCandidates, SharedSampleGrowsWithTheCorpusAndKeepsFewerProducts) {
    ASSERT_EQ(select::sharedSampleSizeForced(), 0);
    for (int64_t n : {int64_t(16384), int64_t(100000), int64_t(262143), int64_t(262144),
                      int64_t(1000000), int64_t(10000000), int64_t(100000000)}) {
        for (int64_t k : {int64_t(1), int64_t(42), int64_t(200), int64_t(1024)}) {
            if (!select::sampledThresholdKeysApply(n, k)) continue;
            const std::string what = "n " + std::to_string(n) + " k " + std::to_string(k);
            const select::SampledThresholdPlan row = select::sampledThresholdPlan(n, k);
            select::SampledThresholdPlan at4096;
            {
                ForcedSharedSample force(4096);
                at4096 = select::sharedSampleThresholdPlan(n, k);
            }
            // At 4,096 the shared plan is the per-row one (main's fused path).
            EXPECT_EQ(at4096.samples, row.samples) << what;
            EXPECT_EQ(at4096.rank, row.rank) << what;
            EXPECT_EQ(at4096.capacity, row.capacity) << what;
            // By default: 16,384 wherever n holds 16 of them.
            const select::SampledThresholdPlan p = select::sharedSampleThresholdPlan(n, k);
            EXPECT_EQ(p.samples, expectedSharedSamples(n)) << what;
            EXPECT_GE(p.samples, row.samples) << what;
            if (n >= 262144) EXPECT_EQ(p.samples, 16384) << what;
            EXPECT_LT(p.rank, p.samples) << what;
            EXPECT_GE(p.capacity, k) << what;
            // The buffer holds about twice the products the threshold passes.
            const double passed = double(p.rank) * double(n) / double(p.samples);
            EXPECT_GE(double(p.capacity), passed) << what;
            const double sized = double(2 * p.rank + 12) * double(n) / double(p.samples);
            EXPECT_LT(double(p.capacity), 2 * std::max({1024.0, sized, double(k)})) << what;
            if (p.samples == 4 * row.samples && k <= 200) {
                // The rank grows by less than the sample: fewer products pass,
                // about 3.4x fewer from 10M on (the rank barely moves there).
                const double passedRow = double(row.rank) * double(n) / double(row.samples);
                EXPECT_LT(passed, (n >= 10000000 ? 0.35 : 0.6) * passedRow) << what;
                EXPECT_LE(select::sharedSampleThresholdScratchBytes(1000, n, k),
                          select::sampledThresholdScratchBytes(1000, n, k))
                        << what;
            }
        }
    }
}

TEST(CpuFusedCandidates, SharedSampleSizeOutsideItsRangeIsRefused) {
    for (int64_t bad : {int64_t(-1), int64_t(512), int64_t(1000), int64_t(3072),
                        int64_t(32768)}) {
        EXPECT_THROW(select::setSharedSampleSize(bad), faiss::FaissException) << bad;
        EXPECT_EQ(select::sharedSampleSizeForced(), 0) << bad;
    }
    for (int64_t good : {int64_t(1024), int64_t(2048), int64_t(4096), int64_t(8192),
                         int64_t(16384)}) {
        ForcedSharedSample force(good);
        EXPECT_EQ(select::sharedSampleSizeForced(), good);
        EXPECT_EQ(select::sharedSampleThresholdPlan(10000000, 42).samples, good);
        EXPECT_EQ(select::sharedSampleThresholdPlan(300000, 42).samples, good);
    }
    EXPECT_EQ(select::sharedSampleSizeForced(), 0);
}

TEST(CpuFusedCandidates, WarpgroupKernelOnlyOnComputeCapability90) {
    // Out-of-range devices never take the warpgroup kernel (and nothing
    // throws or aborts: the query is an attribute read).
    EXPECT_FALSE(fusedWgmmaAvailable(-1));
    EXPECT_FALSE(fusedWgmmaAvailable(1 << 20));
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        cudaGetLastError();  // (the failed query's error is not left behind)
        EXPECT_FALSE(fusedWgmmaAvailable(0));  // no GPU: the mma.sync path would be planned
        return;
    }
    int major = 0, minor = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), cudaSuccess);
    if (major != 9 || minor != 0) EXPECT_FALSE(fusedWgmmaAvailable(0));
}
