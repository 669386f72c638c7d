// Copying index trees through FAISS's wrappers: see CpuTwin.h.
#include "faiss_ext/CpuTwin.h"

#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/IndexReplicas.h>
#include <faiss/IndexShards.h>
#include <faiss/clone_index.h>
#include <faiss/impl/FaissAssert.h>

#include <memory>

#include "faiss_ext/CpuConvertible.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/IndexNNDescentFlatChecked.h"
#include "faiss_ext/RowCenteringTransform.h"

namespace faiss_ext {

namespace {

/// Copies the faiss::Index fields a wrapper shares with what it wraps.
void copyIndexFields(const faiss::Index* src, faiss::Index* dst) {
    dst->d = src->d;
    dst->ntotal = src->ntotal;
    dst->verbose = src->verbose;
    dst->is_trained = src->is_trained;
    dst->metric_type = src->metric_type;
    dst->metric_arg = src->metric_arg;
}

/// Rebuilds an IndexIDMap / IndexIDMap2 around a copy of its index.
template <class IDMapT>
IDMapT* cloneIDMap(const IDMapT* src, const IndexNodeConverter& convert) {
    FAISS_THROW_IF_NOT_MSG(src->index, "cloneIndexTree: IndexIDMap with no index");
    std::unique_ptr<faiss::Index> inner(cloneIndexTree(src->index, convert));
    auto out = std::make_unique<IDMapT>();
    copyIndexFields(src, out.get());
    out->id_map = src->id_map;
    out->index = inner.release();
    out->own_fields = true;
    return out.release();
}

/// Rebuilds an IndexShards / IndexReplicas around copies of its members.
template <class ThreadedT>
ThreadedT* cloneThreaded(const ThreadedT* src, std::unique_ptr<ThreadedT> out,
                         const IndexNodeConverter& convert) {
    out->own_fields = true;
    for (int i = 0; i < src->count(); ++i) {
        std::unique_ptr<faiss::Index> sub(cloneIndexTree(src->at(i), convert));
        out->addIndex(sub.get());
        sub.release();
    }
    out->metric_type = src->metric_type;
    out->metric_arg = src->metric_arg;
    out->is_trained = src->is_trained;
    return out.release();
}

/// A copy of an IndexNNDescentFlat (the twin of GpuKnnGraphGNND) with its
/// graph and a copy of its storage. FAISS 1.7.3's clone_index returns a plain
/// IndexNNDescent for it, which faiss::write_index refuses.
faiss::IndexNNDescentFlat* cloneNNDescentFlat(const faiss::IndexNNDescentFlat* src) {
    FAISS_THROW_IF_NOT_MSG(src->storage, "cloneIndexTree: IndexNNDescentFlat with no storage");
    std::unique_ptr<faiss::Index> storage(faiss::clone_index(src->storage));
    auto out = std::make_unique<IndexNNDescentFlatChecked>();
    if (out->own_fields) delete out->storage;
    copyIndexFields(src, out.get());
    out->nndescent = src->nndescent;
    out->storage = storage.release();
    out->own_fields = true;
    return out.release();
}

}  // namespace

faiss::VectorTransform* cloneVectorTransform(const faiss::VectorTransform* vt) {
    FAISS_THROW_IF_NOT_MSG(vt, "cloneVectorTransform: null transform");
    if (auto rc = dynamic_cast<const RowCenteringTransform*>(vt)) {
        return new RowCenteringTransform(*rc);
    }
    // FAISS 1.7.3's Cloner lacks these two
    if (auto nt = dynamic_cast<const faiss::NormalizationTransform*>(vt)) {
        return new faiss::NormalizationTransform(*nt);
    }
    if (auto ct = dynamic_cast<const faiss::CenteringTransform*>(vt)) {
        return new faiss::CenteringTransform(*ct);
    }
    faiss::Cloner cloner;
    return cloner.clone_VectorTransform(vt);
}

bool isWalkedWrapper(const faiss::Index* index) {
    return dynamic_cast<const faiss::IndexIDMap*>(index) ||
           dynamic_cast<const faiss::IndexPreTransform*>(index) ||
           dynamic_cast<const faiss::IndexShards*>(index) ||
           dynamic_cast<const faiss::IndexReplicas*>(index);
}

faiss::Index* cloneIndexTree(const faiss::Index* index, const IndexNodeConverter& convert) {
    FAISS_THROW_IF_NOT_MSG(index, "cloneIndexTree: null index");
    if (convert) {
        if (faiss::Index* replaced = convert(index)) return replaced;
    }
    // IndexIDMap2 derives from IndexIDMap: test it first
    if (auto m2 = dynamic_cast<const faiss::IndexIDMap2*>(index)) {
        faiss::IndexIDMap2* out = cloneIDMap(m2, convert);
        out->construct_rev_map();
        return out;
    }
    if (auto m = dynamic_cast<const faiss::IndexIDMap*>(index)) {
        return cloneIDMap(m, convert);
    }
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) {
        FAISS_THROW_IF_NOT_MSG(pt->index, "cloneIndexTree: IndexPreTransform with no index");
        auto out = std::make_unique<faiss::IndexPreTransform>();
        out->own_fields = true;
        copyIndexFields(pt, out.get());
        out->chain.reserve(pt->chain.size());
        for (const faiss::VectorTransform* vt : pt->chain) {
            out->chain.push_back(cloneVectorTransform(vt));
        }
        out->index = cloneIndexTree(pt->index, convert);
        return out.release();
    }
    if (auto sh = dynamic_cast<const faiss::IndexShards*>(index)) {
        return cloneThreaded(
            sh, std::make_unique<faiss::IndexShards>(sh->d, false, sh->successive_ids), convert);
    }
    if (auto rep = dynamic_cast<const faiss::IndexReplicas*>(index)) {
        return cloneThreaded(rep, std::make_unique<faiss::IndexReplicas>(rep->d, true), convert);
    }
    if (auto nnd = dynamic_cast<const faiss::IndexNNDescentFlat*>(index)) {
        return cloneNNDescentFlat(nnd);
    }
    if (auto lsh = dynamic_cast<const IndexBiLevelLSH*>(index)) {
        // ours: FAISS's Cloner does not know it; a value copy (model,
        // vectors, tables)
        return lsh->readLocked([&] { return new IndexBiLevelLSH(*lsh); });
    }
    return faiss::clone_index(index);
}

faiss::Index* cloneToCpu(const faiss::Index* index) {
    return cloneIndexTree(index, [](const faiss::Index* node) -> faiss::Index* {
        auto conv = dynamic_cast<const CpuConvertible*>(node);
        if (!conv) return nullptr;
        faiss::Index* twin = conv->copyToCpuIndex();
        FAISS_THROW_IF_NOT_MSG(twin, "copyToCpuIndex returned a null index");
        return twin;
    });
}

bool containsCpuConvertible(const faiss::Index* index) {
    if (!index) return false;
    if (dynamic_cast<const CpuConvertible*>(index)) return true;
    if (auto m = dynamic_cast<const faiss::IndexIDMap*>(index)) {
        return containsCpuConvertible(m->index);
    }
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) {
        return containsCpuConvertible(pt->index);
    }
    if (auto sh = dynamic_cast<const faiss::IndexShards*>(index)) {
        for (int i = 0; i < sh->count(); ++i) {
            if (containsCpuConvertible(sh->at(i))) return true;
        }
        return false;
    }
    if (auto rep = dynamic_cast<const faiss::IndexReplicas*>(index)) {
        for (int i = 0; i < rep->count(); ++i) {
            if (containsCpuConvertible(rep->at(i))) return true;
        }
        return false;
    }
    return false;
}

faiss::Index* twinWithQueryPreparation(faiss::Index* twin, FlatMetric m) {
    if (!isPreparedMetric(m)) return twin;
    auto pt = new faiss::IndexPreTransform(twin);
    pt->own_fields = true;
    // chain: [RowCenteringTransform (Pearson),] NormalizationTransform
    pt->prepend_transform(new faiss::NormalizationTransform(twin->d, 2.0f));
    if (m == FlatMetric::Pearson) pt->prepend_transform(new RowCenteringTransform(twin->d));
    pt->ntotal = twin->ntotal;
    return pt;
}

}  // namespace faiss_ext
