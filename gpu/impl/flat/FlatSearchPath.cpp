#include "faiss_ext/gpu/impl/flat/FlatSearchPath.h"

#include <faiss/impl/FaissAssert.h>

namespace faiss_ext {
namespace gpu {

namespace {

bool specialStorage(const FlatSearchShape& s) { return !s.onDevice || s.selfExcluded; }

bool fusedFits(const FlatSearchShape& s) {
    return !specialStorage(s) && s.nq <= kFewQueryMaxQueries && s.kk <= kFewQueryMaxK;
}

bool radixFits(const FlatSearchShape& s) { return !specialStorage(s) && s.radixRowsFit >= 1; }

}  // namespace

const char* flatSearchPathName(FlatSearchPath p) {
    switch (p) {
        case FlatSearchPath::Auto: return "auto";
        case FlatSearchPath::Tiled: return "tiled";
        case FlatSearchPath::FusedFewQuery: return "fused-few-query";
        case FlatSearchPath::RadixLargeK: return "radix-large-k";
    }
    return "unknown";
}

FlatSearchPath chooseFlatSearchPath(const FlatSearchShape& s) {
    // Host storage streams tiles over PCIe and k-NN graphs mask self pairs
    // inside the tiles: both stay on the tiled path.
    if (specialStorage(s) || s.nq < 1 || s.nb < 1) return FlatSearchPath::Tiled;
    // Few queries: the tiled path runs one selection block per query over
    // the whole corpus (nq blocks cannot fill the GPU); the fused kernel
    // spreads the corpus over every multiprocessor and reads it once.
    if (fusedFits(s)) return FlatSearchPath::FusedFewQuery;
    // Large k, few queries: radix select (see kRadixMinK).
    if (s.kk >= kRadixMinK && s.nq <= kRadixMaxQueries && radixFits(s)) {
        return FlatSearchPath::RadixLargeK;
    }
    return FlatSearchPath::Tiled;
}

FlatSearchPath resolveFlatSearchPath(FlatSearchPath requested, const FlatSearchShape& s) {
    switch (requested) {
        case FlatSearchPath::Auto:
            return chooseFlatSearchPath(s);
        case FlatSearchPath::Tiled:
            return requested;
        case FlatSearchPath::FusedFewQuery:
            FAISS_THROW_IF_NOT_FMT(fusedFits(s),
                                   "flat search path fused-few-query cannot run nq %lld, k %lld "
                                   "(at most %lld queries and k %lld, vectors on the device, no "
                                   "self exclusion)", (long long)s.nq, (long long)s.kk,
                                   (long long)kFewQueryMaxQueries, (long long)kFewQueryMaxK);
            return requested;
        case FlatSearchPath::RadixLargeK:
            FAISS_THROW_IF_NOT_FMT(radixFits(s),
                                   "flat search path radix-large-k cannot run nq %lld, k %lld over "
                                   "%lld vectors (vectors on the device, no self exclusion, and "
                                   "temporary memory for one full distance row)", (long long)s.nq,
                                   (long long)s.kk, (long long)s.nb);
            return requested;
    }
    FAISS_THROW_FMT("unknown flat search path %d (auto 0, tiled 1, fused-few-query 2, "
                    "radix-large-k 3)", int(requested));
}

}  // namespace gpu
}  // namespace faiss_ext
