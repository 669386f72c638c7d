// Regression inputs of the read_index fuzzer (docs/fuzzing.md): every file in
// tests/data/fuzz_regress is read with faiss_ext::deserialize_index (with and
// without IO_FLAG_CHECKED_ONLY) and faiss_ext::read_index (from the file, so
// through the FILE* reader), and each must throw faiss::FaissException and
// nothing else: no crash, no other exception. A file named *.valid.bin must
// read instead. fuzz_*.bin are inputs the fuzzer found; hand_*.bin are
// malformed seeds made by fuzz/make_malformed.py, one per guard of the reader.
// Also: IO_FLAG_CHECKED_ONLY refuses the fourccs handed to FAISS's readers
// (and so the inputs of fuzz/known_faiss_crashes that crash them).
#include <faiss/impl/FaissException.h>
#include <faiss/index_factory.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "TestUtils.h"
#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

namespace faiss_ext {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

/// tests/data/fuzz_regress beside this file ($FAISS_EXT_FUZZ_REGRESS_DIR
/// overrides it).
fs::path regressDir() {
    if (const char* env = std::getenv("FAISS_EXT_FUZZ_REGRESS_DIR")) return fs::path(env);
    return fs::path(__FILE__).parent_path() / "data" / "fuzz_regress";
}

std::vector<fs::path> regressFiles() {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(regressDir(), ec))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

Bytes readBytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool endsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// "" when f throws faiss::FaissException (or, when mustRead, reads), else
/// what went wrong.
template <typename F>
std::string outcome(F&& f, bool mustRead) {
    try {
        std::unique_ptr<faiss::Index> idx(f());
        if (!idx) return "returned null";
        return mustRead ? "" : "read without throwing";
    } catch (const faiss::FaissException& e) {
        return mustRead ? std::string("threw: ") + e.what() : "";
    } catch (const std::exception& e) {
        return std::string("threw a non-FAISS exception: ") + e.what();
    }
}

TEST(CpuFuzzRegress, DirectoryIsNotEmpty) {
    // the test below must not pass vacuously
    EXPECT_GE(regressFiles().size(), 1u) << "no files in " << regressDir();
}

TEST(CpuFuzzRegress, EveryInputThrowsFaissExceptionOrReads) {
    const std::vector<fs::path> files = regressFiles();
    ASSERT_FALSE(files.empty()) << "no files in " << regressDir();
    for (const fs::path& p : files) {
        const std::string name = p.filename().string();
        const bool mustRead = endsWith(name, ".valid.bin");
        const Bytes b = readBytes(p);
        EXPECT_EQ(outcome([&] { return deserialize_index(b); }, mustRead), "")
            << name << " (deserialize_index)";
        EXPECT_EQ(outcome([&] { return deserialize_index(b, IO_FLAG_CHECKED_ONLY); }, mustRead), "")
            << name << " (deserialize_index, IO_FLAG_CHECKED_ONLY)";
        EXPECT_EQ(outcome([&] { return read_index(p.string().c_str()); }, mustRead), "")
            << name << " (read_index from the file)";
    }
}

TEST(CpuFuzzRegress, CheckedOnlyRefusesFaissReaders) {
    const int d = 4;
    const std::vector<float> x = test::randomVectors(40, d, test::kSeed);
    // FAISS types, alone and inside our wrappers: read normally, refused
    // under IO_FLAG_CHECKED_ONLY
    for (const char* desc : {"PQ2x4", "HNSW4", "IDMap,PCA2,QSFlat", "PCA2,BiLSH2x2_t1"}) {
        std::unique_ptr<faiss::Index> idx(index_factory(d, desc));
        idx->train(40, x.data());
        const Bytes b = serialize_index(idx.get());
        std::unique_ptr<faiss::Index> back;
        EXPECT_NO_THROW(back.reset(deserialize_index(b))) << desc;
        EXPECT_THROW(delete deserialize_index(b, IO_FLAG_CHECKED_ONLY), faiss::FaissException)
            << desc;
    }
    // what our reader checks itself reads under the flag
    for (const char* desc : {"QSFlat", "IDMap2,QSFlatPearson", "GNND8", "BiLSH2x2_t1"}) {
        std::unique_ptr<faiss::Index> idx(index_factory(d, desc));
        const Bytes b = serialize_index(idx.get());
        std::unique_ptr<faiss::Index> back;
        EXPECT_NO_THROW(back.reset(deserialize_index(b, IO_FLAG_CHECKED_ONLY))) << desc;
    }
}

TEST(CpuFuzzRegress, KnownFaissReaderCrashesAreRefusedUnderCheckedOnly) {
    // fuzz/known_faiss_crashes: inputs that crash FAISS 1.7.3's own readers
    // (never read here without the flag)
    const fs::path dir =
        fs::path(__FILE__).parent_path().parent_path() / "fuzz" / "known_faiss_crashes";
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (e.path().extension() != ".bin") continue;
        const Bytes b = readBytes(e.path());
        EXPECT_THROW(delete deserialize_index(b, IO_FLAG_CHECKED_ONLY), faiss::FaissException)
            << e.path();
        ++n;
    }
    EXPECT_GE(n, 1) << "no .bin files in " << dir;
}

TEST(CpuFuzzRegress, UntrainedWrappedLeafSaysUntrainedAndReadsBack) {
    // found writing the seeds: "IDMap,BiLSH.." said is_trained over an
    // untrained leaf, and the reader (rightly) refused its file
    for (const char* desc : {"IDMap,BiLSH2x2_t1", "IDMap2,BiLSH2x2_t1", "IDMap,PCA2,BiLSH2x2_t1"}) {
        std::unique_ptr<faiss::Index> idx(index_factory(4, desc));
        EXPECT_FALSE(idx->is_trained) << desc;
        std::unique_ptr<faiss::Index> back;
        EXPECT_NO_THROW(back.reset(deserialize_index(serialize_index(idx.get())))) << desc;
    }
    std::unique_ptr<faiss::Index> flat(index_factory(4, "IDMap,QSFlat"));
    EXPECT_TRUE(flat->is_trained);
}

}  // namespace
}  // namespace faiss_ext
