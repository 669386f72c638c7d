// Bad input to the factory and the I/O functions that crashed or gave a
// silent wrong result (issue 21), on the C++ side: overlong descriptions,
// 0 dimensions, nesting the factory, writer and reader must agree on, deeply
// nested FAISS wrappers in a file, failed writes, a directory read as an
// index. docs/bad-inputs.md lists the behaviour each test pins. The CPU
// twins' cases are in test_cpu_bad_inputs_twins.cpp; the Python side in
// python_bindings/tests/test_cpu_bad_inputs.py.
#include "BadInputTestUtils.h"
#include "TestUtils.h"

#include "faiss_ext/index_factory.h"
#include "faiss_ext/index_io.h"

#include <faiss/IndexIDMap.h>
#include <faiss/impl/FaissException.h>

#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace faiss_ext {
namespace {

using Bytes = std::vector<uint8_t>;

/// Expects stmt to throw a faiss::FaissException whose message holds needle.
#define EXPECT_THROW_WITH(stmt, needle) \
    EXPECT_EQ("", ::faiss_ext::test::refusalProblem([&] { stmt; }, {needle}))

// R3: FAISS's regex recursion overflowed the stack on a 30,000-character
// component.
TEST(CpuBadInputFactoryIo, OverlongDescriptionIsRefused) {
    const std::string longest(kMaxDescriptionLength, 'A');
    EXPECT_THROW_WITH(delete index_factory(8, std::string(30000, 'A').c_str()), "characters");
    EXPECT_THROW_WITH(delete index_factory(8, (longest + "A").c_str()), "characters");
    // at the limit FAISS's own parser answers (an unknown string)
    EXPECT_THROW(delete index_factory(8, longest.c_str()), faiss::FaissException);
}

/// n nested IndexRefine ("IxRF") headers, FAISS's own recursive format.
Bytes nestedRefine(int n) {
    Bytes out;
    auto put = [&](const void* p, size_t k) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + k);
    };
    for (int i = 0; i < n; ++i) {
        put("IxRF", 4);
        const int32_t d = 8, metric = 1;
        const int64_t ntotal = 0, dummy = int64_t(1) << 20;
        const uint8_t trained = 1;
        put(&d, 4);
        put(&ntotal, 8);
        put(&dummy, 8);
        put(&dummy, 8);
        put(&trained, 1);
        put(&metric, 4);
    }
    return out;
}

// R4: 100,000 nested IndexRefine overflowed the stack in FAISS's reader.
TEST(CpuBadInputFactoryIo, DeeplyNestedFaissWrappersAreRefused) {
    const Bytes b = nestedRefine(100000);
    EXPECT_THROW_WITH(delete deserialize_index(b), "nested too deep");
    // from a file, and on a thread with a small (512 KB) stack too
    test::TempFile tmp("nested_refine");
    {
        std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.path.c_str(), "wb"), &std::fclose);
        ASSERT_TRUE(f);
        ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), f.get()), b.size());
    }
    EXPECT_THROW_WITH(delete read_index(tmp.path.c_str()), "nested too deep");
    std::string msg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 << 10);
    pthread_t th;
    struct Arg {
        const Bytes* b;
        std::string* msg;
    } arg{&b, &msg};
    ASSERT_EQ(0, pthread_create(
                         &th, &attr,
                         [](void* p) -> void* {
                             auto* a = static_cast<Arg*>(p);
                             try {
                                 delete deserialize_index(*a->b);
                             } catch (const faiss::FaissException& e) {
                                 *a->msg = e.what();
                             }
                             return nullptr;
                         },
                         &arg));
    pthread_join(th, nullptr);
    pthread_attr_destroy(&attr);
    EXPECT_NE(msg.find("nested too deep"), std::string::npos) << msg;
}

// S1: a failed write (here a full device) returned normally.
TEST(CpuBadInputFactoryIo, FailedWriteThrows) {
    std::unique_ptr<faiss::Index> idx(index_factory(4, "QSFlat"));
    std::vector<float> x(4 * 10, 1.f);
    idx->add(10, x.data());
    if (std::filesystem::exists("/dev/full")) {
        EXPECT_THROW_WITH(write_index(idx.get(), "/dev/full"), "/dev/full");
    }
    EXPECT_THROW_WITH(write_index(idx.get(), "/nonexistent-dir/x.index"), "could not open");
    // a directory: open fails
    EXPECT_THROW_WITH(write_index(idx.get(), "/tmp"), "/tmp");
}

// S2: a transform to 0 dimensions made a 0-dimensional index answering ids
// 0, 1, 2 at distance 0.
TEST(CpuBadInputFactoryIo, ZeroDimensionsAreRefused) {
    EXPECT_THROW_WITH(delete index_factory(4, "PCA0,QSFlat"), "dimension");
    EXPECT_THROW_WITH(delete index_factory(4, "PCA0,Flat"), "dimension");
    EXPECT_THROW_WITH(delete index_factory(4, "IDMap,PCA0,GNND8"), "dimension");
    delete index_factory(4, "PCA2,QSFlat");
}

// S3: "IDMap," x 33 + "QSFlat" was built and written, and its file refused.
TEST(CpuBadInputFactoryIo, FactoryWriterAndReaderAgreeOnNesting) {
    std::string ok;
    for (int i = 0; i < kMaxIndexNesting; ++i) ok += "IDMap,";
    std::unique_ptr<faiss::Index> deepest(index_factory(4, (ok + "QSFlat").c_str()));
    EXPECT_EQ(index_nesting_depth(deepest.get()), kMaxIndexNesting);
    std::unique_ptr<faiss::Index> back(deserialize_index(serialize_index(deepest.get())));
    EXPECT_EQ(index_nesting_depth(back.get()), kMaxIndexNesting);
    EXPECT_THROW_WITH(delete index_factory(4, (ok + "IDMap,QSFlat").c_str()), "nests 33");
    EXPECT_THROW_WITH(delete index_factory(4, (ok + "QSFlatCosine").c_str()), "nests 33");
    // a tree built by hand one level deeper: the writer refuses it, writing nothing
    auto* top = new faiss::IndexIDMap(deepest.release());
    top->own_fields = true;
    std::unique_ptr<faiss::Index> deeper(top);
    faiss::VectorIOWriter w;
    EXPECT_THROW_WITH(write_index(deeper.get(), &w), "nests 33");
    EXPECT_TRUE(w.data.empty());
    test::TempFile tmp("too_deep");
    EXPECT_THROW_WITH(write_index(deeper.get(), tmp.path.c_str()), "was not opened");
}

// Messages: a directory read was "truncated input".
TEST(CpuBadInputFactoryIo, DirectoryIsReportedAsADirectory) {
    EXPECT_THROW_WITH(delete read_index("/tmp"), "is a directory");
}

}  // namespace
}  // namespace faiss_ext
