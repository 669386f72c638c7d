// The partition of the file build (FilePartition.h) on the CPU (FAISS's
// k-means and exact search, no GPU resources): every row lands in at least
// one list and at most `overlap`; the closure rule (PartitionSpec::closure,
// SPANN's closure assignment) keeps a row out of clusters much farther than
// its nearest, so on well-separated blobs a row joins only clusters of its
// own blob, and never a list it would not join without the rule. Rows read
// in place from memory (GpuKnnGraphGNND::add's partitioned build) are
// partitioned as the same rows in a file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/impl/gnnd/FilePartition.h"

#include <faiss/impl/FaissException.h>

using namespace faiss_ext::gpu;
using namespace faiss_ext::gpu::gnnd;

namespace {

constexpr int kBlobs = 4, kD = 8;
constexpr int64_t kRows = 4000;

/// Row i in blob i % kBlobs: centre 100 e_blob, unit Gaussian noise.
std::vector<float> blobs() {
    std::mt19937 rng(17);
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> x(size_t(kRows) * kD);
    for (int64_t i = 0; i < kRows; ++i)
        for (int j = 0; j < kD; ++j) x[size_t(i) * kD + j] = nd(rng) + (j == i % kBlobs ? 100 : 0);
    return x;
}

/// blobs() in a raw float32 file; its path.
std::string writeBlobs() {
    const std::vector<float> x = blobs();
    char path[] = "/tmp/fx_partition_XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, x.data(), x.size() * sizeof(float)), ssize_t(x.size() * sizeof(float)));
    close(fd);
    return path;
}

/// Each row's lists, from the member lists.
std::vector<std::set<int>> listsOfRows(const std::vector<std::vector<int>>& lists) {
    std::vector<std::set<int>> of(kRows);
    for (size_t c = 0; c < lists.size(); ++c)
        for (int r : lists[c]) of[size_t(r)].insert(int(c));
    return of;
}

}  // namespace

TEST(CpuFilePartition, ClosureKeepsRowsInTheirOwnBlobsClusters) {
    const std::string path = writeBlobs();
    const VectorFile file(path, VectorFileFormat::RawFloat32, kD);
    PartitionSpec spec;
    spec.clusters = 2 * kBlobs;
    spec.overlap = 3;
    spec.capacity = kRows;
    spec.minRows = 1;
    const std::vector<std::vector<int>> all = partitionFile(file, spec);
    spec.closure = kExactClosure;
    const std::vector<std::vector<int>> closed = partitionFile(file, spec);
    std::remove(path.c_str());
    ASSERT_EQ(all.size(), closed.size()) << "the same k-means, the same lists";
    const auto ofAll = listsOfRows(all), ofClosed = listsOfRows(closed);
    int64_t members = 0;
    for (int64_t r = 0; r < kRows; ++r) {
        EXPECT_EQ(ofAll[r].size(), 3u) << "row " << r << " without the closure rule";
        ASSERT_GE(ofClosed[r].size(), 1u) << "row " << r << " in no list";
        for (int c : ofClosed[r])
            EXPECT_TRUE(ofAll[r].count(c)) << "row " << r << " joined list " << c
                                           << " only with the closure rule";
        members += int64_t(ofClosed[r].size());
    }
    // the 3rd nearest of 8 centroids over 4 blobs is in another blob, 100
    // apart: the rule drops it for every row (the 2nd may be its own
    // blob's other centroid)
    EXPECT_LE(members, 2 * kRows);
    for (const auto& list : closed) {
        std::set<int> blobs;
        for (int r : list) blobs.insert(r % kBlobs);
        EXPECT_LE(blobs.size(), 1u) << "a list under the closure rule mixes blobs";
    }
}

TEST(CpuFilePartition, RowsInMemoryArePartitionedAsTheirFile) {
    const std::vector<float> x = blobs();
    const std::string path = writeBlobs();
    const VectorFile file(path, VectorFileFormat::RawFloat32, kD);
    const VectorFile memory(x.data(), kRows, kD);
    EXPECT_EQ(memory.n(), kRows);
    EXPECT_EQ(memory.d(), kD);
    std::vector<float> fromFile(size_t(7) * kD), fromMemory(size_t(7) * kD);
    file.read(100, 7, fromFile.data());
    memory.read(100, 7, fromMemory.data());
    EXPECT_EQ(fromFile, fromMemory);
    EXPECT_THROW(memory.read(kRows - 2, 3, fromMemory.data()), faiss::FaissException);
    EXPECT_THROW(VectorFile(nullptr, kRows, kD), faiss::FaissException);
    PartitionSpec spec;
    spec.clusters = 2 * kBlobs;
    spec.overlap = 2;
    spec.capacity = kRows;
    spec.minRows = 1;
    spec.closure = kExactClosure;
    const auto fileLists = partitionFile(file, spec);
    const auto memoryLists = partitionFile(memory, spec);
    std::remove(path.c_str());
    EXPECT_EQ(fileLists, memoryLists);
}
