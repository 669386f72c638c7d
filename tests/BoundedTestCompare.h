// The comparison of the bounded TF32 tests (test_gpu_flat_bounded*.cpp):
// a search at one precision, and the check that the bounded results equal
// the FP32 path's.
//
// What "equal" means here (checkSameAsFp32): rank by rank the distances
// agree within the FP32 rounding tolerance below, and an id returned by one
// path and not the other is a tie: its exact distance (double) is within
// that tolerance of the k-th FP32 distance. The tolerance: both paths
// compute each key with any-order FP32 sums, |key - exact| <=
// gamma(d + 1, 2^-24) |alpha| |q| |x| + 2^-24 (|x|^2 + |alpha| |q| |x|),
// then add |q|^2 with one more rounding; twice that (one per path) and a
// factor of 2 for the decode and the host's reference arithmetic give
// tol = 4 (d + 3) 2^-24 (|alpha| |q| X + X^2 + |q|^2) with X the largest
// corpus norm (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
#pragma once

#include <cuda_runtime_api.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"
#include "faiss_ext/gpu/StandardGpuResources.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

namespace faiss_ext {
namespace test {

struct Results {
    std::vector<float> D;
    std::vector<int64_t> I;
};

/// index.search at `precision`, over the vectors `sel` selects (may be null).
Results searchWith(const gpu::GpuIndexQuickSelectFlat& index, const std::vector<float>& xq,
                   int64_t k, gpu::DistancePrecision precision,
                   const faiss::IDSelector* sel = nullptr);

/// "" when `got` (bounded) equals `ref` (FP32) as the header says; else the
/// first difference. stored: the index's (prepared) vectors, labels being
/// their positions; queries: the raw queries (prepared here for cosine /
/// Pearson).
std::string checkSameAsFp32(FlatMetric metric, int d, const std::vector<float>& stored,
                            std::vector<float> queries, int64_t k, const Results& got,
                            const Results& ref);

/// Adds xb to an index of `metric`, searches xq at FP32 and at `bounded`
/// (TF32Bounded or BF16x3Bounded) and compares; returns the bounded
/// search's counters.
gpu::BoundedSearchStats compareOn(
        gpu::StandardGpuResources& res, FlatMetric metric, int d, const std::vector<float>& xb,
        const std::vector<float>& xq, int64_t k, const std::string& what,
        gpu::GpuIndexQuickSelectFlatConfig config = {},
        gpu::DistancePrecision bounded = gpu::DistancePrecision::TF32Bounded);

/// Searches xq of an index holding data at FP32 and at `bounded` (over
/// `sel` when set), checks that the results agree, every query is counted
/// once and only selected ids come back; returns the bounded search's
/// counters.
gpu::BoundedSearchStats boundedAgainstFp32(gpu::GpuIndexQuickSelectFlat& index, FlatMetric metric,
                                           int d, const std::vector<float>& xq, int64_t k,
                                           gpu::DistancePrecision bounded, const std::string& what,
                                           const faiss::IDSelector* sel = nullptr);

/// "<data> metric=.. d=.. k=.. seed=..".
std::string describe(FlatMetric m, int d, int64_t k, const char* data);

/// A device copy of a host vector, freed at the end of the scope.
template <class T>
struct DeviceCopy {
    T* p = nullptr;
    explicit DeviceCopy(const std::vector<T>& h) {
        FAISS_EXT_CUDA_CHECK(
            cudaMalloc(reinterpret_cast<void**>(&p), sizeof(T) * std::max<size_t>(h.size(), 1)));
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice));
        syncAfterHostCopy();
    }
    ~DeviceCopy() { cudaFree(p); }
    DeviceCopy(const DeviceCopy&) = delete;
    DeviceCopy& operator=(const DeviceCopy&) = delete;
};

}  // namespace test
}  // namespace faiss_ext
