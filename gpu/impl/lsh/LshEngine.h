// Internal engine of GpuIndexBiLevelLSH (gpu/GpuIndexBiLevelLSH.h): the
// device state and the three stages, each in its own .cu file:
//   LshTree.cu    level one: RP-tree training (section 5.1, Algorithms 1-2)
//   LshTables.cu  level two: codes, sorted tables, bucket keys (section 5.2)
//   LshSearch.cu  candidates and short-list search (section 5.3)
// Every leaf, code and candidate follows faiss_ext/BiLevelLSHCommon.h, so
// the results match the CPU twin's (faiss_ext/IndexBiLevelLSH.cpp).
#pragma once

#include "faiss_ext/BiLevelLSHCommon.h"
#include "faiss_ext/BiLevelLSHModel.h"
#include "faiss_ext/gpu/impl/lsh/DeviceCuckooTable.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"
#include "faiss_ext/gpu/utils/DeviceVector.h"
#include "faiss_ext/gpu/utils/StaticUtils.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace lsh_impl {

/// Copies host data into a DeviceVector (allocating it).
template <typename T>
void upload(DeviceVector<T>* dst, const std::vector<T>& src, cudaStream_t stream, const char* what) {
    dst->allocate(src.size(), "GpuIndexBiLevelLSH", what);
    if (!src.empty())
        FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dst->data(), src.data(), src.size() * sizeof(T),
                                             cudaMemcpyHostToDevice, stream));
}

/// The trained model on the device.
struct DeviceModel {
    DeviceVector<uint8_t> nodeRule;
    DeviceVector<float> nodeVec;
    DeviceVector<float> nodeThreshold;
    DeviceVector<float> leafWidth;
    DeviceVector<float> leafOffset;
    DeviceVector<float> proj;
    DeviceVector<float> projBias;
    void upload(const BiLevelLSHModel& m, cudaStream_t stream);
};

/// Vectors and hash tables of a GpuIndexBiLevelLSH.
struct DeviceState {
    int64_t n = 0;
    DeviceVector<float> vectors;  ///< n x d
    DeviceModel model;
    DeviceVector<int32_t> sortedIds;    ///< L x n
    DeviceVector<uint64_t> sortedCodes; ///< L x n
    DeviceVector<int64_t> groupStart;   ///< groups + 1
    DeviceVector<lsh::BucketRange> ranges;
    DeviceCuckooTable cuckoo;
    uint64_t keySalt = 0;
    size_t numKeys = 0;
    std::vector<int64_t> groupStartHost;
};

/// Level one on the GPU: fills the tree and leaves of `model` (from
/// BiLevelLSHModel::initRandom) from n training vectors at dX (device).
void trainTreeGpu(BiLevelLSHModel* model, const BiLevelLSHConfig& config, int64_t n,
                  const float* dX, cudaStream_t stream, bool verbose);

/// Canonical projections: out[i * P + j] = canonicalDot(proj_j, x_i)
/// for n rows of dimension d and P projections (all device pointers).
void projectRows(const float* dX, int64_t n, int d, const float* dProj, int P, float* dOut,
                 cudaStream_t stream);

/// Group of each of n rows by the tree (device output).
void leafOfRows(const DeviceModel& dm, const BiLevelLSHModel& model, const float* dX, int64_t n,
                int32_t* dGroup, cudaStream_t stream);

/// Level two: the tables over st->vectors (st->n rows, model on device).
void buildTablesGpu(const BiLevelLSHModel& model, const BiLevelLSHConfig& config,
                    DeviceState* st, cudaStream_t stream, bool verbose);

/// Candidate intervals of nq queries (device): per query
/// groupProbes x tables x (nprobe + 1) slots, counts in dCount.
struct QueryIntervals {
    DeviceVector<lsh::Interval> intervals;
    DeviceVector<int32_t> counts;  ///< per (query, group probe, table)
    int slots = 0;              ///< intervals per (query, group probe, table)
    int perQuery = 0;           ///< groupProbes x tables
};
void queryIntervals(const DeviceState& st, const BiLevelLSHModel& model,
                    const BiLevelSearchSettings& s, int64_t nq, const float* dQ,
                    QueryIntervals* out, cudaStream_t stream);

/// k-NN of nq queries (device pointers in and out) by the short list;
/// mode Auto asks chooseAuto(mean candidates per query). keepBits (device
/// bitmap over the stored vectors, or null): candidates whose bit is clear
/// are dropped before scoring, as the CPU twin drops what its selector
/// does not select.
void searchGpu(const DeviceState& st, const BiLevelLSHModel& model,
               const BiLevelSearchSettings& s, BiLevelShortList mode,
               const std::function<BiLevelShortList(double)>& chooseAuto, size_t workQueueBytes,
               int64_t nq, const float* dQ, int k, float* dD, int64_t* dI,
               const uint32_t* keepBits, cudaStream_t stream);

/// Fills count results with (+inf, -1).
void fillEmpty(float* dD, int64_t* dI, int64_t count, cudaStream_t stream);


}  // namespace lsh_impl
}  // namespace gpu
}  // namespace faiss_ext
