// Factory for faiss_ext indexes, composed with FAISS's own strings.
#pragma once

#include <faiss/Index.h>

#include <cstdint>

namespace faiss_ext {

/// Largest graph degree k of "GNND<k>" (GpuKnnGraphGNND's limit).
constexpr int kGnndMaxDegree = 1024;
/// Largest number of samples p of "GNND<k>_p<p>" (GpuKnnGraphGNNDConfig::samples).
constexpr int kGnndMaxSamples = 32;
/// Samples p when "_p" is not given (GpuKnnGraphGNNDConfig's default).
constexpr int kGnndDefaultSamples = 32;
/// Iterations when "_it" is not given (GpuKnnGraphGNNDConfig::maxIterations' default).
constexpr int kGnndDefaultIterations = 20;
/// Seed the "GNND" twin gets (GpuKnnGraphGNNDConfig::seed's default), so that
/// a twin moved to a GPU builds as a GpuKnnGraphGNND made there directly.
constexpr int kGnndDefaultSeed = 1234;

/// Builds an index from a description, like faiss::index_factory, adding our
/// types. Returns CPU twins; move them to a GPU with
/// faiss_ext::gpu::index_cpu_to_gpu.
///
/// Our components (the last component of the string):
///   - "QSFlat": the exact flat index searched by GpuIndexQuickSelectFlat on a
///     GPU. Its CPU twin is faiss::IndexFlat with `metric` (L2 or IP).
///   - "QSFlatCosine": cosine similarity; the twin is
///     IndexPreTransform(NormalizationTransform, IndexFlatIP).
///   - "QSFlatPearson": Pearson correlation; the twin is
///     IndexPreTransform(RowCenteringTransform + NormalizationTransform, IndexFlatIP).
///   - "GNND<k>[_p<samples>][_it<iterations>]": the approximate k-NN graph
///     built by GpuKnnGraphGNND on a GPU (GNND, GPU NN-Descent), graph degree
///     k in [1, 1024]. Its CPU twin is faiss::IndexNNDescentFlat(d, k,
///     `metric`) (L2 or IP) with nndescent.S = samples (1..32, default 32),
///     nndescent.iter = iterations (>= 1, default 20) and nndescent.random_seed
///     = 1234; the other NNDescent fields keep FAISS's defaults. The suffixes
///     may come in either order, each at most once: "GNND64", "GNND32_p16",
///     "GNND64_p24_it10". The twin builds its graph with FAISS's CPU
///     NN-Descent when vectors are added; index_cpu_to_gpu turns it into a
///     GpuKnnGraphGNND with these parameters. Cosine: "L2norm,GNND64" with
///     METRIC_INNER_PRODUCT.
/// FAISS prefixes compose: "IDMap,QSFlat", "PCA64,QSFlat", "IDMap,PCA64,QSFlat",
/// "IDMap,GNND64", "L2norm,GNND64", "PCA64,GNND32".
/// Anything else goes to faiss::index_factory unchanged. Bad strings of ours
/// (e.g. "GNND0", "GNND64_p33", "GNND64_x") and metrics other than L2 / IP for
/// our components throw faiss::FaissException naming the problem.
faiss::Index* index_factory(int d, const char* description,
                            faiss::MetricType metric = faiss::METRIC_L2);

}  // namespace faiss_ext
