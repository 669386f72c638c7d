#include "TestUtils.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>

namespace faiss_ext {
namespace test {

std::vector<float> randomVectors(int64_t n, int d, uint64_t seed, float lo, float hi) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(size_t(n) * d);
    for (auto& x : v) x = u(rng);
    return v;
}

void syncAfterHostCopy() {
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
        throw std::runtime_error(std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(err));
}

std::vector<float> clusteredVectors(int64_t n, int d, int clusters, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> centres(size_t(clusters) * d);
    for (auto& x : centres) x = 4.f * g(rng);
    std::uniform_int_distribution<int> pick(0, clusters - 1);
    std::vector<float> v(size_t(n) * d);
    for (int64_t i = 0; i < n; ++i) {
        int c = pick(rng);
        for (int j = 0; j < d; ++j) v[size_t(i) * d + j] = centres[size_t(c) * d + j] + g(rng);
    }
    return v;
}

int gpuCount() {
    return faiss_ext::gpu::getNumDevices();
}

bool haveGpu() {
    static const bool have = faiss_ext::gpu::getNumDevices() > 0;
    return have;
}

bool smallTests() {
    static const bool small = [] {
        const char* v = std::getenv("FAISS_EXT_TEST_SMALL");
        const bool on = v && *v && std::string(v) != "0";
        if (on) std::fprintf(stderr, "[faiss_ext tests] FAISS_EXT_TEST_SMALL=%s: sanitizer-sized inputs\n", v);
        return on;
    }();
    return small;
}

const TestPart& testPart() {
    static const TestPart part = [] {
        TestPart p;
        const char* v = std::getenv("FAISS_EXT_TEST_PART");
        if (!v || !*v) return p;
        int i = -1, n = -1;
        char tail = 0;
        if (std::sscanf(v, "%d/%d%c", &i, &n, &tail) != 2 || n < 1 || i < 0 || i >= n)
            throw std::invalid_argument(std::string("FAISS_EXT_TEST_PART=") + v +
                                        ": expected P/N with 0 <= P < N");
        p.index = i;
        p.count = n;
        std::fprintf(stderr, "[faiss_ext tests] FAISS_EXT_TEST_PART=%d/%d: this part's units only\n",
                     i, n);
        return p;
    }();
    return part;
}

namespace {
/// In a sanitizer run (a part, or sanitizer-sized), prints "[faiss_ext
/// tests] <what> at +T s", T the seconds since `since`.
void markTime(std::chrono::steady_clock::time_point since, const std::string& what) {
    if (testPart().count == 1 && !smallTests()) return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    std::fprintf(stderr, "[faiss_ext tests] %s at +%.1f s\n", what.c_str(), t);
}
}  // namespace

bool PartUnits::next() {
    const TestPart& p = part_;
    const int64_t u = u_++;
    if (u % p.count != p.index) return false;
    markTime(start_, "unit " + std::to_string(u) + " starts");
    return true;
}

void testPhase(const char* what) {
    static const auto start = std::chrono::steady_clock::now();
    markTime(start, what);
}

bool PartUnits::anyOfNext(int64_t count) const {
    const TestPart& p = part_;
    if (count <= 0) return false;
    // the first unit numbered u_ or later that is this part's
    const int64_t first = u_ + ((p.index - u_ % p.count) % p.count + p.count) % p.count;
    return first < u_ + count;
}

std::string dataDir() {
    if (const char* env = std::getenv("FAISS_EXT_DATA_DIR")) return env;
#ifdef FAISS_EXT_DATA_DIR
    struct stat st;
    if (stat(FAISS_EXT_DATA_DIR, &st) == 0) return FAISS_EXT_DATA_DIR;
#endif
    return "";
}

std::vector<float> readFvecs(const std::string& path, int* d) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<float> out;
    int32_t dim = 0;
    while (f.read(reinterpret_cast<char*>(&dim), 4)) {
        if (dim <= 0 || dim > (1 << 20)) throw std::runtime_error("bad fvecs record in " + path);
        size_t off = out.size();
        out.resize(off + dim);
        if (!f.read(reinterpret_cast<char*>(out.data() + off), size_t(dim) * 4))
            throw std::runtime_error("truncated fvecs file " + path);
        *d = dim;
    }
    return out;
}

std::string compareKnn(int64_t nq, int64_t k, const float* D, const int64_t* I,
                       const float* refD, const int64_t* refI, bool larger_is_better,
                       float relTol, float absTol) {
    auto close = [&](float a, float b) {
        if (std::isinf(a) || std::isinf(b)) return a == b;
        return std::fabs(a - b) <= absTol + relTol * std::max(std::fabs(a), std::fabs(b));
    };
    for (int64_t q = 0; q < nq; ++q) {
        const float* d = D + q * k;
        const int64_t* id = I + q * k;
        const float* rd = refD + q * k;
        const int64_t* rid = refI + q * k;
        std::set<int64_t> seen;
        for (int64_t j = 0; j < k; ++j) {
            std::ostringstream msg;
            msg << "query " << q << " rank " << j << ": got (" << id[j] << ", " << d[j]
                << ") expected (" << rid[j] << ", " << rd[j] << ")";
            if ((id[j] < 0) != (rid[j] < 0)) return msg.str() + " [padding differs]";
            if (rid[j] < 0) continue;
            if (!close(d[j], rd[j])) return msg.str() + " [distance differs]";
            if (!seen.insert(id[j]).second) return msg.str() + " [duplicate id]";
            if (j > 0) {
                bool sorted = larger_is_better ? d[j] <= d[j - 1] : d[j] >= d[j - 1];
                if (!sorted) return msg.str() + " [not sorted]";
            }
            if (id[j] != rid[j]) {
                // Allowed only for a tie: the reference must hold id[j] at a
                // rank whose distance is close, or id[j] lies beyond the
                // reference list with a distance tied with its last entry.
                bool ok = false;
                for (int64_t t = 0; t < k; ++t) {
                    if (rid[t] == id[j]) {
                        ok = close(rd[t], d[j]);
                        break;
                    }
                }
                if (!ok) ok = close(d[j], rd[k - 1]);
                if (!ok) return msg.str() + " [id differs, not a tie]";
            }
        }
    }
    return "";
}

TempFile::TempFile(const std::string& tag) {
    std::string name = "/tmp/faiss_ext_" + tag + "_XXXXXX";
    std::vector<char> buf(name.begin(), name.end());
    buf.push_back('\0');
    const int fd = mkstemp(buf.data());
    if (fd >= 0) close(fd);
    path = buf.data();
}

TempFile::~TempFile() { std::remove(path.c_str()); }

}  // namespace test
}  // namespace faiss_ext
