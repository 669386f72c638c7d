// Host-side helpers of the paged search of host queries
// (GpuIndex::searchPagedHostInput_, gpu/GpuIndexHostSearch.cpp): the copy of
// query rows into pinned staging memory, which checks them for NaN and
// infinity in the same pass, and the sizes of the chunks the queries are
// paged through. Plain CPU code: cpu_tests cover it.
#pragma once

#include <cstdint>
#include <vector>

namespace faiss_ext {
namespace gpu {

/// Copies n rows of d floats from src to dst and returns the first row that
/// holds a NaN or an infinity (-1: none). Rows after a bad one may or may
/// not have been copied. Large copies run on several threads: the staging
/// of host queries has to keep pace with the GPU's search of them.
int64_t copyRowsCheckingFinite(const float* src, float* dst, int64_t n, int d);

/// Sizes of the chunks that n host queries are paged through, in order:
/// the first has min(n, firstRows) rows (the GPU starts on it while the
/// next is staged), each later one at most twice its predecessor and at
/// most maxRows; a remainder smaller than firstRows joins the chunk
/// before it (or, past maxRows, takes firstRows from it), so that no chunk
/// but a lone one is smaller than firstRows where maxRows >= 2 x firstRows.
/// firstRows and maxRows >= 1; firstRows is clamped to maxRows.
std::vector<int64_t> hostQueryChunks(int64_t n, int64_t firstRows, int64_t maxRows);

}  // namespace gpu
}  // namespace faiss_ext
