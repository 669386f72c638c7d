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
/// Longest description index_factory accepts (FAISS 1.7.3's regex
/// matching recurses per character and overflowed the stack at 30,000).
constexpr int kMaxDescriptionLength = 1024;
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
///   - "BiLSH<L>x<M>[_t<treeDepth>][_w<bucketWidth>][_e8]": Bi-level LSH
///     (GpuIndexBiLevelLSH on a GPU). Its CPU twin is an untrained
///     faiss_ext::IndexBiLevelLSH(d, config) with config.nTables = L (hash
///     tables, [1, 64]), config.nProjections = M (projections per table,
///     [1, 32]), config.treeDepth (RP-tree depth, [0, 14], default 4) and
///     config.bucketWidth (a finite decimal number > 0, default 4: the
///     multiple of the k-th neighbour distance); the
///     other BiLevelLSHConfig fields keep their defaults; "_e8" sets the E8
///     lattice (M a multiple of 8). The suffixes may come in any order, each
///     at most once: "BiLSH10x8", "BiLSH10x8_t6_w0.75", "BiLSH16x16_e8".
///     METRIC_L2 only (p-stable LSH).
///   - "BiLSHauto[_r<recall>][_k<k>]": Bi-level LSH that tunes itself: an
///     untrained IndexBiLevelLSH whose config.autotuneRecall = recall
///     (default 0.9, in (0, 1]) and widthNeighbours = k (default 10), so
///     that train() runs the autotuner (faiss_ext/BiLevelLSHAutoTune.h) on
///     the training vectors and keeps its choice: "BiLSHauto",
///     "BiLSHauto_r0.95", "BiLSHauto_r0.9_k20".
///   - "SGraph<R>": graph-based approximate search (GpuIndexSearchGraph on a
///     GPU: a GNND k-NN graph optimised into a search graph of degree R, even,
///     in [4, 128]; the k-NN graph has degree 2R). Its CPU twin is
///     faiss::IndexHNSWFlat(d, R / 2, `metric`), whose level 0 holds R
///     neighbours: added to on the CPU, FAISS builds it as HNSW; moved to a
///     GPU by index_cpu_to_gpu, GpuIndexSearchGraph builds its own graph (or
///     keeps the twin's, if it has vectors). Cosine: "L2norm,SGraph64" with
///     METRIC_INNER_PRODUCT.
/// FAISS prefixes compose: "IDMap,QSFlat", "PCA64,QSFlat", "IDMap,PCA64,QSFlat",
/// "IDMap,GNND64", "L2norm,GNND64", "PCA64,GNND32", "IDMap,BiLSH10x8",
/// "PCA64,BiLSH16x8", "IDMap,SGraph64".
/// Anything else goes to faiss::index_factory unchanged. Bad strings of ours
/// (e.g. "GNND0", "GNND64_p33", "GNND64_x", "BiLSH0x8", "BiLSH10x8_t15",
/// "BiLSH10x8_w0", "BiLSH10x8_t4_t5", "SGraph63", "SGraph256") and unsupported metrics for our
/// components (other than L2 / IP; other than L2 for BiLSH) throw
/// faiss::FaissException naming the problem. So do, for any string (FAISS's
/// too): a description longer than kMaxDescriptionLength or holding no
/// index, a result of dimension 0 anywhere (e.g. "PCA0,QSFlat"), and one
/// nested deeper than read_index accepts (kMaxIndexNesting in index_io.h,
/// e.g. "IDMap," x 33 + "QSFlat"). "GNND<k>" gives a
/// faiss_ext::IndexNNDescentFlatChecked (a faiss::IndexNNDescentFlat whose
/// search refuses what FAISS 1.7.3 cannot answer).
faiss::Index* index_factory(int d, const char* description,
                            faiss::MetricType metric = faiss::METRIC_L2);

}  // namespace faiss_ext
