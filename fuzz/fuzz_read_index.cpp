// libFuzzer target: faiss_ext::deserialize_index over arbitrary bytes
// (docs/fuzzing.md). The contract of index_io.h: corrupt or truncated input
// throws faiss::FaissException, nothing crashes. So here:
//   - FaissException: fine (the input was rejected);
//   - any other exception escapes and libFuzzer reports it (a bug: the
//     reader must turn what FAISS throws into FaissException);
//   - ASan / UBSan reports, timeouts and out-of-memory are bugs too.
// Two targets are built from this file (fuzz/CMakeLists.txt):
//   fuzz_read_index        reads with faiss_ext::IO_FLAG_CHECKED_ONLY: only
//                          what faiss_ext parses and checks itself (the one
//                          run by fuzz/run.sh and CI);
//   fuzz_read_index_faiss  (FX_FUZZ_ALL_FORMATS) also hands FAISS's fourccs to
//                          FAISS 1.7.3's readers, which crash on some forged
//                          files (division by zero, ...): for exploring, with
//                          the findings listed in docs/fuzzing.md.
// An input that reads is exercised further: it must serialize, read back
// and serialize to the same bytes, and an index made only of the types our
// reader parses itself (and checks: flat, IDMap, PreTransform with our
// transforms, NNDescentFlat, IndexBiLevelLSH) must answer a small search.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <typeinfo>
#include <vector>

#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/RowCenteringTransform.h"
#include "faiss_ext/index_io.h"

namespace {

#ifdef FX_FUZZ_ALL_FORMATS
constexpr int kIoFlags = 0;
#else
constexpr int kIoFlags = faiss_ext::IO_FLAG_CHECKED_ONLY;
#endif

/// k of the search of an index that read.
constexpr int64_t kSearchK = 3;

/// Whether every node of the tree is of a type faiss_ext's reader parses
/// and checks itself (so that searching it must be safe).
bool onlyCheckedTypes(const faiss::Index* idx) {
    const std::type_info& t = typeid(*idx);
    if (t == typeid(faiss::IndexFlat) || t == typeid(faiss::IndexFlatL2) ||
        t == typeid(faiss::IndexFlatIP) || t == typeid(faiss_ext::IndexBiLevelLSH))
        return true;
    if (t == typeid(faiss::IndexIDMap) || t == typeid(faiss::IndexIDMap2))
        return onlyCheckedTypes(static_cast<const faiss::IndexIDMap*>(idx)->index);
    if (t == typeid(faiss::IndexNNDescentFlat)) {
        // FAISS 1.7.3's NNDescent::search has bugs no file check can avoid
        // (docs/fuzzing.md): it throws inside an OpenMP region when the graph
        // is not built (std::terminate), divides by zero when ntotal equals
        // max(search_L, k), and follows the -1 entries of graphs with fewer
        // than K + 1 nodes. Only graphs clear of them are searched.
        auto nd = static_cast<const faiss::IndexNNDescentFlat*>(idx);
        const faiss::NNDescent& nn = nd->nndescent;
        if (!nn.has_built || nn.ntotal <= std::max<int64_t>(nn.search_L, kSearchK)) return false;
        for (int id : nn.final_graph)
            if (id < 0) return false;
        return onlyCheckedTypes(nd->storage);
    }
    if (t == typeid(faiss::IndexPreTransform)) {
        auto pt = static_cast<const faiss::IndexPreTransform*>(idx);
        for (const faiss::VectorTransform* vt : pt->chain) {
            const std::type_info& vtt = typeid(*vt);
            if (vtt != typeid(faiss_ext::RowCenteringTransform) &&
                vtt != typeid(faiss::NormalizationTransform))
                return false;
        }
        return onlyCheckedTypes(pt->index);
    }
    return false;
}

/// Whether an IndexIDMap in the tree maps the ids (so any id may come back).
bool mapsIds(const faiss::Index* idx) {
    if (dynamic_cast<const faiss::IndexIDMap*>(idx)) return true;
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(idx)) return mapsIds(pt->index);
    return false;
}

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_read_index: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<faiss::Index> idx;
    try {
        idx.reset(faiss_ext::deserialize_index(data, size, kIoFlags));
    } catch (const faiss::FaissException&) {
        return 0;  // rejected: what a corrupt file must do
    }
    if (!idx) fail("deserialize_index returned null without throwing");

    // What was read writes back, reads back and writes the same bytes again.
    std::vector<uint8_t> once, twice;
    try {
        once = faiss_ext::serialize_index(idx.get());
    } catch (const faiss::FaissException& e) {
        std::fprintf(stderr, "%s\n", e.what());
        fail("an index that read cannot be written");
    }
    try {
        std::unique_ptr<faiss::Index> back(faiss_ext::deserialize_index(once, kIoFlags));
        twice = faiss_ext::serialize_index(back.get());
    } catch (const faiss::FaissException& e) {
        std::fprintf(stderr, "%s\n", e.what());
        fail("the bytes written for an index that read do not read back");
    }
    if (once != twice) fail("write(read(write(read(x)))) != write(read(x))");

    // A tiny search of the indexes our reader checks (it throws or answers).
    if (idx->is_trained && idx->d > 0 && idx->d <= 4096 && onlyCheckedTypes(idx.get())) {
        const int64_t nq = 2, k = kSearchK;
        std::vector<float> q(size_t(nq) * size_t(idx->d));
        for (size_t i = 0; i < q.size(); ++i) q[i] = float(int(i % 7) - 3) * 0.25f;
        std::vector<float> D(nq * k);
        std::vector<int64_t> I(nq * k);
        try {
            idx->search(nq, q.data(), k, D.data(), I.data());
        } catch (const faiss::FaissException&) {
            return 0;
        }
        if (!mapsIds(idx.get()))  // an id map may hold any ids
            for (int64_t i : I)
                if (i < -1 || i >= idx->ntotal) fail("search returned an id out of range");
    }
    return 0;
}
