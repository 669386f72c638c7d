// Factory for faiss_ext indexes (see index_factory.h).
//
// Our components end the description. Whatever comes before them (FAISS
// prefixes such as "IDMap,", "PCA64,", "L2norm,") is built by
// faiss::index_factory over a placeholder "Flat" leaf, which is then replaced
// by our leaf, so FAISS keeps the meaning of its own strings.
#include "faiss_ext/index_factory.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/index_factory.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "faiss_ext/BiLevelLSHCommon.h"
#include <faiss/IndexHNSW.h>

#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/IndexNNDescentFlatChecked.h"
#include "faiss_ext/Metric.h"
#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/index_io.h"

namespace faiss_ext {

namespace {

/// What our component (the last one of a description) asks for.
struct LeafSpec {
    enum class Kind { QSFlat, Gnnd, BiLevelLSH, SearchGraph };
    Kind kind = Kind::QSFlat;
    /// The metric, when the name chooses it (QSFlatCosine, QSFlatPearson).
    FlatMetric metric = FlatMetric::L2;
    bool metricByName = false;
    /// GNND: graph degree, samples per list, iterations. SGraph: the
    /// search-graph degree.
    int k = 0;
    int samples = kGnndDefaultSamples;
    int iterations = kGnndDefaultIterations;
    /// BiLSH: tables L, projections M, RP-tree depth, bucket width (the
    /// rest of BiLevelLSHConfig keeps its defaults).
    BiLevelLSHConfig lsh;
};

/// The value of `digits` when it is a non-empty run of decimal digits whose
/// value is at most `max`; -1 when it is no such run, -2 when it is larger.
long long parseBoundedDigits(const std::string& digits, long long max) {
    if (digits.empty()) return -1;
    long long v = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
        if (v > max) return -2;
    }
    return v;
}

/// The '_'-separated suffixes of `rest` from position `us` (the first '_',
/// or npos for none): "64_p8_it3" from 2 gives {"p8", "it3"}; an empty
/// suffix (a trailing or doubled '_') is kept, so callers reject it.
std::vector<std::string> splitSuffixes(const std::string& rest, size_t us) {
    std::vector<std::string> out;
    while (us != std::string::npos) {
        const size_t next = rest.find('_', us + 1);
        out.push_back(
            rest.substr(us + 1, next == std::string::npos ? std::string::npos : next - us - 1));
        us = next;
    }
    return out;
}

/// Parses "GNND<k>[_p<samples>][_it<iterations>]" (suffixes in any order,
/// each at most once) into spec; throws naming the problem.
void parseGnnd(const std::string& component, const char* description, LeafSpec* spec) {
    spec->kind = LeafSpec::Kind::Gnnd;
    const std::string rest = component.substr(4);  // after "GNND"
    const size_t us = rest.find('_');
    const std::string kText = rest.substr(0, us);
    const long long k = parseBoundedDigits(kText, kGnndMaxDegree);
    FAISS_THROW_IF_NOT_FMT(k >= 1,
                           "index_factory: '%s' in '%s': the graph degree k after 'GNND' must be "
                           "an integer in [1, %d], got '%s'",
                           component.c_str(), description, kGnndMaxDegree, kText.c_str());
    spec->k = int(k);

    bool haveSamples = false;
    bool haveIterations = false;
    for (const std::string& suffix : splitSuffixes(rest, us)) {
        if (suffix.size() > 2 && suffix.compare(0, 2, "it") == 0) {
            FAISS_THROW_IF_NOT_FMT(!haveIterations,
                                   "index_factory: '%s' in '%s': '_it' is given twice",
                                   component.c_str(), description);
            const std::string v = suffix.substr(2);
            const long long it = parseBoundedDigits(v, 1000000);
            FAISS_THROW_IF_NOT_FMT(it >= 1,
                                   "index_factory: '%s' in '%s': the iteration count after "
                                   "'_it' must be an integer in [1, 1000000], got '%s'",
                                   component.c_str(), description, v.c_str());
            spec->iterations = int(it);
            haveIterations = true;
        } else if (suffix.size() > 1 && suffix[0] == 'p') {
            FAISS_THROW_IF_NOT_FMT(!haveSamples, "index_factory: '%s' in '%s': '_p' is given twice",
                                   component.c_str(), description);
            const std::string v = suffix.substr(1);
            const long long p = parseBoundedDigits(v, kGnndMaxSamples);
            FAISS_THROW_IF_NOT_FMT(p >= 1,
                                   "index_factory: '%s' in '%s': the samples per list after '_p' "
                                   "must be an integer in [1, %d], got '%s'",
                                   component.c_str(), description, kGnndMaxSamples, v.c_str());
            spec->samples = int(p);
            haveSamples = true;
        } else {
            FAISS_THROW_FMT(
                "index_factory: '%s' in '%s': unknown suffix '_%s' (expected "
                "GNND<k>[_p<samples>][_it<iterations>], e.g. GNND64_p24_it10)",
                component.c_str(), description, suffix.c_str());
        }
    }
}

/// The value of `text` when it is a decimal floating-point number (no sign,
/// no "inf" / "nan", no hex) that is finite and > 0 as a float; else NaN.
float parsePositiveFloat(const std::string& text) {
    const float nan = std::nanf("");
    if (text.empty() || !(text[0] == '.' || (text[0] >= '0' && text[0] <= '9'))) return nan;
    double v = 0;
    const char* end = text.data() + text.size();
    // from_chars: locale-independent, no leading whitespace or '+'
    const auto res = std::from_chars(text.data(), end, v, std::chars_format::general);
    if (res.ec != std::errc() || res.ptr != end) return nan;
    const float f = float(v);
    return std::isfinite(f) && f > 0.f ? f : nan;
}

/// Parses "BiLSHauto[_r<recall>][_k<k>]" into spec: an index whose train()
/// runs the autotuner for recall@k (default 0.9 at k 10); throws naming the
/// problem.
void parseBiLevelLSHAuto(const std::string& component, const char* description, LeafSpec* spec) {
    spec->kind = LeafSpec::Kind::BiLevelLSH;
    const char* form = "BiLSHauto[_r<recall>][_k<k>], e.g. BiLSHauto_r0.95";
    const std::string rest = component.substr(9);  // after "BiLSHauto"
    FAISS_THROW_IF_NOT_FMT(rest.empty() || rest[0] == '_',
                           "index_factory: '%s' in '%s': expected %s", component.c_str(),
                           description, form);
    spec->lsh.autotuneRecall = 0.9f;
    bool haveRecall = false, haveK = false;
    for (const std::string& suffix : splitSuffixes(rest, rest.empty() ? std::string::npos : 0)) {
        if (!suffix.empty() && suffix[0] == 'r' && !haveRecall) {
            const float r = parsePositiveFloat(suffix.substr(1));
            FAISS_THROW_IF_NOT_FMT(std::isfinite(r) && r <= 1.f,
                                   "index_factory: '%s' in '%s': the target recall after '_r' "
                                   "must be a decimal number in (0, 1], got '%s'",
                                   component.c_str(), description, suffix.substr(1).c_str());
            spec->lsh.autotuneRecall = r;
            haveRecall = true;
        } else if (!suffix.empty() && suffix[0] == 'k' && !haveK) {
            const long long k = parseBoundedDigits(suffix.substr(1), 1024);
            FAISS_THROW_IF_NOT_FMT(k >= 1,
                                   "index_factory: '%s' in '%s': k after '_k' must be an "
                                   "integer in [1, 1024], got '%s'",
                                   component.c_str(), description, suffix.substr(1).c_str());
            spec->lsh.widthNeighbours = int(k);
            haveK = true;
        } else {
            FAISS_THROW_FMT("index_factory: '%s' in '%s': unknown or repeated suffix '_%s' "
                            "(expected %s)",
                            component.c_str(), description, suffix.c_str(), form);
        }
    }
}

/// Parses "BiLSH<L>x<M>[_t<treeDepth>][_w<bucketWidth>]" (suffixes in any
/// order, each at most once) into spec; throws naming the problem.
void parseBiLevelLSH(const std::string& component, const char* description, LeafSpec* spec) {
    if (component.compare(0, 9, "BiLSHauto") == 0) {
        parseBiLevelLSHAuto(component, description, spec);
        return;
    }
    spec->kind = LeafSpec::Kind::BiLevelLSH;
    const char* form =
        "BiLSH<L>x<M>[_t<treeDepth>][_w<bucketWidth>][_e8], e.g. BiLSH10x8_t6_w0.75";
    const std::string rest = component.substr(5);  // after "BiLSH"
    const size_t us = rest.find('_');
    const std::string head = rest.substr(0, us);
    const size_t x = head.find('x');
    FAISS_THROW_IF_NOT_FMT(x != std::string::npos,
                           "index_factory: '%s' in '%s': expected the tables and projections "
                           "as <L>x<M> after 'BiLSH' (%s)",
                           component.c_str(), description, form);
    const std::string lText = head.substr(0, x);
    const std::string mText = head.substr(x + 1);
    const long long L = parseBoundedDigits(lText, lsh::kMaxTables);
    FAISS_THROW_IF_NOT_FMT(L >= 1,
                           "index_factory: '%s' in '%s': the number of hash tables L after "
                           "'BiLSH' must be an integer in [1, %d], got '%s'",
                           component.c_str(), description, lsh::kMaxTables, lText.c_str());
    const long long M = parseBoundedDigits(mText, lsh::kMaxProjections);
    FAISS_THROW_IF_NOT_FMT(M >= 1,
                           "index_factory: '%s' in '%s': the number of projections per table M "
                           "after 'x' must be an integer in [1, %d], got '%s'",
                           component.c_str(), description, lsh::kMaxProjections, mText.c_str());
    spec->lsh.nTables = int(L);
    spec->lsh.nProjections = int(M);

    bool haveDepth = false;
    bool haveWidth = false;
    bool haveLattice = false;
    for (const std::string& suffix : splitSuffixes(rest, us)) {
        if (suffix == "e8") {
            FAISS_THROW_IF_NOT_FMT(!haveLattice, "index_factory: '%s' in '%s': '_e8' is given twice",
                                   component.c_str(), description);
            FAISS_THROW_IF_NOT_FMT(M % 8 == 0,
                                   "index_factory: '%s' in '%s': the E8 lattice needs M a "
                                   "multiple of 8, got %lld",
                                   component.c_str(), description, M);
            spec->lsh.lattice = lsh::kLatticeE8;
            haveLattice = true;
        } else if (!suffix.empty() && suffix[0] == 't') {
            FAISS_THROW_IF_NOT_FMT(!haveDepth, "index_factory: '%s' in '%s': '_t' is given twice",
                                   component.c_str(), description);
            const std::string v = suffix.substr(1);
            const long long t = parseBoundedDigits(v, lsh::kMaxTreeDepth);
            FAISS_THROW_IF_NOT_FMT(t >= 0,
                                   "index_factory: '%s' in '%s': the RP-tree depth after '_t' "
                                   "must be an integer in [0, %d], got '%s'",
                                   component.c_str(), description, lsh::kMaxTreeDepth, v.c_str());
            spec->lsh.treeDepth = int(t);
            haveDepth = true;
        } else if (!suffix.empty() && suffix[0] == 'w') {
            FAISS_THROW_IF_NOT_FMT(!haveWidth, "index_factory: '%s' in '%s': '_w' is given twice",
                                   component.c_str(), description);
            const std::string v = suffix.substr(1);
            const float w = parsePositiveFloat(v);
            FAISS_THROW_IF_NOT_FMT(std::isfinite(w),
                                   "index_factory: '%s' in '%s': the bucket width after '_w' "
                                   "must be a finite decimal number > 0, got '%s'",
                                   component.c_str(), description, v.c_str());
            spec->lsh.bucketWidth = w;
            haveWidth = true;
        } else {
            FAISS_THROW_FMT("index_factory: '%s' in '%s': unknown suffix '_%s' (expected %s)",
                            component.c_str(), description, suffix.c_str(), form);
        }
    }
}

/// Largest search-graph degree (GpuIndexSearchGraph's graphDegree).
constexpr int kSearchGraphMaxDegree = 128;

/// Parses "SGraph<R>" (R even, 4..128: the CPU twin is an IndexHNSWFlat
/// whose level 0 holds 2M = R neighbours) into spec; throws naming the
/// problem.
void parseSearchGraph(const std::string& component, const char* description, LeafSpec* spec) {
    spec->kind = LeafSpec::Kind::SearchGraph;
    const long long r = parseBoundedDigits(component.substr(6), kSearchGraphMaxDegree);
    // R = 2M for FAISS's HNSW, whose level probabilities need M >= 2
    FAISS_THROW_IF_NOT_FMT(r >= 4 && r % 2 == 0,
                           "index_factory: '%s' in '%s': the search-graph degree after 'SGraph' "
                           "must be an even number in [4, %d] (SGraph<R>, e.g. SGraph64)",
                           component.c_str(), description, kSearchGraphMaxDegree);
    spec->k = int(r);
}

/// Parses our component into spec, or returns false when it is not ours.
bool parseOurLeaf(const std::string& component, const char* description, LeafSpec* spec) {
    if (component == "QSFlat") {
        spec->kind = LeafSpec::Kind::QSFlat;
        return true;
    }
    if (component == "QSFlatCosine" || component == "QSFlatPearson") {
        spec->kind = LeafSpec::Kind::QSFlat;
        spec->metric = component == "QSFlatCosine" ? FlatMetric::Cosine : FlatMetric::Pearson;
        spec->metricByName = true;
        return true;
    }
    if (component.compare(0, 4, "GNND") == 0) {
        parseGnnd(component, description, spec);
        return true;
    }
    if (component.compare(0, 5, "BiLSH") == 0) {
        parseBiLevelLSH(component, description, spec);
        return true;
    }
    if (component.compare(0, 6, "SGraph") == 0) {
        parseSearchGraph(component, description, spec);
        return true;
    }
    return false;
}

/// The CPU twin of our flat index for `metric`, of dimension d.
faiss::Index* makeFlatLeaf(int d, FlatMetric metric) {
    switch (metric) {
        // The metric's own class, as FAISS's factory and reader make: FAISS
        // then refuses merge_from between an L2 and an inner-product twin
        // (two base IndexFlat objects of different metrics merged silently).
        case FlatMetric::L2: return new faiss::IndexFlatL2(d);
        case FlatMetric::InnerProduct: return new faiss::IndexFlatIP(d);
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

/// The CPU twin of GpuKnnGraphGNND: FAISS's NN-Descent index over a flat
/// storage, with our build parameters.
faiss::Index* makeGnndLeaf(int d, const LeafSpec& spec, FlatMetric metric) {
    auto idx = std::make_unique<IndexNNDescentFlatChecked>(d, spec.k, toFaissMetric(metric));
    idx->nndescent.S = spec.samples;
    idx->nndescent.iter = spec.iterations;
    idx->nndescent.random_seed = kGnndDefaultSeed;
    return idx.release();
}

/// The CPU twin of GpuIndexSearchGraph: an IndexHNSWFlat whose level 0 has
/// the search-graph degree (added on the CPU, FAISS builds it as HNSW;
/// moved to a GPU, GpuIndexSearchGraph builds its own graph).
faiss::Index* makeSearchGraphLeaf(int d, const LeafSpec& spec, FlatMetric metric) {
    return new faiss::IndexHNSWFlat(d, spec.k / 2, toFaissMetric(metric));
}

/// Our leaf for `spec`, of dimension d, with metric `metric`.
faiss::Index* makeLeaf(int d, const LeafSpec& spec, FlatMetric metric) {
    if (spec.kind == LeafSpec::Kind::Gnnd) return makeGnndLeaf(d, spec, metric);
    if (spec.kind == LeafSpec::Kind::SearchGraph) return makeSearchGraphLeaf(d, spec, metric);
    if (spec.kind == LeafSpec::Kind::BiLevelLSH) {
        // the CPU twin of GpuIndexBiLevelLSH (L2 only: checked by the caller)
        return new IndexBiLevelLSH(d, spec.lsh, faiss::METRIC_L2);
    }
    return makeFlatLeaf(d, metric);
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

/// Recomputes is_trained of the wrappers down to the leaf and returns the
/// root's: faiss::index_factory set them from the placeholder Flat (always
/// trained), so "IDMap,BiLSH10x8" said trained over an untrained leaf, and
/// its file did not read back.
bool syncIsTrained(faiss::Index* index) {
    if (auto m = dynamic_cast<faiss::IndexIDMap*>(index)) {
        m->is_trained = syncIsTrained(m->index);
    } else if (auto pt = dynamic_cast<faiss::IndexPreTransform*>(index)) {
        bool trained = syncIsTrained(pt->index);
        for (const faiss::VectorTransform* vt : pt->chain) trained = trained && vt->is_trained;
        pt->is_trained = trained;
    }
    return index->is_trained;
}

/// Throws unless every dimension in the tree is > 0: FAISS's "PCA0"
/// (any transform to 0 dimensions) built an index of dimension 0 whose every
/// search answered ids 0, 1, 2 ... at distance 0.
void checkPositiveDimensions(const faiss::Index* index, const char* description) {
    FAISS_THROW_IF_NOT_FMT(index->d > 0,
                           "index_factory: '%s' makes an index of dimension %d (it must be > 0)",
                           description, int(index->d));
    if (auto m = dynamic_cast<const faiss::IndexIDMap*>(index)) {
        checkPositiveDimensions(m->index, description);
    } else if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) {
        for (const faiss::VectorTransform* vt : pt->chain)
            FAISS_THROW_IF_NOT_FMT(vt->d_out > 0,
                                   "index_factory: '%s' has a transform from %d to %d dimensions "
                                   "(it must give > 0)",
                                   description, vt->d_in, vt->d_out);
        checkPositiveDimensions(pt->index, description);
    }
}

/// What index_factory returns, after the checks every result passes: its
/// dimensions are > 0 and its nesting is one read_index accepts.
faiss::Index* checkedResult(std::unique_ptr<faiss::Index> index, const char* description) {
    FAISS_THROW_IF_NOT_FMT(index, "index_factory: '%s' built no index", description);
    checkPositiveDimensions(index.get(), description);
    const int depth = index_nesting_depth(index.get());
    FAISS_THROW_IF_NOT_FMT(depth <= kMaxIndexNesting,
                           "index_factory: '%s' nests %d levels deep; read_index accepts at most "
                           "%d",
                           description, depth, kMaxIndexNesting);
    return index.release();
}

}  // namespace

faiss::Index* index_factory(int d, const char* description, faiss::MetricType metric) {
    FAISS_THROW_IF_NOT_MSG(description, "index_factory: null description");
    FAISS_THROW_IF_NOT_FMT(d > 0, "index_factory: d = %d must be > 0 (description '%s')", d,
                           description);
    // FAISS 1.7.3 matches components with std::regex, which recurses per
    // character: a 30,000-character component overflowed the stack
    const size_t length = std::strlen(description);
    FAISS_THROW_IF_NOT_FMT(length <= size_t(kMaxDescriptionLength),
                           "index_factory: the description has %zu characters (at most %d)",
                           length, kMaxDescriptionLength);
    const std::string desc(description);
    const size_t comma = desc.rfind(',');
    const std::string last = comma == std::string::npos ? desc : desc.substr(comma + 1);

    LeafSpec spec;
    if (!parseOurLeaf(last, description, &spec)) {
        // not ours: FAISS's string, unchanged
        return checkedResult(std::unique_ptr<faiss::Index>(
                                     faiss::index_factory(d, description, metric)),
                             description);
    }
    FAISS_THROW_IF_NOT_FMT(spec.kind != LeafSpec::Kind::BiLevelLSH || metric == faiss::METRIC_L2,
                           "index_factory: '%s' supports only METRIC_L2, not metric %d (Bi-level "
                           "LSH hashes by p-stable projections, an L2 scheme)",
                           description, int(metric));
    FAISS_THROW_IF_NOT_FMT(
        metric == faiss::METRIC_L2 || metric == faiss::METRIC_INNER_PRODUCT,
        "index_factory: '%s' supports METRIC_L2 and METRIC_INNER_PRODUCT, not metric %d (%s)",
        description, int(metric),
        spec.kind == LeafSpec::Kind::Gnnd || spec.kind == LeafSpec::Kind::SearchGraph
            ? "cosine is 'L2norm,GNND<k>' / 'L2norm,SGraph<R>' with METRIC_INNER_PRODUCT"
            : "cosine and Pearson are chosen by name: QSFlatCosine, QSFlatPearson");
    const FlatMetric leafMetric = spec.metricByName ? spec.metric : fromFaissMetric(metric);

    if (comma == std::string::npos)
        return checkedResult(std::unique_ptr<faiss::Index>(makeLeaf(d, spec, leafMetric)),
                             description);

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

    FAISS_THROW_IF_NOT_FMT(flat->d > 0,
                           "index_factory: the prefix '%s' of '%s' leaves %d dimensions for '%s' "
                           "(it must leave > 0)",
                           prefix.c_str(), description, int(flat->d), last.c_str());
    std::unique_ptr<faiss::Index> leaf(makeLeaf(int(flat->d), spec, leafMetric));
    faiss::Index** slot = innerSlot(parent);
    delete *slot;  // the placeholder: nothing else refers to it
    *slot = leaf.release();
    setOwnsInner(parent);
    syncIsTrained(root.get());
    return checkedResult(std::move(root), description);
}

}  // namespace faiss_ext
