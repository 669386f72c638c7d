// Options of the exact flat index that its engine (impl/flat/FlatSearch.h) needs
// too: where the vectors live, the precision of the distance products, and
// the selection algorithm (SelectOptions.h).
#pragma once

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/SelectOptions.h"

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// Where GpuIndexQuickSelectFlat keeps its vectors.
enum class VectorStorage : int {
    /// On the device while they fit (GpuResources::getDeviceMemoryLimit and
    /// free memory after the temporary budget), else in pinned host memory.
    Auto = 0,
    Device = 1,  ///< always on the device (adds fail when they do not fit)
    Host = 2,    ///< pinned host memory, streamed through the GPU per search
};

/// "auto", "device", "host".
const char* vectorStorageName(VectorStorage s);

/// How GpuIndexQuickSelectFlat computes the dot products behind its
/// distances. Both exact modes return the FP32 path's neighbours (ties
/// aside); docs/flat.md, "Distance precision", has the bound and when the
/// bounded mode falls back.
enum class DistancePrecision : int {
    /// Chosen per search by chooseDistancePrecision: TF32Bounded for large
    /// batches (vectors on the device or streamed from the host), FP32
    /// otherwise. Under Auto the queries TF32 cannot certify are searched
    /// with BF16x3Bounded before FP32 (on data far from the origin, where
    /// TF32 bails out, the split copy of device-stored vectors is made on
    /// the first such search; host-stored tiles are split as they stream).
    Auto = 0,
    /// cuBLASLt FP32 GEMM (CUBLAS_COMPUTE_32F_PEDANTIC): today's path.
    FP32 = 1,
    /// TF32 tensor-core GEMM, then per query a proven error bound decides
    /// which candidates can still be among the k nearest; those are
    /// re-scored in FP32. A query whose candidate set is not certified is
    /// searched again in FP32 (counted in BoundedSearchStats).
    TF32Bounded = 2,
    /// The same certificate over split-precision tensor-core products: each
    /// FP32 coordinate split into two BF16 parts (hi + lo, round to
    /// nearest) and q.x taken as hi.hi + hi.lo + lo.hi by one BF16 GEMM
    /// over split rows of 3 d terms with FP32 accumulation. Its error bound
    /// is 16 times tighter than TF32's at d = 96 and 3 times at d = 784
    /// (Tf32ErrorBound.h, bf16x3BoundTerms), so data whose norms dwarf the
    /// gaps between neighbours (clusters far from each other and from the
    /// origin) is certified where TF32 falls back. Costs a split copy of the
    /// vectors (6 bytes per coordinate, 1.5 times the vectors) on the
    /// device, made on the first search and refused (the search runs FP32)
    /// where it would take more than half the free memory.
    BF16x3Bounded = 3,
};

/// Whether p certifies tensor-core candidates (TF32Bounded, BF16x3Bounded).
inline bool isBoundedPrecision(DistancePrecision p) {
    return p == DistancePrecision::TF32Bounded || p == DistancePrecision::BF16x3Bounded;
}

/// "auto", "fp32", "tf32-bounded", "bf16x3-bounded".
const char* distancePrecisionName(DistancePrecision p);

/// Parses distancePrecisionName's names; throws on others.
DistancePrecision distancePrecisionFromName(const char* name);

/// Auto's bounded path starts at this many queries: measured on an H100
/// (bench_flat --precision fp32,tf32-bounded, bench/results/flat_few_queries.jsonl)
/// TF32Bounded ran 1.9x FP32 at nq 1,000 and 10,000 over 1M x 128 (k 10, 100;
/// 1.4x at k 1024) and 3.0x / 2.5x over 100k x 960 (k 10 / 100); smaller
/// batches were not measured, and up to kFewQueryMaxQueries the fused FP32
/// few-query path reads the vectors once instead.
constexpr int64_t kAutoBoundedMinQueries = 1000;

/// Auto's bounded path up to this k (measured up to 1024; past it the
/// candidate sets grow with k and were not measured).
constexpr int64_t kAutoBoundedMaxK = 1024;

/// The precision Auto runs for nq queries of dimension d at k over nb
/// vectors of `metric`, stored on the device or not: the single place where
/// the measured crossover goes. TF32Bounded needs a dimension its bound
/// covers, wherever the vectors are stored (host-stored ones are streamed in
/// tiles, each searched by the bounded path); its results equal FP32's either
/// way (a query it cannot certify is searched again in FP32).
DistancePrecision chooseDistancePrecision(int64_t nq, int64_t nb, int64_t k, int d,
                                          FlatMetric metric, bool vectorsOnDevice);

/// Queries answered by each route of the bounded precisions.
struct BoundedSearchStats {
    /// Queries whose candidate set the bound certified: answered from the
    /// TF32 candidates re-scored in FP32.
    int64_t certifiedQueries = 0;
    /// Queries searched again by the FP32 path: the bound could not certify
    /// their candidates (data far from the origin, near ties at the k-th
    /// rank); over vectors kept on the host, the count of the streamed tile
    /// that fell back most (each tile is certified on its own).
    int64_t fallbackQueries = 0;
    /// Of certifiedQueries, those certified by Auto's TF32 pass over the
    /// residual copy (data of clusters far from each other and from the
    /// origin, where the first TF32 pass cannot certify; docs/flat.md).
    int64_t residualQueries = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
