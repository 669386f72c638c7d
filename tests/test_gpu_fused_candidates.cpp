// The fused products and threshold filter (flat/FusedCandidates.h), TF32
// and BF16x3, by both kernels (Hopper's warpgroup products where the device
// has them, and mma.sync): called directly, its kept keys are the m smallest products up
// to the precision's bound (which fails for any slip in the tensor-core
// fragments, the tile edges or the zero fill past d); through the index,
// bounded searches that take it equal the FP32 path's, with the fused path
// on and off, for the four metrics, dimensions not a multiple of the
// 32-word stage, query and vector counts off the 128 x 128 tiles, and every
// size of the shared sample the thresholds come from.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "BoundedTestCompare.h"
#include "TestUtils.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidates.h"
#include "faiss_ext/gpu/impl/flat/FusedCandidatesWgmma.h"
#include "faiss_ext/gpu/impl/flat/SplitBf16.h"
#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"
#include "faiss_ext/gpu/impl/select/SampledThresholdSelect.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

using faiss_ext::FlatMetric;
using faiss_ext::gpu::BoundedSearchStats;
using faiss_ext::gpu::DistancePrecision;
using faiss_ext::gpu::StandardGpuResources;
using namespace faiss_ext::test;

namespace {

/// Turns the fused path on or off for a scope (process-wide hook).
struct FusedSwitch {
    explicit FusedSwitch(bool on) { faiss_ext::gpu::setFusedCandidatesEnabled(on); }
    ~FusedSwitch() { faiss_ext::gpu::setFusedCandidatesEnabled(true); }
};

/// Picks the fused kernel for a scope: the warpgroup one where available
/// (true) or mma.sync (false; process-wide hook).
struct KernelSwitch {
    explicit KernelSwitch(bool wgmma) { faiss_ext::gpu::setFusedWgmmaEnabled(wgmma); }
    ~KernelSwitch() { faiss_ext::gpu::setFusedWgmmaEnabled(true); }
};

double rowNorm(const std::vector<float>& v, int64_t row, int d) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += double(v[size_t(row * d + c)]) * v[size_t(row * d + c)];
    return std::sqrt(s);
}

}  // namespace

TEST(GpuFusedCandidates, KeepsTheSmallestProductsWithinTheBound) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    cublasHandle_t blas = res.getResources()->getBlasHandle(0);
    cudaStream_t stream = res.getResources()->getDefaultStream(0);
    const int64_t nb = sized<int64_t>(40003, 20011), m = 42;
    // (d 400: rows too wide for the resident kernel; 2,000 rows: more work
    // items than blocks in flight, so that the resident kernel's blocks run
    // several items, their stages' barriers carried from one to the next)
    const std::pair<int64_t, int> shapes[] = {{300, 36}, {300, 128}, {300, 400}, {2000, 36}};
    PartUnits units;  // (a shape, precision and metric a unit: parts for racecheck)
    for (const auto& shape : shapes) {
        const int64_t rows = shape.first;
        const int d = shape.second;
        for (bool bf16x3 : {false, true}) {
            for (bool l2 : {true, false}) {
                if (!units.next()) continue;
                const std::string what = std::to_string(rows) + " rows d=" + std::to_string(d) +
                                         (l2 ? " L2" : " IP") +
                                         (bf16x3 ? " BF16x3" : " TF32");
                const auto q = clusteredVectors(rows, d, 20, kSeed + uint64_t(d));
                const auto x = clusteredVectors(nb, d, 20, kSeed + 1 + uint64_t(d));
                std::vector<float> sq(static_cast<size_t>(nb));
                for (int64_t j = 0; j < nb; ++j)
                    sq[size_t(j)] = float(std::pow(rowNorm(x, j, d), 2));
                DeviceCopy<float> dq(q), dx(x), dsq(sq);
                // BF16x3: the split rows of queries and vectors, as the index makes them.
                const int dPad = faiss_ext::gpu::bf16PaddedDim(d);
                DeviceCopy<uint16_t> qSplit{
                    std::vector<uint16_t>(static_cast<size_t>(rows * 3 * dPad))};
                DeviceCopy<uint16_t> xSplit{
                    std::vector<uint16_t>(static_cast<size_t>(nb * 3 * dPad))};
                faiss_ext::gpu::FusedOperands ops;
                ops.bf16x3 = bf16x3;
                if (bf16x3) {
                    faiss_ext::gpu::splitRowsBf16(dq.p, rows, d, faiss_ext::gpu::SplitSide::Queries,
                                                  qSplit.p, stream);
                    faiss_ext::gpu::splitRowsBf16(dx.p, nb, d, faiss_ext::gpu::SplitSide::Corpus,
                                                  xSplit.p, stream);
                    ops.queries = qSplit.p;
                    ops.vectors = xSplit.p;
                    ops.d = dPad;
                } else {
                    ops.queries = dq.p;
                    ops.vectors = dx.p;
                    ops.d = d;
                }
                const size_t bytes = faiss_ext::gpu::fusedCandidatesScratchBytes(rows, nb, m, ops);
                DeviceCopy<char> scratch{std::vector<char>(bytes)};
                ASSERT_TRUE(faiss_ext::gpu::fusedCandidatesApply(nb, m, ops)) << what;
                const float alpha = l2 ? -2.f : -1.f;
                const faiss_ext::gpu::Tf32BoundTerms t =
                    bf16x3 ? faiss_ext::gpu::bf16x3BoundTerms(dPad, l2)
                           : faiss_ext::gpu::tf32BoundTerms(d, l2);
                // Exact keys (double) and each key's error allowance, per row.
                std::vector<std::vector<double>> exact(static_cast<size_t>(rows)),
                    tol(static_cast<size_t>(rows));
                auto exactRow = [&](int64_t r) {
                    if (!exact[size_t(r)].empty()) return;
                    const double qn = rowNorm(q, r, d);
                    exact[size_t(r)].resize(static_cast<size_t>(nb));
                    tol[size_t(r)].resize(static_cast<size_t>(nb));
                    for (int64_t j = 0; j < nb; ++j) {
                        double dot = 0;
                        for (int c = 0; c < d; ++c)
                            dot += double(q[size_t(r * d + c)]) * x[size_t(j * d + c)];
                        const double xn = std::sqrt(double(sq[size_t(j)]));
                        exact[size_t(r)][size_t(j)] =
                            alpha * dot + (l2 ? double(sq[size_t(j)]) : 0.0);
                        tol[size_t(r)][size_t(j)] =
                            t.absAlpha * t.dotCoef * qn * xn +
                            (l2 ? 4 * std::ldexp(1.0, -24) * (xn * xn + 2 * qn * xn) : 0) + 1e-30;
                    }
                };
                // Both kernels where the device has the warpgroup one (Hopper), else mma.sync.
                for (bool wgmma : {true, false}) {
                    const std::string which = what + (wgmma ? " wgmma" : " mma.sync");
                    KernelSwitch kernel(wgmma);
                    DeviceCopy<uint64_t> keys{std::vector<uint64_t>(static_cast<size_t>(rows * m))};
                    DeviceCopy<uint8_t> flags{std::vector<uint8_t>(static_cast<size_t>(rows), 7)};
                    const auto before = faiss_ext::gpu::fusedCandidateRows();
                    faiss_ext::gpu::fusedCandidates(blas, ops, rows, nb, alpha, l2 ? dsq.p : nullptr,
                                                    m, keys.p, flags.p, scratch.p, bytes, stream);
                    FAISS_EXT_CUDA_CHECK(cudaStreamSynchronize(stream));
                    const auto after = faiss_ext::gpu::fusedCandidateRows();
                    EXPECT_EQ(after.wgmma - before.wgmma,
                              wgmma && faiss_ext::gpu::fusedWgmmaAvailable(0) ? rows : 0)
                        << which;
                    std::vector<uint64_t> k(static_cast<size_t>(rows * m));
                    std::vector<uint8_t> f(static_cast<size_t>(rows));
                    FAISS_EXT_CUDA_CHECK(
                        cudaMemcpy(k.data(), keys.p, 8 * k.size(), cudaMemcpyDeviceToHost));
                    FAISS_EXT_CUDA_CHECK(
                        cudaMemcpy(f.data(), flags.p, f.size(), cudaMemcpyDeviceToHost));
                    int64_t flagged = 0;
                    for (int64_t r = 0; r < rows; ++r) {
                        ASSERT_TRUE(f[size_t(r)] == 0 || f[size_t(r)] == 1) << which << " row " << r;
                        if (f[size_t(r)]) {
                            ++flagged;
                            continue;
                        }
                        exactRow(r);
                        const std::vector<double>& ex = exact[size_t(r)];
                        const std::vector<double>& tl = tol[size_t(r)];
                        std::vector<char> kept(static_cast<size_t>(nb), 0);
                        double worstKept = -INFINITY;
                        for (int64_t i = 0; i < m; ++i) {
                            const uint64_t key = k[size_t(r * m + i)];
                            if (i > 0)
                                ASSERT_LT(k[size_t(r * m + i - 1)], key) << which << " row " << r;
                            const int64_t j = int64_t(uint32_t(key));
                            ASSERT_LT(j, nb) << which << " row " << r;
                            ASSERT_FALSE(kept[size_t(j)]) << which << " row " << r << " id " << j;
                            kept[size_t(j)] = 1;
                            worstKept = std::max(worstKept, ex[size_t(j)] - tl[size_t(j)]);
                        }
                        // Nothing left out is below a kept key by more than the bound.
                        for (int64_t j = 0; j < nb; ++j) {
                            if (kept[size_t(j)]) continue;
                            ASSERT_GE(ex[size_t(j)] + tl[size_t(j)], worstKept)
                                << which << " row " << r << " left out " << j;
                        }
                    }
                    // The threshold settles nearly every row (a flag is a fallback).
                    EXPECT_LE(flagged, rows / 20) << which;
                }
            }
        }
    }
}

TEST(GpuFusedCandidates, BoundedSearchEqualsFp32WithAndWithoutFusion) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = sized<int64_t>(50003, 20011);
    const int64_t nq = sized<int64_t>(300, 130);
    const FlatMetric metrics[] = {FlatMetric::L2, FlatMetric::InnerProduct, FlatMetric::Cosine,
                                  FlatMetric::Pearson};
    for (int d : {20, 100}) {
        const auto xb = clusteredVectors(nb, d, 40, kSeed + uint64_t(d));
        const auto xq = clusteredVectors(nq, d, 40, kSeed + 5 + uint64_t(d));
        for (FlatMetric metric : metrics) {
            for (int64_t k : {1, 10, 100}) {
                for (DistancePrecision precision :
                     {DistancePrecision::TF32Bounded, DistancePrecision::BF16x3Bounded}) {
                    const bool bf16x3 = precision == DistancePrecision::BF16x3Bounded;
                    for (bool fused : {true, false}) {
                        FusedSwitch on(fused);
                        const std::string what = describe(metric, d, k, "clustered") +
                                                 (bf16x3 ? " BF16x3" : " TF32") +
                                                 (fused ? " fused" : " unfused");
                        const auto before = faiss_ext::gpu::fusedCandidateRows();
                        const BoundedSearchStats s =
                            compareOn(res, metric, d, xb, xq, k, what, {}, precision);
                        const auto after = faiss_ext::gpu::fusedCandidateRows();
                        const int64_t fusedRows =
                            bf16x3 ? after.bf16x3 - before.bf16x3 : after.tf32 - before.tf32;
                        EXPECT_EQ(fusedRows > 0, fused) << what;
                        // Clustered data near the origin: the bounded route answers.
                        EXPECT_GE(s.certifiedQueries, nq * 9 / 10) << what;
                    }
                }
            }
        }
    }
}

// The shared sample is 16,384 vectors from 262,144 on: at every size the
// plan can take (forced here, on a corpus of 300,007), a bounded search takes
// the fused path and equals the FP32 path's.
TEST(GpuFusedCandidates, EverySharedSampleSizeGivesTheFp32Results) {
    FAISS_EXT_REQUIRE_GPU();
    StandardGpuResources res;
    const int64_t nb = 300007, nq = sized<int64_t>(300, 130);
    const int d = 32;
    const auto xb = clusteredVectors(nb, d, 40, kSeed + 11);
    const auto xq = clusteredVectors(nq, d, 40, kSeed + 12);
    struct Cap {
        ~Cap() { faiss_ext::gpu::select::setSharedSampleSize(0); }
    } restore;
    for (int64_t samples : {int64_t(1024), int64_t(4096), int64_t(8192), int64_t(16384)}) {
        faiss_ext::gpu::select::setSharedSampleSize(samples);
        for (FlatMetric metric : {FlatMetric::L2, FlatMetric::InnerProduct}) {
            for (int64_t k : {10, 100}) {
                const std::string what =
                    describe(metric, d, k, "clustered") + " samples " + std::to_string(samples);
                const auto before = faiss_ext::gpu::fusedCandidateRows();
                const BoundedSearchStats s = compareOn(res, metric, d, xb, xq, k, what);
                const auto after = faiss_ext::gpu::fusedCandidateRows();
                EXPECT_GT(after.tf32 - before.tf32, 0) << what;
                EXPECT_GE(s.certifiedQueries, nq * 9 / 10) << what;
            }
        }
    }
}
