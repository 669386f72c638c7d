// The shards of the all-pairs file schedule (OutOfCoreBuilder.h) between
// their build and their merges: each shard's vectors, its global lists and
// its own graph, kept in host memory when they fit the host budget, else in
// files of the work directory.
#pragma once

#include "faiss_ext/gpu/impl/gnnd/FileBuildCommon.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

/// Host copy of one shard: vectors and its canonical graph.
struct ShardData {
    int index = -1;
    int64_t n = 0;
    std::vector<float> x;
    std::vector<int> ids;      ///< global lists (canonical)
    std::vector<float> dists;
    std::vector<int> headIds;  ///< the shard's own graph (GNND), read-only
    std::vector<float> headDists;
};

/// Where the shards live between the build and the merges: in host memory
/// when they fit the budget, else in files of the work directory (the
/// global lists, and the shard's own graph after its build). Shards in
/// flight are disjoint (each merge round is a set of disjoint pairs), so a
/// shard has one owner at a time.
class ShardStore {
public:
    /// nShards shards of shardSize rows (the last one shorter) of `file`,
    /// lists of length K.
    ShardStore(const VectorFile& file, int64_t shardSize, int nShards, int K, bool inRam,
               const std::string& workDir);

    /// Whether the shards are kept in host memory (else in files).
    bool inRam() const { return inRam_; }
    /// First row of shard i.
    int64_t begin(int i) const { return int64_t(i) * S_; }
    /// Rows of shard i.
    int64_t rows(int i) const { return std::min(S_, n_ - begin(i)); }

    /// A shard's data: taken from the host store once it holds the shard,
    /// else read from the files (the vectors from the input file).
    void load(int i, ShardData& s, bool withGraph);

    /// Writes the global lists (and the shard's own graph after its build),
    /// or gives the shard back to the host store.
    void save(ShardData& s, bool withHead);

    /// The final lists of shard i: in the host store, or read from its file
    /// into `fromFile`.
    const ShardData& finalLists(int i, ShardData& fromFile) const;

    /// Removes the shard files (those that exist).
    void removeFiles() const;

private:
    std::string path_(int i, const char* kind = "graph") const;
    void readLists_(const std::string& path, size_t count, std::vector<int>& ids,
                    std::vector<float>& dists) const;
    void writeLists_(const std::string& path, const std::vector<int>& ids,
                     const std::vector<float>& dists) const;

    const VectorFile& file_;
    const int64_t S_;
    const int64_t n_;
    const int d_;
    const int nShards_;
    const int K_;
    const bool inRam_;
    const std::string workDir_;
    /// The shards between merges when they are kept in host memory.
    std::vector<ShardData> store_;
};

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
