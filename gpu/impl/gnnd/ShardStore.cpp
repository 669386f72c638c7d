#include "faiss_ext/gpu/impl/gnnd/ShardStore.h"

#include <faiss/impl/FaissAssert.h>

#include <cstdio>
#include <utility>

namespace faiss_ext {
namespace gpu {
namespace gnnd {

ShardStore::ShardStore(const VectorFile& file, int64_t shardSize, int nShards, int K, bool inRam,
                       const std::string& workDir)
        : file_(file), S_(shardSize), n_(file.n()), d_(file.d()), nShards_(nShards), K_(K),
          inRam_(inRam), workDir_(workDir) {
    if (inRam_) store_.resize(nShards_);
}

void ShardStore::load(int i, ShardData& s, bool withGraph) {
    if (inRam_ && store_[i].n > 0) {
        s = std::move(store_[i]);
        store_[i] = ShardData();
        return;
    }
    s.index = i;
    s.n = rows(i);
    s.x.resize(size_t(s.n) * d_);
    file_.read(begin(i), s.n, s.x.data());
    if (!withGraph) return;
    readLists_(path_(i), size_t(s.n) * K_, s.ids, s.dists);
    readLists_(path_(i, "head"), size_t(s.n) * K_, s.headIds, s.headDists);
}

void ShardStore::save(ShardData& s, bool withHead) {
    if (inRam_) {
        if (withHead) {
            s.headIds = s.ids;
            s.headDists = s.dists;
        }
        const int i = s.index;
        store_[i] = std::move(s);
        return;
    }
    writeLists_(path_(s.index), s.ids, s.dists);
    if (withHead) writeLists_(path_(s.index, "head"), s.ids, s.dists);
}

const ShardData& ShardStore::finalLists(int i, ShardData& fromFile) const {
    if (!inRam_) {
        fromFile.index = i;
        fromFile.n = rows(i);
        readLists_(path_(i), size_t(fromFile.n) * K_, fromFile.ids, fromFile.dists);
    }
    return inRam_ ? store_[i] : fromFile;
}

void ShardStore::removeFiles() const {
    for (int i = 0; i < nShards_; ++i) {
        std::remove(path_(i).c_str());
        std::remove(path_(i, "head").c_str());
    }
}

std::string ShardStore::path_(int i, const char* kind) const {
    char name[112];
    std::snprintf(name, sizeof(name), "/.gnnd_shard_%p_%d.%s", (const void*)this, i, kind);
    return workDir_ + name;
}

void ShardStore::readLists_(const std::string& path, size_t count, std::vector<int>& ids,
                            std::vector<float>& dists) const {
    ids.resize(count);
    dists.resize(count);
    File f = openFile(path, "rb");
    bool ok = std::fread(ids.data(), sizeof(int), count, f.get()) == count &&
              std::fread(dists.data(), sizeof(float), count, f.get()) == count;
    FAISS_THROW_IF_NOT_FMT(ok, "gnndBuildFromFile: short read of '%s'", path.c_str());
}

void ShardStore::writeLists_(const std::string& path, const std::vector<int>& ids,
                             const std::vector<float>& dists) const {
    File f = openFile(path, "wb");
    bool ok = std::fwrite(ids.data(), sizeof(int), ids.size(), f.get()) == ids.size() &&
              std::fwrite(dists.data(), sizeof(float), dists.size(), f.get()) == dists.size();
    FAISS_THROW_IF_NOT_FMT(ok, "gnndBuildFromFile: cannot write '%s' (disk full?)",
                           path.c_str());
}

}  // namespace gnnd
}  // namespace gpu
}  // namespace faiss_ext
