// GpuBiLevelLSHTuneEvaluator (see GpuBiLevelLSHTuneEvaluator.h).
#include "faiss_ext/gpu/GpuBiLevelLSHTuneEvaluator.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <vector>

#include "faiss_ext/gpu/GpuIndexQuickSelectFlat.h"

namespace faiss_ext {
namespace gpu {

GpuBiLevelLSHTuneEvaluator::GpuBiLevelLSHTuneEvaluator(GpuResourcesProvider* provider,
                                                       GpuIndexBiLevelLSHConfig gpuConfig)
    : provider_(provider), gpuConfig_(gpuConfig) {
    FAISS_THROW_IF_NOT_MSG(provider, "GpuBiLevelLSHTuneEvaluator: null resources provider");
}

GpuBiLevelLSHTuneEvaluator::~GpuBiLevelLSHTuneEvaluator() = default;

void GpuBiLevelLSHTuneEvaluator::build(const BiLevelLSHConfig& config, int d, int64_t n,
                                       const float* x) {
    index_.reset();  // free the previous candidate's memory first
    auto index = std::make_unique<GpuIndexBiLevelLSH>(provider_, d, config, gpuConfig_);
    index->train(n, x);
    index->add(n, x);
    index_ = std::move(index);
}

void GpuBiLevelLSHTuneEvaluator::search(int64_t nq, const float* q, int k,
                                        const SearchParametersBiLevelLSH& params, int64_t* labels,
                                        double* meanCandidates) {
    FAISS_THROW_IF_NOT_MSG(index_, "GpuBiLevelLSHTuneEvaluator::search: build() first");
    searchAndCountCandidates(*index_, nq, q, k, params, labels, meanCandidates);
}

void GpuBiLevelLSHTuneEvaluator::exactSearch(int d, int64_t n, const float* x, int64_t nq,
                                             const float* q, int k, int64_t* labels) {
    GpuIndexQuickSelectFlatConfig flatConfig;
    flatConfig.device = gpuConfig_.device;
    GpuIndexQuickSelectFlat flat(provider_, d, FlatMetric::L2, flatConfig);
    flat.add(n, x);
    std::vector<float> D(size_t(nq) * k);
    flat.search(nq, q, k, D.data(), labels);
}

}  // namespace gpu
}  // namespace faiss_ext
