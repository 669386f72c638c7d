// The search graph's traversal copy (graph/TraversalCopy.h) without a GPU:
// its size for each kind of codes (what the first add's memory check
// counts), the default codes, and bad calls refused before the device.
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/impl/graph/TraversalCopy.h"

using namespace faiss_ext::gpu::graph;

TEST(CpuTraversalCopy, BytesAreHalfOfFp16PlusTheirRanges) {
    EXPECT_EQ(traversalCodes(), TraversalCodes::FP16);
    EXPECT_EQ(TraversalCopy::bytesFor(100000000, 96, TraversalCodes::FP16),
              size_t(19200000000) + 4 * 96);  // (and the mean it is centred on)
    EXPECT_EQ(TraversalCopy::bytesFor(100000000, 96, TraversalCodes::Bytes),
              size_t(9600000000) + 2 * 4 * 96);
    EXPECT_EQ(TraversalCopy::bytesFor(1000000, 784, TraversalCodes::Bytes),
              size_t(784000000) + 2 * 4 * 784);
}

TEST(CpuTraversalCopy, BadCallsAreRefusedAndAnEmptyCopyViewsNothing) {
    TraversalCopy t;
    EXPECT_TRUE(t.empty());
    EXPECT_THROW(t.allocate(nullptr, 0, 0, 96, TraversalCodes::Bytes, "test"),
                 faiss::FaissException);
    EXPECT_THROW(t.allocate(nullptr, 0, 10, 0, TraversalCodes::FP16, "test"),
                 faiss::FaissException);
    EXPECT_THROW(t.fill(nullptr, nullptr), faiss::FaissException);
    EXPECT_TRUE(t.empty());
    SearchVectors v;
    t.view(v);
    EXPECT_EQ(v.x16, nullptr);
    EXPECT_EQ(v.x8, nullptr);
    EXPECT_EQ(v.scale16, 1.f);
}

TEST(CpuTraversalCopy, TheHookSetsTheCodesOfLaterCopies) {
    setTraversalCodes(TraversalCodes::Bytes);
    EXPECT_EQ(traversalCodes(), TraversalCodes::Bytes);
    setTraversalCodes(TraversalCodes::FP16);
    EXPECT_EQ(traversalCodes(), TraversalCodes::FP16);
}
