// Options of the exact flat index that its engine (impl/FlatSearch.h) needs
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
    /// Chosen per search by chooseDistancePrecision (FP32 until the
    /// crossover is measured on the GPU machine).
    Auto = 0,
    /// cuBLASLt FP32 GEMM (CUBLAS_COMPUTE_32F_PEDANTIC): today's path.
    FP32 = 1,
    /// TF32 tensor-core GEMM, then per query a proven error bound decides
    /// which candidates can still be among the k nearest; those are
    /// re-scored in FP32. A query whose candidate set is not certified is
    /// searched again in FP32 (counted in BoundedSearchStats).
    TF32Bounded = 2,
};

/// "auto", "fp32", "tf32-bounded".
const char* distancePrecisionName(DistancePrecision p);

/// Parses distancePrecisionName's names; throws on others.
DistancePrecision distancePrecisionFromName(const char* name);

/// The precision Auto runs for nq queries of dimension d at k over nb
/// vectors of `metric`: the single place where the measured crossover goes.
DistancePrecision chooseDistancePrecision(int64_t nq, int64_t nb, int64_t k, int d,
                                          FlatMetric metric);

/// Queries answered by each route of the TF32Bounded precision.
struct BoundedSearchStats {
    /// Queries whose candidate set the bound certified: answered from the
    /// TF32 candidates re-scored in FP32.
    int64_t certifiedQueries = 0;
    /// Queries searched again by the FP32 path: the bound could not certify
    /// their candidates (data far from the origin, near ties at the k-th
    /// rank), or the vectors are kept on the host (FP32 only there).
    int64_t fallbackQueries = 0;
};

}  // namespace gpu
}  // namespace faiss_ext
