// Metrics of the exact flat index: names, FAISS mapping and host-side vector
// preparation (Komarov et al., quick multi-select, 2014, docs/references.md,
// "Distance calculation").
#include "faiss_ext/Metric.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace faiss_ext {

faiss::MetricType toFaissMetric(FlatMetric m) {
    switch (m) {
        case FlatMetric::L2:
            return faiss::METRIC_L2;
        case FlatMetric::InnerProduct:
        case FlatMetric::Cosine:
        case FlatMetric::Pearson:
            return faiss::METRIC_INNER_PRODUCT;
    }
    FAISS_THROW_FMT("unknown FlatMetric %d", int(m));
}

FlatMetric fromFaissMetric(faiss::MetricType m) {
    switch (m) {
        case faiss::METRIC_L2:
            return FlatMetric::L2;
        case faiss::METRIC_INNER_PRODUCT:
            return FlatMetric::InnerProduct;
        default:
            break;
    }
    FAISS_THROW_FMT(
        "faiss metric %d is not supported by the flat index "
        "(only METRIC_L2 = %d and METRIC_INNER_PRODUCT = %d)",
        int(m), int(faiss::METRIC_L2), int(faiss::METRIC_INNER_PRODUCT));
}

const char* flatMetricName(FlatMetric m) {
    switch (m) {
        case FlatMetric::L2:
            return "L2";
        case FlatMetric::InnerProduct:
            return "IP";
        case FlatMetric::Cosine:
            return "Cosine";
        case FlatMetric::Pearson:
            return "Pearson";
    }
    return "unknown";
}

FlatMetric parseFlatMetric(const std::string& name) {
    std::string s(name);
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (s == "l2") return FlatMetric::L2;
    if (s == "ip" || s == "innerproduct" || s == "inner_product") return FlatMetric::InnerProduct;
    if (s == "cosine") return FlatMetric::Cosine;
    if (s == "pearson") return FlatMetric::Pearson;
    FAISS_THROW_FMT("unknown flat metric name '%s' (expected L2, IP, Cosine or Pearson)",
                    name.c_str());
}

void prepareVectors(FlatMetric m, int64_t n, int d, float* x) {
    FAISS_THROW_IF_NOT_FMT(n >= 0, "prepareVectors: n = %lld must be >= 0", (long long)n);
    FAISS_THROW_IF_NOT_FMT(d > 0, "prepareVectors: d = %d must be > 0", d);
    if (!isPreparedMetric(m) || n == 0) return;
    FAISS_THROW_IF_NOT_MSG(x, "prepareVectors: null vectors");
    const bool centre = (m == FlatMetric::Pearson);

#pragma omp parallel for if (n > 64)
    for (int64_t i = 0; i < n; ++i) {
        float* row = x + i * int64_t(d);
        if (centre) {
            double sum = 0;
            for (int j = 0; j < d; ++j) sum += row[j];
            const float mean = float(sum / d);
            for (int j = 0; j < d; ++j) row[j] -= mean;
        }
        double sq = 0;
        for (int j = 0; j < d; ++j) sq += double(row[j]) * row[j];
        if (sq > 0) {
            const float inv = float(1.0 / std::sqrt(sq));
            for (int j = 0; j < d; ++j) row[j] *= inv;
        } else {
            // zero (or, for Pearson, constant) rows stay exactly zero
            for (int j = 0; j < d; ++j) row[j] = 0.f;
        }
    }
}

void checkVectorCount(const char* who, int64_t n, int d) {
    FAISS_THROW_IF_NOT_FMT(n >= 0 && d > 0, "%s: n = %lld and d = %d must be >= 0 and > 0", who,
                           (long long)n, d);
    FAISS_THROW_IF_NOT_FMT(uint64_t(n) <= uint64_t(SIZE_MAX / sizeof(float)) / uint64_t(d),
                           "%s: n = %lld vectors of dimension %d overflow the address space", who,
                           (long long)n, d);
}

int64_t firstNonFiniteRow(int64_t n, int d, const float* x) {
    const size_t total = size_t(n) * size_t(d);
    int64_t bad = int64_t(-1);
    int64_t first = n;
#pragma omp parallel for if (total > 1000000) reduction(min : first)
    for (int64_t i = 0; i < n; ++i) {
        const float* r = x + size_t(i) * d;
        for (int j = 0; j < d; ++j)
            if (!std::isfinite(r[j])) {
                first = std::min(first, i);
                break;
            }
    }
    if (first < n) bad = first;
    return bad;
}

}  // namespace faiss_ext
