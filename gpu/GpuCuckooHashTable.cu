// GpuCuckooHashTable (see GpuCuckooHashTable.h): the public face of the
// engine in impl/lsh/DeviceCuckooTable.cu.
#include "faiss_ext/gpu/GpuCuckooHashTable.h"

#include "faiss_ext/gpu/impl/lsh/DeviceCuckooTable.h"

namespace faiss_ext {
namespace gpu {

GpuCuckooHashTable::GpuCuckooHashTable() : table_(new lsh_impl::DeviceCuckooTable()) {}

GpuCuckooHashTable::~GpuCuckooHashTable() = default;

void GpuCuckooHashTable::build(const uint64_t* deviceKeys, size_t n, int subTables,
                               float maxLoad, uint64_t seed, cudaStream_t stream,
                               int maxAttempts) {
    table_->build(deviceKeys, n, subTables, maxLoad, seed, stream, maxAttempts);
}

void GpuCuckooHashTable::buildFromHost(const uint64_t* keys, size_t n, int subTables,
                                       float maxLoad, uint64_t seed, cudaStream_t stream,
                                       int maxAttempts) {
    table_->buildFromHost(keys, n, subTables, maxLoad, seed, stream, maxAttempts);
}

void GpuCuckooHashTable::find(const uint64_t* deviceKeys, size_t n, int64_t* deviceOut,
                              cudaStream_t stream) const {
    table_->find(deviceKeys, n, deviceOut, stream);
}

std::vector<int64_t> GpuCuckooHashTable::findHost(const std::vector<uint64_t>& keys,
                                                  cudaStream_t stream) const {
    return table_->findHost(keys, stream);
}

size_t GpuCuckooHashTable::countRepeatedKeys(const uint64_t* deviceKeys, size_t n,
                                             cudaStream_t stream) {
    return lsh_impl::DeviceCuckooTable::countRepeatedKeys(deviceKeys, n, stream);
}

lsh::CuckooView GpuCuckooHashTable::view() const { return table_->view(); }

size_t GpuCuckooHashTable::size() const { return table_->size(); }

size_t GpuCuckooHashTable::capacity() const { return table_->capacity(); }

double GpuCuckooHashTable::load() const { return table_->load(); }

int GpuCuckooHashTable::attempts() const { return table_->attempts(); }

int GpuCuckooHashTable::growths() const { return table_->growths(); }

void GpuCuckooHashTable::clear() { table_->clear(); }

void GpuCuckooHashTable::swap(GpuCuckooHashTable& o) noexcept { table_.swap(o.table_); }

}  // namespace gpu
}  // namespace faiss_ext
