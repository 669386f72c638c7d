// Metrics of the exact flat index.
//
// L2 and inner product are FAISS's own. Cosine and Pearson follow Komarov et
// al. (quick multi-select, 2014, docs/references.md, "Distance calculation"): cosine
// is the inner product of L2-normalised vectors, Pearson the cosine of vectors
// centred on their own mean. Both are reported as similarities (larger is
// closer, FAISS's METRIC_INNER_PRODUCT convention), so results merge with
// FAISS's IndexShards and compare with faiss::IndexFlatIP on prepared vectors.
#pragma once

#include <faiss/MetricType.h>

#include <cstdint>
#include <string>

namespace faiss_ext {

/// The metric of an exact flat index.
enum class FlatMetric : int {
    L2 = 0,            ///< squared Euclidean distance (smaller is closer)
    InnerProduct = 1,  ///< dot product (larger is closer)
    Cosine = 2,        ///< dot product of L2-normalised vectors (larger is closer)
    Pearson = 3,       ///< correlation: cosine of row-centred vectors (larger is closer)
};

/// The FAISS metric whose ordering and result convention a FlatMetric uses.
faiss::MetricType toFaissMetric(FlatMetric m);

/// FlatMetric for a FAISS metric; throws for metrics the flat index lacks.
FlatMetric fromFaissMetric(faiss::MetricType m);

/// "L2", "IP", "Cosine", "Pearson".
const char* flatMetricName(FlatMetric m);

/// Parses the names of flatMetricName (case-insensitive; "InnerProduct" too).
FlatMetric parseFlatMetric(const std::string& name);

/// True for the metrics that store prepared (normalised) vectors.
inline bool isPreparedMetric(FlatMetric m) {
    return m == FlatMetric::Cosine || m == FlatMetric::Pearson;
}

/// Applies the metric's vector preparation in place on the host: nothing for
/// L2 and inner product, L2 normalisation for cosine, per-vector centring then
/// normalisation for Pearson. Zero vectors (and constant ones for Pearson)
/// stay zero, so their similarity to anything is 0.
void prepareVectors(FlatMetric m, int64_t n, int d, float* x);

/// Throws unless n x d floats (and n x d x 4 bytes) fit in size_t and n >= 0:
/// checked before anything reads the n rows.
void checkVectorCount(const char* who, int64_t n, int d);

/// First row of the n x d row-major host matrix x with a NaN or infinite
/// component, or -1 when all are finite (OpenMP for large inputs).
int64_t firstNonFiniteRow(int64_t n, int d, const float* x);

}  // namespace faiss_ext
