// Pieces shared by the two schedules of gnndBuildFromFile (GnndOutOfCore.h):
// the all-pairs shard schedule (OutOfCoreBuilder.h) and the partitioned one
// (PartitionedBuild.cpp): the vector file, outputs written under temporary
// names, the host and device memory budgets, and the graph writer and reader.
#pragma once

#include "faiss_ext/gpu/GnndOutOfCoreOptions.h"
#include "faiss_ext/gpu/GpuResources.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

using Clock = std::chrono::steady_clock;

/// Seconds since t.
double since(Clock::time_point t);

struct FileCloser {
    void operator()(FILE* f) const {
        if (f) std::fclose(f);
    }
};
using File = std::unique_ptr<FILE, FileCloser>;

/// Opens path with fopen's mode; throws "<who>: cannot open ..." on failure.
File openFile(const std::string& path, const char* mode, const char* who = "gnndBuildFromFile");

/// Size in bytes of an open file (the position is reset to the start).
int64_t fileSize(FILE* f);

/// The directory part of a file path ("." when there is none).
std::string dirOf(const std::string& path);

/// Creates and removes a probe file in dir: throws when dir is not writable.
void probeDir(const std::string& dir);

/// List length of a file build when the config leaves it to us: twice k,
/// rounded up to a multiple of 32, at most the largest (GnndFileBuildOptions).
int fileBuildDegree(int k);

/// Host memory available now: MemAvailable of /proc/meminfo, else the free
/// physical pages.
size_t availableHostBytes();

/// The host budget of a build: options.hostMemoryBytes, or (-1) half of
/// the host memory available now.
size_t hostBudget(int64_t hostMemoryBytes);

/// A vector file: n rows of d floats, fvecs or raw. The constructor checks
/// the layout (throws on a bad or truncated file).
class VectorFile {
public:
    VectorFile(const std::string& path, VectorFileFormat fmt, int d);
    /// n x d rows held by the caller, in host or device memory, read in
    /// place (GpuKnnGraphGNND::add's partitioned build); they must outlive
    /// this object and stay unchanged.
    VectorFile(const float* rows, int64_t n, int d);
    int64_t n() const { return n_; }
    int d() const { return d_; }
    /// The file's path ("" for rows in memory).
    const std::string& path() const { return path_; }

    /// Rows [r0, r0 + m) into out (m x d, host memory).
    void read(int64_t r0, int64_t m, float* out) const;

private:
    void readFvecs_(FILE* f, int64_t r0, int64_t m, float* out) const;
    void readMemory_(int64_t r0, int64_t m, float* out) const;

    std::string path_;
    VectorFileFormat fmt_ = VectorFileFormat::RawFloat32;
    const float* rows_ = nullptr;  ///< rows in memory (else a file)
    bool rowsOnDevice_ = false;
    int64_t n_ = 0;
    int d_ = 0;
};

/// Device memory one worker may use on each of `devices` (entries may
/// repeat: workers sharing a device share its memory): the smallest over
/// the entries of min(device memory limit, free memory / 2) per worker
/// (*resident) and of the temporary memory available per worker (*temp).
void deviceBudget(const std::vector<int>& devices,
                  const std::vector<std::shared_ptr<GpuResources>>& res, size_t* resident,
                  size_t* temp);

/// Runs fn(w) for every entry w of devices, each on its own thread with its
/// device current; on an error sets *failed (so that the others stop at
/// their next step) and rethrows the first error after all have joined.
void runOnWorkers(const std::vector<int>& devices, std::atomic<bool>* failed,
                  const std::function<void(size_t)>& fn);

/// An output file written under a temporary name beside its final one and
/// renamed when complete (commit); removed if it never is.
class PendingOutput {
public:
    explicit PendingOutput(const std::string& path);
    ~PendingOutput();
    FILE* get() const { return file_.get(); }
    /// Closes the file (checking that every byte reached it) and gives it its name.
    void commit();

private:
    std::string path_, temp_;
    File file_;
    bool committed_ = false;
};

/// The graph (ivecs) and optionally the distances (fvecs) of a file build,
/// written row by row under temporary names; commit() renames both (the
/// distances first: the graph's name appears only when all is written).
class GraphWriter {
public:
    /// k: the output degree; innerProduct: distances are negated products
    /// (written as the products).
    GraphWriter(const std::string& graphPath, const std::string& distancesPath, int k,
                bool innerProduct);
    /// Appends rows: the first k of each list of `stride` entries.
    void write(const int* ids, const float* dists, int64_t rows, int stride);
    void commit();

private:
    std::string graphPath_, distancesPath_;
    PendingOutput graph_;
    std::unique_ptr<PendingOutput> dists_;
    int k_;
    bool ip_;
    std::vector<int32_t> row_;
    std::vector<float> drow_;
};

/// readGraphIvecs (GnndOutOfCore.h): an ivecs graph file as GraphWriter
/// writes it (n rows of the same k ids).
std::vector<int> readGraphFile(const std::string& path, int64_t* n, int* k);

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
