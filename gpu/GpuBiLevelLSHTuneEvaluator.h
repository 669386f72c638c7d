// The Bi-level LSH autotuner's evaluator on a GPU (faiss_ext/BiLevelLSHAutoTune.h):
// candidate indexes are GpuIndexBiLevelLSH, the ground truth comes from
// GpuIndexQuickSelectFlat. The GPU index gives the same candidates as the
// CPU twin, so the tuner makes the same choice as with
// BiLevelTuneEvaluatorCpu, at the speed of the GPU (1M-vector databases).
//
// Usage:
//   faiss_ext::gpu::StandardGpuResources res;
//   faiss_ext::gpu::GpuBiLevelLSHTuneEvaluator eval(&res);
//   auto r = faiss_ext::autoTuneBiLevelLSH(d, nb, xb, nq, xq, options, &eval);
#pragma once

#include <memory>

#include "faiss_ext/BiLevelLSHAutoTune.h"
#include "faiss_ext/gpu/GpuIndexBiLevelLSH.h"

namespace faiss_ext {
namespace gpu {

/// Builds and searches the tuner's candidate indexes on one GPU.
class GpuBiLevelLSHTuneEvaluator : public BiLevelTuneEvaluator {
  public:
    /// provider: the GPU resources (not null); gpuConfig: device and options
    /// of every GpuIndexBiLevelLSH built.
    explicit GpuBiLevelLSHTuneEvaluator(GpuResourcesProvider* provider,
                                        GpuIndexBiLevelLSHConfig gpuConfig = {});
    ~GpuBiLevelLSHTuneEvaluator() override;

    void build(const BiLevelLSHConfig& config, int d, int64_t n, const float* x) override;
    /// meanCandidates is measured on the first kTuneCandidateQueries queries.
    void search(int64_t nq, const float* q, int k, const SearchParametersBiLevelLSH& params,
                int64_t* labels, double* meanCandidates) override;
    void exactSearch(int d, int64_t n, const float* x, int64_t nq, const float* q, int k,
                     int64_t* labels) override;

  private:
    GpuResourcesProvider* provider_;
    GpuIndexBiLevelLSHConfig gpuConfig_;
    std::unique_ptr<GpuIndexBiLevelLSH> index_;
};

}  // namespace gpu
}  // namespace faiss_ext
