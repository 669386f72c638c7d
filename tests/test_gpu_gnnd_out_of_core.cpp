// gnndBuildFromFile (Wang, Zhao & Zeng 2021, section 5, docs/references.md):
// graphs of data sets larger than GPU memory, built shard by shard and
// merged, from fvecs and raw files; the same quality as an in-memory build;
// bad files are clear errors. Recall as defined in GnndTestUtils.h.
#include "TestUtils.h"
#include "GnndTestUtils.h"

#include "faiss_ext/Metric.h"
#include "faiss_ext/gpu/GnndOutOfCore.h"
#include "faiss_ext/gpu/GpuKnnGraphGNND.h"
#include "faiss_ext/gpu/StandardGpuResources.h"

#include <gtest/gtest.h>
#include <faiss/impl/FaissException.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using faiss_ext::FlatMetric;
using faiss_ext::gpu::GnndFileBuildOptions;
using faiss_ext::gpu::GnndFileBuildReport;
using faiss_ext::gpu::StandardGpuResources;
using faiss_ext::gpu::VectorFileFormat;
using namespace faiss_ext::test;
using namespace faiss_ext::gnndtest;

TEST(GpuGnndOutOfCore, FileBuildMatchesInMemoryBuild) {
    FAISS_EXT_REQUIRE_GPU();
    // small: shards of n / 4 = 80 still past 2 K (GNND builds, not the exact small-set path)
    const int64_t n = sized<int64_t>(40000, 320);
    const int d = 32, k = 32;
    auto x = clusteredVectors(n, d, 40, kSeed + 9);
    auto ref = referenceGraph(x.data(), n, d, kR, false);
    TempDir tmp;
    const std::string fv = tmp.file("base.fvecs"), raw = tmp.file("base.f32");
    writeFvecs(fv, x.data(), n, d);
    writeRaw(raw, x.data(), x.size() * sizeof(float));
    const size_t dataBytes = x.size() * sizeof(float);

    StandardGpuResources inMem;
    const double memRecall =
            buildAndScore(inMem, x, n, d, k, FlatMetric::L2, ref.data(), kR, describe("in memory", n, d, k, FlatMetric::L2));

    // Device memory limit a quarter of the data: the builder must shard. Small:
    // the limit of two shards of n / 4 (vectors, norms and lists: 4 (d + 1) +
    // 16 K bytes a row), so 4 shards, where a quarter of the data cuts 41 (820
    // merges: far too slow under racecheck).
    const size_t limit = sized(dataBytes / 4, size_t(2 * (n / 4)) * (4 * (d + 1) + 16 * k));
    {
        StandardGpuResources res;
        res.setDeviceMemoryLimit(limit);
        GnndFileBuildOptions opt;
        opt.workDir = tmp.path;
        opt.schedule = faiss_ext::gpu::GnndFileSchedule::AllPairs;  // every pair merged: checked below
        // lists of 32 as in memory (the limit above is sized for them; the
        // file build's default of 2k is covered by test_gpu_gnnd_out_of_core_quality)
        opt.config.buildDegree = 32;
        const std::string out = tmp.file("graph_limit.ivecs");
        const GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
                {&res}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out, opt);
        const std::string what = "fvecs, device memory limit " + std::to_string(limit) + " B";
        EXPECT_EQ(rep.n, n) << what;
        EXPECT_EQ(rep.d, d) << what;
        EXPECT_GT(rep.shards, 1) << what << ": the data does not fit, yet one shard";
        EXPECT_GT(rep.shardSize, 0) << what;
        EXPECT_LT(rep.shardSize, n) << what;
        EXPECT_GE(rep.shardSize * rep.shards, n) << what;
        EXPECT_EQ(rep.merges, rep.shards * (rep.shards - 1) / 2) << what;
        EXPECT_TRUE(rep.inHostMemory) << what << ": a few MB of shards were not kept in host memory";
        std::printf("[gnnd] %s: %d shards of %lld, %d merges\n", what.c_str(), rep.shards,
                    (long long)rep.shardSize, rep.merges);
        const double r = fileGraphRecall(out, x, n, d, k, ref, what);
        EXPECT_GE(r, memRecall - 0.01) << what << " (in memory: " << memRecall << ")";
        EXPECT_GE(r, 0.95) << what;
    }

    // Raw float32, explicit shard size, distances written too; shard files
    // (no host memory for the shards), left behind in no case.
    {
        StandardGpuResources res;
        GnndFileBuildOptions opt;
        opt.shardSize = n / 4;
        opt.hostMemoryBytes = 0;
        opt.workDir = tmp.file("work");
        ASSERT_TRUE(std::filesystem::create_directory(opt.workDir));
        opt.distancesPath = tmp.file("graph_raw_dist.fvecs");
        const std::string out = tmp.file("graph_raw.ivecs");
        const GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
                {&res}, raw, VectorFileFormat::RawFloat32, d, k, FlatMetric::L2, out, opt);
        const std::string what = "raw float32, shardSize n/4, shard files";
        EXPECT_FALSE(rep.inHostMemory) << what;
        EXPECT_EQ(countDirEntries(opt.workDir), 0) << what << ": shard files left in the work directory";
        EXPECT_EQ(rep.shards, 4) << what;
        EXPECT_EQ(rep.shardSize, n / 4) << what;
        EXPECT_EQ(rep.merges, 6) << what;
        const double r = fileGraphRecall(out, x, n, d, k, ref, what);
        EXPECT_GE(r, memRecall - 0.01) << what << " (in memory: " << memRecall << ")";

        // Distances: n x k fvecs, the exact distances of the written ids.
        int dk = 0;
        const std::vector<float> dist = readFvecs(opt.distancesPath, &dk);
        int64_t gn = 0;
        int gk = 0;
        const std::vector<int> g32 = faiss_ext::gpu::readGraphIvecs(out, &gn, &gk);
        ASSERT_EQ(dk, k);
        ASSERT_EQ(dist.size(), size_t(n) * k);
        std::vector<int64_t> g(g32.begin(), g32.end());
        EXPECT_EQ("", checkStructure(x.data(), n, d, false, g.data(), dist.data(), k)) << what;
    }

    // Two workers on one GPU (devices {0, 0}): the same quality, in host
    // memory and with shard files.
    for (int64_t hostBytes : {int64_t(-1), int64_t(0)}) {
        StandardGpuResources res0, res1;
        GnndFileBuildOptions opt;
        opt.shardSize = n / 4;
        opt.devices = {0, 0};
        opt.hostMemoryBytes = hostBytes;
        const std::string out = tmp.file("graph_two_workers.ivecs");
        const GnndFileBuildReport rep = faiss_ext::gpu::gnndBuildFromFile(
                {&res0, &res1}, fv, VectorFileFormat::Fvecs, d, k, FlatMetric::L2, out, opt);
        const std::string what = std::string("fvecs, devices {0, 0}, shardSize n/4, ") +
                                 (hostBytes ? "host memory" : "shard files");
        EXPECT_EQ(rep.shards, 4) << what;
        EXPECT_EQ(rep.inHostMemory, hostBytes != 0) << what;
        const double r = fileGraphRecall(out, x, n, d, k, ref, what);
        EXPECT_GE(r, memRecall - 0.01) << what << " (in memory: " << memRecall << ")";
    }
}

TEST(GpuGnndOutOfCore, BadFilesAreClearErrors) {
    FAISS_EXT_REQUIRE_GPU();
    const int64_t n = 3000;
    const int d = 16, k = 16;
    auto x = clusteredVectors(n, d, 8, kSeed);
    TempDir tmp;
    const std::string fv = tmp.file("ok.fvecs"), raw = tmp.file("ok.f32"), cut = tmp.file("cut.fvecs");
    writeFvecs(fv, x.data(), n, d);
    writeRaw(raw, x.data(), x.size() * sizeof(float));
    {
        std::ifstream in(fv, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::ofstream outCut(cut, std::ios::binary);
        outCut.write(bytes.data(), bytes.size() - 10);  // the last record cut short
    }
    StandardGpuResources res;
    const std::string out = tmp.file("g.ivecs");
    auto build = [&](const std::string& path, VectorFileFormat f, int dd, const std::string& outPath) {
        return faiss_ext::gpu::gnndBuildFromFile({&res}, path, f, dd, k, FlatMetric::L2, outPath);
    };
    auto expectError = [&](auto&& fn, const std::string& what, const std::string& mention) {
        try {
            fn();
            ADD_FAILURE() << what << ": no exception";
        } catch (const faiss::FaissException& e) {
            if (!mention.empty()) {
                EXPECT_NE(std::string(e.what()).find(mention), std::string::npos)
                        << what << ": the message does not name " << mention << ": " << e.what();
            }
        } catch (const std::exception& e) {
            ADD_FAILURE() << what << ": not a faiss::FaissException: " << e.what();
        }
    };
    expectError([&] { build(tmp.file("absent.fvecs"), VectorFileFormat::Fvecs, 0, out); }, "absent file",
                "absent.fvecs");
    expectError([&] { build(fv, VectorFileFormat::Fvecs, d + 1, out); }, "fvecs with a wrong d", "");
    expectError([&] { build(cut, VectorFileFormat::Fvecs, 0, out); }, "truncated fvecs", "cut.fvecs");
    expectError([&] { build(raw, VectorFileFormat::RawFloat32, 0, out); }, "raw without d", "");
    // 3000 * 16 floats is not a whole number of rows of 31.
    expectError([&] { build(raw, VectorFileFormat::RawFloat32, 31, out); }, "raw with a wrong d", "");
    expectError([&] { build(fv, VectorFileFormat::Fvecs, 0, tmp.file("no/such/dir/g.ivecs")); },
                "unwritable output", "");
    {
        GnndFileBuildOptions opt;
        opt.hostMemoryBytes = 0;
        opt.workDir = tmp.file("no/such/work/dir");
        expectError([&] { faiss_ext::gpu::gnndBuildFromFile({&res}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out, opt); },
                    "unwritable work directory with shard files", "no/such/work/dir");
        opt.hostMemoryBytes = -2;
        opt.workDir.clear();
        expectError([&] { faiss_ext::gpu::gnndBuildFromFile({&res}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out, opt); },
                    "hostMemoryBytes = -2", "hostMemoryBytes");
    }
    expectError([&] { faiss_ext::gpu::gnndBuildFromFile({}, fv, VectorFileFormat::Fvecs, 0, k, FlatMetric::L2, out); },
                "no providers", "");
    expectError([&] { faiss_ext::gpu::gnndBuildFromFile({&res}, fv, VectorFileFormat::Fvecs, 0, 0, FlatMetric::L2, out); },
                "k = 0", "");
    int64_t gn = 0;
    int gk = 0;
    expectError([&] { faiss_ext::gpu::readGraphIvecs(tmp.file("absent.ivecs"), &gn, &gk); }, "absent graph",
                "absent.ivecs");
    expectError([&] { faiss_ext::gpu::readGraphIvecs(cut, &gn, &gk); }, "graph file that is not ivecs", "");
    EXPECT_FALSE(fileExists(out)) << "a failed build left an output file";
    // The good files still build.
    const GnndFileBuildReport rep = build(fv, VectorFileFormat::Fvecs, 0, out);
    EXPECT_EQ(rep.n, n);
    EXPECT_EQ(rep.d, d);
}
