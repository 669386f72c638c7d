#include "faiss_ext/gpu/FlatOptions.h"

#include "faiss_ext/gpu/impl/flat/Tf32ErrorBound.h"

#include <faiss/impl/FaissAssert.h>
#include <strings.h>

#include <cstring>

namespace faiss_ext {
namespace gpu {

const char* vectorStorageName(VectorStorage s) {
    switch (s) {
        case VectorStorage::Auto:
            return "auto";
        case VectorStorage::Device:
            return "device";
        case VectorStorage::Host:
            return "host";
    }
    return "unknown";
}

const char* distancePrecisionName(DistancePrecision p) {
    switch (p) {
        case DistancePrecision::Auto:
            return "auto";
        case DistancePrecision::FP32:
            return "fp32";
        case DistancePrecision::TF32Bounded:
            return "tf32-bounded";
        case DistancePrecision::BF16x3Bounded:
            return "bf16x3-bounded";
    }
    return "unknown";
}

DistancePrecision distancePrecisionFromName(const char* name) {
    FAISS_THROW_IF_NOT_MSG(name, "distancePrecisionFromName: null name");
    for (DistancePrecision p : {DistancePrecision::Auto, DistancePrecision::FP32,
                                DistancePrecision::TF32Bounded, DistancePrecision::BF16x3Bounded}) {
        if (strcasecmp(name, distancePrecisionName(p)) == 0) return p;
    }
    FAISS_THROW_FMT("unknown distance precision '%s' (expected 'auto', 'fp32', 'tf32-bounded' or "
                    "'bf16x3-bounded')", name);
}

DistancePrecision chooseDistancePrecision(int64_t nq, int64_t nb, int64_t k, int d,
                                          FlatMetric metric, bool vectorsOnDevice) {
    (void)nb;      // measured at 100k and 1M: the GEMM's share grows with nb
    (void)metric;  // every metric is a prepared inner product or L2 (one bound)
    // Host-stored vectors too: their tiles run the bounded path with the
    // FP32 path over the staged tile as fallback (5.7x / 5.3x host FP32 at
    // k 10 / 100 on an H100, 10M x 96; docs/benchmarks.md).
    (void)vectorsOnDevice;
    const bool bounded = nq >= kAutoBoundedMinQueries &&
                         k <= kAutoBoundedMaxK && boundedSearchSupported(d);
    return bounded ? DistancePrecision::TF32Bounded : DistancePrecision::FP32;
}

}  // namespace gpu
}  // namespace faiss_ext
