// The bounded TF32 search behind DistancePrecision::TF32Bounded: exact k-NN
// whose distance products run on the tensor cores.
//
// Per row block of queries:
//   1. TF32 GEMM tiles (gemmDotProductsTf32; for BF16x3Bounded one BF16
//      GEMM over split rows, gemmDotProductsBf16x3, with the tighter
//      bf16x3BoundTerms), and the RowSelector keeps the
//      m = boundedCandidateCount(k, nb) smallest approximate keys per query;
//      when Auto chose the selection and the shape allows, the tiles span
//      whole rows and the sampled-threshold filter
//      (select/SampledThresholdSelect.h) selects them in one read of the
//      tile (a row it flags is simply not certified: step 3 sends it to the
//      FP32 fallback).
//   2. One kernel per block re-scores the m candidates in FP32 (the FP32
//      path's formula: |x|^2 - 2 q.x for L2, -q.x otherwise; any order of
//      summation) and bounds the vectors left out: with e(q, x) the bound of
//      Tf32ErrorBound.h on |approximate key - FP32 key|, each has an
//      approximate key >= the m-th one, hence an FP32 key >= (m-th
//      approximate key) - e(q, x); for L2 also >= what its norm alone
//      allows (Tf32ErrorBound.h, leftOutKeyLowerBound).
//   3. The re-scored keys are sorted. A query is certified when that lower
//      bound exceeds its kk-th re-scored key (or m == nb): no vector left out
//      can then be among its kk nearest, so the kk best re-scored
//      candidates are exactly the kk nearest of the whole corpus by FP32
//      keys, which are the FP32 path's neighbours (the two FP32 evaluations
//      differ only in the order of summation: ties aside). Certified rows
//      are decoded as the FP32 path decodes its keys; the others are
//      searched again by the FP32 path (the caller's fallback) after the
//      last block, and their rows written over. Where the first block
//      certifies less than kBoundedBailOutShare of its queries, the later
//      blocks skip the TF32 pass and go to the fallback directly.
//
// Compared with a threshold made of approximate keys plus their bounds
// (max over the kk best of key_j + e(q, x_j)), the re-scored kk-th key is
// exact, so the gap the certificate needs between ranks kk and m is about
// e instead of 2e, with the same guarantee on the returned result.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/FlatOptions.h"
#include "faiss_ext/gpu/GpuResources.h"
#include "faiss_ext/gpu/impl/flat/Distance.h"
#include "faiss_ext/gpu/impl/flat/FlatTilePlan.h"
#include "faiss_ext/gpu/impl/flat/ResidualCorpus.h"
#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"

namespace faiss_ext {
namespace gpu {

/// Candidates the TF32 pass keeps per query for kk = min(k, nb) results:
/// kk + max(kk, kBoundedMinSlack), at most nb. Why this slack: a query is
/// certified when the keys of ranks kk and m differ by more than about the
/// bound e(q, x_max), and the distance between ranks k and 2k
/// grows with k (for intrinsic dimension d', radii grow as rank^(1/d')), so
/// a slack proportional to k keeps that gap from shrinking as k grows,
/// while the floor of 32 gives small k a gap of several ranks. Estimated
/// by a CPU emulation of the certificate (40 queries each; to be confirmed
/// by bench_flat --precision on the GPU): a slack of k certified every query
/// of the bench's clustered 1M x 128 set (k = 10, 100, 1024, 4096), its
/// 100k x 960 set (k = 100, 1024, 3000) and Fashion-MNIST's 60k (k = 10,
/// 100, 1024), while k / 2 fell to
/// 88% on Fashion-MNIST at k = 100 and k / 4 (i.e. 32) to 87-88% on the
/// clustered sets at k = 100. The cost: re-scoring reads m * d floats per
/// query. Against the TF32 GEMM (about 1.8 us per query on 1M x 128 on an
/// H100, from issue 25's 17.6 ms for 10,000 queries) that is negligible up
/// to k ~ 100 and about a fifth at k = 1024 (m = 2048: 1 MiB per query at
/// ~3 TB/s), so the slack is the knob to tune for large k from the times
/// and fallback counts that bench_flat --precision reports.
///
/// bf16x3Products: the candidates of a pass with BF16x3 products, which
/// run on data far from the origin (Auto's TF32 hands them the queries it
/// cannot certify), where norms of about 50 make the bound of the order of
/// the gap between ranks k and 2k: on the hard 10M x 96 set (H200) 1,237 of
/// 10,000 queries at k = 100 fell back to FP32 with a slack of k. Their
/// slack is kBf16x3SlackFactor * kk up to kk = kBf16x3WideSlackMaxK (re-
/// scoring 4k candidates reads 150 KB a query at d = 96, against a GEMM
/// row of 10M x 96 products), k beyond.
int64_t boundedCandidateCount(int64_t kk, int64_t nb, bool bf16x3Products = false);

/// The floor of the slack above (see boundedCandidateCount).
constexpr int64_t kBoundedMinSlack = 32;

/// BF16x3 passes: slack kBf16x3SlackFactor * kk for kk up to
/// kBf16x3WideSlackMaxK (see boundedCandidateCount).
constexpr int64_t kBf16x3SlackFactor = 3;
constexpr int64_t kBf16x3WideSlackMaxK = 128;

/// When fewer than this share of the first row block's queries are
/// certified (and more blocks follow), the rest of the search goes straight
/// to the FP32 path: on data the bound cannot serve (clusters far apart and
/// far from the origin, which one centre cannot bring close; issue 39) the
/// TF32 pass would only add its cost to the FP32 search of almost every
/// query. The results are the FP32 path's either way.
constexpr double kBoundedBailOutShare = 0.5;

// boundedSearchSupported(d): Tf32ErrorBound.h.

/// The stored corpus as the bounded search reads it (device pointers).
struct BoundedCorpus {
    const float* vectors = nullptr;  ///< nb x d, prepared for the metric
    const float* sqNorms = nullptr;  ///< stored |x|^2 (L2 only, else null)
    int64_t nb = 0;
    int d = 0;
    FlatMetric metric = FlatMetric::L2;
    double maxSqNorm = 0.0;  ///< the largest stored FP32 |x|^2 over the corpus
    /// May be null: the translation c of a centred copy (CentredCorpus.h).
    /// Then vectors, sqNorms and maxSqNorm describe fl(x - c) and the FP32
    /// fallback gets the queries as passed. L2: each block of queries is
    /// centred by c before its TF32 pass (|q - x| = |(q - c) - (x - c)|).
    /// Inner products: the queries are not moved; q.(x - c) = q.x - q.c
    /// ranks the corpus as q.x does (q.c is one number per query), so the
    /// search runs on q.(x - c) and adds q.c to each returned similarity.
    const float* centre = nullptr;
    /// BF16x3Bounded, may be null (TF32 products then): the two-part BF16
    /// split of `vectors` (SplitBf16.h, SplitSide::Corpus; the same rows,
    /// 3 splitDim BF16 each), whose one GEMM over split rows replaces the
    /// TF32 GEMM with a bound 3-16 times tighter (Tf32ErrorBound.h,
    /// bf16x3BoundTerms); each block of queries is split for its side after
    /// any centring.
    const Bf16Bits* split = nullptr;
    int splitDim = 0;
    /// Rows of `vectors` (and of `split`) the GEMMs may read: nb, or nb
    /// rounded up to a multiple of 4 where the memory past nb holds rows
    /// that are never selected (a gathered subset's zero rows). Each GEMM
    /// then computes a width that is a multiple of 4 and the selection
    /// reads only the first nb columns: with an odd width cuBLASLt ran the
    /// bounded search of a gathered 900,001-vector subset at 0.70-0.75x the
    /// speed of a 900,000-vector one (H200, d 128 and 384).
    int64_t gemmRows = 0;
    /// May be null (L2 only, TF32 products, no centre, no split): the
    /// storage's residual copy (ResidualCorpus.h), whose fused products
    /// replace those of `vectors`; `vectors` and `sqNorms` (the stored ones)
    /// are re-scored. Each block of queries is prepared by
    /// prepareResidualQueries and certified by ResidualBound.h. Where the
    /// fused candidates do not apply, every query falls back.
    const ResidualView* residual = nullptr;
};

/// Searches `n` prepared queries by the FP32 path, writing n x k results
/// (device pointers).
using Fp32SearchFn =
    std::function<void(const float* queries, int64_t n, float* distances, int64_t* labels)>;

/// Exact k-NN of nq prepared queries (device pointers; nq, k >= 1, nb >= 1)
/// through TF32 candidates, certified re-scoring and the FP32 fallback.
/// candidateSelection selects the m candidates (resolved for m); with
/// sampledCandidates (the caller's algorithm was Auto) and where
/// select::sampledThresholdKeysApply(nb, m), the TF32 distances are instead
/// computed in full-row tiles and each row's m candidates selected by the
/// sampled-threshold filter in one read of the tile; a row the filter
/// flags is not certified (it takes the FP32 fallback). Adds the queries of
/// each route to *stats (may be null). Synchronises `stream`.
void boundedFlatSearch(GpuResources* res, int device, cudaStream_t stream,
                       const BoundedCorpus& corpus, const float* queries, int64_t nq, int64_t k,
                       const TileSelection& candidateSelection, bool sampledCandidates,
                       float* distances, int64_t* labels, const Fp32SearchFn& fp32Search,
                       BoundedSearchStats* stats);

}  // namespace gpu
}  // namespace faiss_ext
