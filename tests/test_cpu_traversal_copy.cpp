// The search graph's traversal copy (graph/TraversalCopy.h) without a GPU:
// its size (what the first add's memory check counts) and bad calls refused
// before the device.
#include <faiss/impl/FaissException.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "faiss_ext/gpu/impl/graph/SearchGraph.h"
#include "faiss_ext/gpu/impl/graph/TraversalCopy.h"

using namespace faiss_ext::gpu::graph;

TEST(CpuTraversalCopy, HoldsTwoBytesAValueAndTheMean) {
    EXPECT_EQ(TraversalCopy::bytesFor(100000000, 96), size_t(19200000000) + 4 * 96);
    EXPECT_EQ(TraversalCopy::bytesFor(1000000, 784), size_t(1568000000) + 4 * 784);
}

TEST(CpuTraversalCopy, BadCallsAreRefusedAndAnEmptyCopyViewsNothing) {
    TraversalCopy t;
    EXPECT_TRUE(t.empty());
    EXPECT_THROW(t.allocate(nullptr, 0, 0, 96, "test"), faiss::FaissException);
    EXPECT_THROW(t.allocate(nullptr, 0, 10, 0, "test"), faiss::FaissException);
    EXPECT_THROW(t.fill(nullptr, nullptr), faiss::FaissException);
    EXPECT_TRUE(t.empty());
    SearchVectors v;
    t.view(v);
    EXPECT_EQ(v.x16, nullptr);
    EXPECT_EQ(v.mean16, nullptr);
    EXPECT_EQ(v.scale16, 1.f);
}
