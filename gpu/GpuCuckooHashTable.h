// GPU cuckoo hash table (Alcantara et al., "Real-time parallel hashing on
// the GPU", the table of section 5.2 of Pan & Manocha 2011; docs/references.md):
// f sub-tables, one thread per key inserting in parallel with atomic
// exchanges; an evicted key moves on to the next sub-table; when any chain
// exceeds CuckooHashTable::maxChain(n) the build restarts with fresh seeds
// (after maxAttempts failures the table grows by 5%). Same hash functions and
// lookups (faiss_ext::lsh::CuckooView) as the host faiss_ext::CuckooHashTable.
// The public face of the engine in impl/lsh/DeviceCuckooTable.h.
#pragma once

#include "faiss_ext/BiLevelLSHCommon.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace faiss_ext {
namespace gpu {

namespace lsh_impl {
class DeviceCuckooTable;  // impl/lsh/DeviceCuckooTable.h
}

/// Map from distinct 64-bit keys to their index, on the current device.
class GpuCuckooHashTable {
public:
    GpuCuckooHashTable();
    ~GpuCuckooHashTable();
    GpuCuckooHashTable(const GpuCuckooHashTable&) = delete;
    GpuCuckooHashTable& operator=(const GpuCuckooHashTable&) = delete;

    /// Builds over n distinct keys in device memory (copied; duplicates
    /// throw). Parameters as CuckooHashTable::build.
    void build(const uint64_t* deviceKeys, size_t n, int subTables, float maxLoad, uint64_t seed,
               cudaStream_t stream, int maxAttempts = 16);

    /// Same from host keys.
    void buildFromHost(const uint64_t* keys, size_t n, int subTables, float maxLoad,
                       uint64_t seed, cudaStream_t stream, int maxAttempts = 16);

    /// For each of n device keys: its index, or -1 (device output).
    void find(const uint64_t* deviceKeys, size_t n, int64_t* deviceOut, cudaStream_t stream) const;

    /// Host convenience: keys in, indexes out.
    std::vector<int64_t> findHost(const std::vector<uint64_t>& keys, cudaStream_t stream) const;

    /// Number of keys among n device keys equal to the next one in sorted
    /// order (0: all distinct). Sorts a copy.
    static size_t countRepeatedKeys(const uint64_t* deviceKeys, size_t n, cudaStream_t stream);

    /// Device view for kernels (valid while this table lives).
    lsh::CuckooView view() const;

    size_t size() const;
    size_t capacity() const;
    double load() const;
    int attempts() const;
    int growths() const;
    void clear();
    /// Exchanges contents with o.
    void swap(GpuCuckooHashTable& o) noexcept;

private:
    std::unique_ptr<lsh_impl::DeviceCuckooTable> table_;  // never null
};

}  // namespace gpu
}  // namespace faiss_ext
