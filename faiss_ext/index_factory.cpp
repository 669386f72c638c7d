// Factory for faiss_ext indexes (see index_factory.h).
//
// Our components end the description. Whatever comes before them (FAISS
// prefixes such as "IDMap,", "PCA64,", "L2norm,") is built by
// faiss::index_factory over a placeholder "Flat" leaf, which is then replaced
// by our leaf, so FAISS keeps the meaning of its own strings.
#include "faiss_ext/index_factory.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/index_factory.h>

#include <memory>
#include <string>

#include "faiss_ext/Metric.h"
#include "faiss_ext/RowCenteringTransform.h"

namespace faiss_ext {

namespace {

/// The metric a component of ours asks for, or false when it is not ours.
bool parseOurLeaf(const std::string& component, FlatMetric* metric, bool* byName) {
    if (component == "QSFlat") {
        *byName = false;
        return true;
    }
    if (component == "QSFlatCosine") {
        *metric = FlatMetric::Cosine;
        *byName = true;
        return true;
    }
    if (component == "QSFlatPearson") {
        *metric = FlatMetric::Pearson;
        *byName = true;
        return true;
    }
    return false;
}

/// The CPU twin of our flat index for `metric`, of dimension d.
faiss::Index* makeLeaf(int d, FlatMetric metric) {
    switch (metric) {
        case FlatMetric::L2:
        case FlatMetric::InnerProduct:
            return new faiss::IndexFlat(d, toFaissMetric(metric));
        case FlatMetric::Cosine: {
            auto pt = std::make_unique<faiss::IndexPreTransform>(
                new faiss::NormalizationTransform(d, 2.0f), new faiss::IndexFlatIP(d));
            pt->own_fields = true;
            return pt.release();
        }
        case FlatMetric::Pearson: {
            auto pt = std::make_unique<faiss::IndexPreTransform>(new faiss::IndexFlatIP(d));
            pt->own_fields = true;
            // prepend: the chain becomes [RowCentering, Normalization]
            pt->prepend_transform(new faiss::NormalizationTransform(d, 2.0f));
            pt->prepend_transform(new RowCenteringTransform(d));
            return pt.release();
        }
    }
    FAISS_THROW_FMT("unknown FlatMetric %d", int(metric));
}

/// The placeholder leaf slot of a wrapper built by faiss::index_factory, or
/// nullptr when `index` is no wrapper we walk.
faiss::Index** innerSlot(faiss::Index* index) {
    if (auto m = dynamic_cast<faiss::IndexIDMap*>(index)) return &m->index;
    if (auto pt = dynamic_cast<faiss::IndexPreTransform*>(index)) return &pt->index;
    return nullptr;
}

void setOwnsInner(faiss::Index* index) {
    if (auto m = dynamic_cast<faiss::IndexIDMap*>(index)) m->own_fields = true;
    if (auto pt = dynamic_cast<faiss::IndexPreTransform*>(index)) pt->own_fields = true;
}

}  // namespace

faiss::Index* index_factory(int d, const char* description, faiss::MetricType metric) {
    FAISS_THROW_IF_NOT_MSG(description, "index_factory: null description");
    FAISS_THROW_IF_NOT_FMT(d > 0, "index_factory: d = %d must be > 0 (description '%s')", d,
                           description);
    const std::string desc(description);
    const size_t comma = desc.rfind(',');
    const std::string last = comma == std::string::npos ? desc : desc.substr(comma + 1);

    FlatMetric leafMetric = FlatMetric::L2;
    bool byName = false;
    if (!parseOurLeaf(last, &leafMetric, &byName)) {
        // not ours: FAISS's string, unchanged
        return faiss::index_factory(d, description, metric);
    }
    FAISS_THROW_IF_NOT_FMT(
        metric == faiss::METRIC_L2 || metric == faiss::METRIC_INNER_PRODUCT,
        "index_factory: '%s' supports METRIC_L2 and METRIC_INNER_PRODUCT, not metric %d "
        "(cosine and Pearson are chosen by name: QSFlatCosine, QSFlatPearson)",
        description, int(metric));
    if (!byName) leafMetric = fromFaissMetric(metric);

    if (comma == std::string::npos) return makeLeaf(d, leafMetric);

    // the FAISS prefix, built over a placeholder Flat leaf
    const std::string prefix = desc.substr(0, comma);
    FAISS_THROW_IF_NOT_FMT(!prefix.empty(), "index_factory: empty prefix before '%s' in '%s'",
                           last.c_str(), description);
    const std::string placeholder = prefix + ",Flat";
    std::unique_ptr<faiss::Index> root(
        faiss::index_factory(d, placeholder.c_str(), toFaissMetric(leafMetric)));

    // walk down to the placeholder
    faiss::Index* parent = nullptr;
    faiss::Index* node = root.get();
    while (faiss::Index** slot = innerSlot(node)) {
        parent = node;
        node = *slot;
        FAISS_THROW_IF_NOT_FMT(node, "index_factory: '%s' built a wrapper with no index",
                               placeholder.c_str());
    }
    auto* flat = dynamic_cast<faiss::IndexFlat*>(node);
    FAISS_THROW_IF_NOT_FMT(parent && flat,
                           "index_factory: '%s' cannot follow the prefix '%s' (only wrappers "
                           "such as IDMap, IDMap2 and vector transforms can precede it)",
                           last.c_str(), prefix.c_str());

    std::unique_ptr<faiss::Index> leaf(makeLeaf(int(flat->d), leafMetric));
    faiss::Index** slot = innerSlot(parent);
    delete *slot;  // the placeholder: nothing else refers to it
    *slot = leaf.release();
    setOwnsInner(parent);
    return root.release();
}

}  // namespace faiss_ext
