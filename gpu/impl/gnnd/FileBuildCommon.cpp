#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"

#include "faiss_ext/gpu/impl/gnnd/Gnnd.h"
#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

File openFile(const std::string& path, const char* mode, const char* who) {
    File f(std::fopen(path.c_str(), mode));
    FAISS_THROW_IF_NOT_FMT(f, "%s: cannot open '%s' (%s): %s", who, path.c_str(),
                           mode[0] == 'r' ? "read" : "write", std::strerror(errno));
    return f;
}

int64_t fileSize(FILE* f) {
    std::fseek(f, 0, SEEK_END);
    int64_t s = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    return s;
}

std::string dirOf(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

void probeDir(const std::string& dir) {
    char name[112];
    std::snprintf(name, sizeof(name), "/.gnnd_probe_%d_%p", int(getpid()), (const void*)&dir);
    const std::string probe = dir + name;
    File f = openFile(probe, "wb");
    f.reset();
    std::remove(probe.c_str());
}

int fileBuildDegree(int k) {
    return std::max(std::min(kMaxBuildDegree, (2 * k + 31) / 32 * 32), (k + 31) / 32 * 32);
}

size_t availableHostBytes() {
    if (FILE* f = std::fopen("/proc/meminfo", "r")) {
        char line[256];
        unsigned long long kb = 0;
        bool found = false;
        while (std::fgets(line, sizeof(line), f)) {
            if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                found = true;
                break;
            }
        }
        std::fclose(f);
        if (found) return size_t(kb) * 1024;
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

size_t hostBudget(int64_t hostMemoryBytes) {
    return hostMemoryBytes < 0 ? availableHostBytes() / 2 : size_t(hostMemoryBytes);
}

// ---- VectorFile ----

VectorFile::VectorFile(const std::string& path, VectorFileFormat fmt, int d)
        : path_(path), fmt_(fmt) {
    File f = openFile(path, "rb");
    int64_t size = fileSize(f.get());
    if (fmt == VectorFileFormat::Fvecs) {
        int32_t d0 = 0;
        FAISS_THROW_IF_NOT_FMT(size >= 4 && std::fread(&d0, 4, 1, f.get()) == 1,
                               "gnndBuildFromFile: '%s' is empty or unreadable", path.c_str());
        FAISS_THROW_IF_NOT_FMT(d0 > 0 && d0 < (1 << 20),
                               "gnndBuildFromFile: '%s' is not an fvecs file (first "
                               "dimension %d)",
                               path.c_str(), d0);
        FAISS_THROW_IF_NOT_FMT(d <= 0 || d == d0,
                               "gnndBuildFromFile: '%s' holds d = %d vectors, d = %d was given",
                               path.c_str(), d0, d);
        d_ = d0;
        int64_t row = 4 + 4 * int64_t(d_);
        FAISS_THROW_IF_NOT_FMT(size % row == 0,
                               "gnndBuildFromFile: '%s' is truncated or corrupt: %lld bytes "
                               "is not a multiple of the %lld-byte fvecs row",
                               path.c_str(), (long long)size, (long long)row);
        n_ = size / row;
    } else {
        FAISS_THROW_IF_NOT_FMT(d > 0, "gnndBuildFromFile: raw float32 files need d > 0 (got %d)",
                               d);
        d_ = d;
        int64_t row = 4 * int64_t(d_);
        FAISS_THROW_IF_NOT_FMT(size % row == 0,
                               "gnndBuildFromFile: '%s' is truncated or corrupt: %lld bytes "
                               "is not a multiple of d * 4 = %lld",
                               path.c_str(), (long long)size, (long long)row);
        n_ = size / row;
    }
}

VectorFile::VectorFile(const float* rows, int64_t n, int d) : rows_(rows), n_(n), d_(d) {
    FAISS_THROW_IF_NOT_FMT(rows && n >= 0 && d > 0,
                           "VectorFile: bad rows in memory (%p, n = %lld, d = %d)",
                           (const void*)rows, (long long)n, d);
    rowsOnDevice_ = isDevicePointer(rows);
}

void VectorFile::readMemory_(int64_t r0, int64_t m, float* out) const {
    const float* src = rows_ + size_t(r0) * d_;
    const size_t bytes = sizeof(float) * size_t(m) * d_;
    if (rowsOnDevice_) {
        FAISS_EXT_CUDA_CHECK(cudaMemcpy(out, src, bytes, cudaMemcpyDefault));
    } else {
        std::memcpy(out, src, bytes);
    }
}

void VectorFile::read(int64_t r0, int64_t m, float* out) const {
    FAISS_THROW_IF_NOT_FMT(r0 >= 0 && m >= 0 && r0 + m <= n_,
                           "VectorFile: rows [%lld, %lld) of %lld", (long long)r0,
                           (long long)(r0 + m), (long long)n_);
    if (rows_) {
        readMemory_(r0, m, out);
        return;
    }
    File f = openFile(path_, "rb");
    if (fmt_ == VectorFileFormat::Fvecs) {
        readFvecs_(f.get(), r0, m, out);
        return;
    }
    FAISS_THROW_IF_NOT_FMT(fseeko(f.get(), off_t(r0 * 4 * d_), SEEK_SET) == 0,
                           "gnndBuildFromFile: cannot seek in '%s'", path_.c_str());
    size_t got = std::fread(out, sizeof(float) * d_, size_t(m), f.get());
    FAISS_THROW_IF_NOT_FMT(got == size_t(m), "gnndBuildFromFile: short read in '%s'",
                           path_.c_str());
}

void VectorFile::readFvecs_(FILE* f, int64_t r0, int64_t m, float* out) const {
    const int64_t rowBytes = 4 + 4 * int64_t(d_);
    FAISS_THROW_IF_NOT_FMT(fseeko(f, off_t(r0 * rowBytes), SEEK_SET) == 0,
                           "gnndBuildFromFile: cannot seek in '%s'", path_.c_str());
    std::vector<char> buf(size_t(rowBytes) * std::min<int64_t>(m, 4096));
    for (int64_t i = 0; i < m;) {
        int64_t b = std::min<int64_t>(m - i, 4096);
        size_t got = std::fread(buf.data(), size_t(rowBytes), size_t(b), f);
        FAISS_THROW_IF_NOT_FMT(got == size_t(b), "gnndBuildFromFile: short read in '%s'",
                               path_.c_str());
        for (int64_t r = 0; r < b; ++r) {
            const char* row = buf.data() + r * rowBytes;
            int32_t dr;
            std::memcpy(&dr, row, 4);
            FAISS_THROW_IF_NOT_FMT(dr == d_,
                                   "gnndBuildFromFile: '%s' row %lld has dimension %d, "
                                   "expected %d (corrupt fvecs file)",
                                   path_.c_str(), (long long)(r0 + i + r), dr, d_);
            std::memcpy(out + (i + r) * d_, row + 4, sizeof(float) * d_);
        }
        i += b;
    }
}

// ---- device budget ----

void deviceBudget(const std::vector<int>& devices,
                  const std::vector<std::shared_ptr<GpuResources>>& res, size_t* resident,
                  size_t* temp) {
    size_t budget = SIZE_MAX, tmp = SIZE_MAX;
    for (size_t w = 0; w < devices.size(); ++w) {
        // workers sharing a device share its memory
        size_t share = size_t(std::count(devices.begin(), devices.end(), devices[w]));
        DeviceScope scope(devices[w]);
        size_t freeB = 0, totalB = 0;
        FAISS_EXT_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
        size_t lim = res[w]->getDeviceMemoryLimit(devices[w]);
        budget = std::min(budget, std::min(lim == SIZE_MAX ? lim : lim / share, freeB / 2 / share));
        tmp = std::min(tmp, res[w]->getTempMemoryAvailable(devices[w]) / share);
    }
    *resident = budget;
    *temp = tmp;
}

void runOnWorkers(const std::vector<int>& devices, std::atomic<bool>* failed,
                  const std::function<void(size_t)>& fn) {
    std::vector<std::thread> threads;
    std::exception_ptr err;
    std::mutex m;
    for (size_t w = 0; w < devices.size(); ++w) {
        threads.emplace_back([&, w] {
            try {
                DeviceScope scope(devices[w]);
                fn(w);
            } catch (...) {
                std::lock_guard<std::mutex> g(m);
                if (!err) err = std::current_exception();
                *failed = true;
            }
        });
    }
    for (auto& t : threads) t.join();
    if (err) std::rethrow_exception(err);
}

// ---- outputs ----

PendingOutput::PendingOutput(const std::string& path)
        : path_(path), temp_(path + ".partial"), file_(openFile(temp_, "wb")) {}

PendingOutput::~PendingOutput() {
    if (!committed_) {
        file_.reset();
        std::remove(temp_.c_str());
    }
}

void PendingOutput::commit() {
    FILE* f = file_.release();
    const bool closed = std::fclose(f) == 0;
    if (!closed) std::remove(temp_.c_str());
    FAISS_THROW_IF_NOT_FMT(closed, "gnndBuildFromFile: cannot write '%s' (disk full?)",
                           temp_.c_str());
    FAISS_THROW_IF_NOT_FMT(std::rename(temp_.c_str(), path_.c_str()) == 0,
                           "gnndBuildFromFile: cannot rename '%s' to '%s': %s", temp_.c_str(),
                           path_.c_str(), std::strerror(errno));
    committed_ = true;
}

GraphWriter::GraphWriter(const std::string& graphPath, const std::string& distancesPath, int k,
                         bool innerProduct)
        : graphPath_(graphPath),
          distancesPath_(distancesPath),
          graph_(graphPath),
          k_(k),
          ip_(innerProduct),
          row_(size_t(k) + 1),
          drow_(size_t(k) + 1) {
    if (!distancesPath.empty()) dists_.reset(new PendingOutput(distancesPath));
    row_[0] = k;
    std::memcpy(drow_.data(), &row_[0], 4);
}

void GraphWriter::write(const int* ids, const float* dists, int64_t rows, int stride) {
    for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(row_.data() + 1, ids + size_t(r) * stride, sizeof(int) * k_);
        FAISS_THROW_IF_NOT_FMT(std::fwrite(row_.data(), 4, row_.size(), graph_.get()) ==
                                       row_.size(),
                               "gnndBuildFromFile: cannot write '%s' (disk full?)",
                               graphPath_.c_str());
        if (!dists_) continue;
        for (int j = 0; j < k_; ++j) {
            float v = dists[size_t(r) * stride + j];
            drow_[1 + j] = ip_ ? -v : v;
        }
        FAISS_THROW_IF_NOT_FMT(std::fwrite(drow_.data(), 4, drow_.size(), dists_->get()) ==
                                       drow_.size(),
                               "gnndBuildFromFile: cannot write '%s'", distancesPath_.c_str());
    }
}

void GraphWriter::commit() {
    if (dists_) dists_->commit();
    graph_.commit();
}

std::vector<int> readGraphFile(const std::string& path, int64_t* n, int* k) {
    File f = openFile(path, "rb", "readGraphIvecs");
    int64_t size = fileSize(f.get());
    int32_t k0 = 0;
    FAISS_THROW_IF_NOT_FMT(size >= 4 && std::fread(&k0, 4, 1, f.get()) == 1,
                           "readGraphIvecs: '%s' is empty", path.c_str());
    FAISS_THROW_IF_NOT_FMT(k0 > 0 && size % (4 * (int64_t(k0) + 1)) == 0,
                           "readGraphIvecs: '%s' is not an ivecs file of equal rows", path.c_str());
    int64_t rows = size / (4 * (int64_t(k0) + 1));
    std::fseek(f.get(), 0, SEEK_SET);
    std::vector<int> out(size_t(rows) * k0);
    std::vector<int32_t> row(size_t(k0) + 1);
    for (int64_t r = 0; r < rows; ++r) {
        FAISS_THROW_IF_NOT_FMT(std::fread(row.data(), 4, row.size(), f.get()) == row.size() &&
                                       row[0] == k0,
                               "readGraphIvecs: '%s' row %lld is corrupt", path.c_str(),
                               (long long)r);
        std::memcpy(out.data() + size_t(r) * k0, row.data() + 1, sizeof(int) * k0);
    }
    if (n) *n = rows;
    if (k) *k = k0;
    return out;
}

}  // namespace gnnd

// the names of GnndOutOfCoreOptions.h's enums (as addBuildName, GnndEngine.cpp)

const char* fileScheduleName(GnndFileSchedule s) {
    switch (s) {
        case GnndFileSchedule::Auto: return "auto";
        case GnndFileSchedule::AllPairs: return "all-pairs";
        case GnndFileSchedule::Partitioned: return "partitioned";
    }
    return "unknown";
}

const char* clusterBuildName(GnndClusterBuild b) {
    switch (b) {
        case GnndClusterBuild::Auto: return "auto";
        case GnndClusterBuild::NNDescent: return "nn-descent";
        case GnndClusterBuild::Exact: return "exact";
    }
    return "unknown";
}

}  // namespace gpu
}  // namespace faiss_ext
