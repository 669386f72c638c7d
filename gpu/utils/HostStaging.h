// Host-side helpers of the paged search of host queries
// (GpuIndex::searchPagedHostInput_, gpu/GpuIndexHostSearch.cpp): the copy of
// query rows into pinned staging memory, which checks them for NaN and
// infinity in the same pass, and the sizes of the chunks the queries are
// paged through. Plain CPU code: cpu_tests cover it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace faiss_ext {
namespace gpu {

/// Copies n rows of d floats from src to dst and returns the first row that
/// holds a NaN or an infinity (-1: none). Rows after a bad one may or may
/// not have been copied. Large copies run on several threads: the staging
/// of host queries has to keep pace with the GPU's search of them.
int64_t copyRowsCheckingFinite(const float* src, float* dst, int64_t n, int d);

/// copyRowsCheckingFinite in pieces of at most pieceRows rows, in row
/// order, several threads each copying a share of every piece, and
/// onPiece(row0, rows) called for each piece copied and found finite, in
/// row order, on the calling thread only, as the pieces are done, so that
/// the caller can start the upload of a piece while the next ones are
/// copied. (CUDA calls from the copying threads themselves contended in the
/// driver: uploads queued from eight threads at once waited up to 20 ms,
/// H200 host.) No piece holding or following a bad row is reported.
/// pieceRows >= 1; onPiece must not throw (it runs inside an OpenMP
/// region).
int64_t copyRowsCheckingFiniteInPieces(
        const float* src, float* dst, int64_t n, int d, int64_t pieceRows,
        const std::function<void(int64_t row0, int64_t rows)>& onPiece);

/// memcpy of `bytes` on several threads where they are many.
void copyBytesInParallel(void* dst, const void* src, size_t bytes);

/// Where one staging slot keeps a chunk of `rows` queries of d floats and
/// their k results: byte offsets from the slot's start, each a multiple of
/// 256 (the results' int64 labels and the DMA want aligned addresses).
struct StagingSlotLayout {
    size_t queries = 0;    ///< offset of the rows x d floats
    size_t distances = 0;  ///< offset of the rows x k floats
    size_t labels = 0;     ///< offset of the rows x k int64
    size_t bytes = 0;      ///< bytes the slot needs
};
StagingSlotLayout stagingSlotLayout(int64_t rows, int64_t d, int64_t k);

/// The bytes of each of `slots` slots of a pinned buffer of pinnedBytes
/// (a multiple of 256), and the most rows of d floats with k results one
/// slot holds (0: not one row).
size_t stagingSlotBytes(size_t pinnedBytes, int slots);
int64_t stagingSlotRows(size_t pinnedBytes, int slots, int64_t d, int64_t k);

/// Sizes of the chunks that n host queries are paged through, in order:
/// the first has min(n, firstRows) rows (the GPU starts on it while the
/// next is staged), each later one at most `growth` (>= 1) times its
/// predecessor and at most maxRows; a remainder smaller than firstRows joins the chunk
/// before it (or, past maxRows, takes firstRows from it), so that no chunk
/// but a lone one is smaller than firstRows where maxRows >= 2 x firstRows.
/// firstRows and maxRows >= 1; firstRows is clamped to maxRows.
std::vector<int64_t> hostQueryChunks(int64_t n, int64_t firstRows, int64_t maxRows,
                                     int growth = 2);

/// A thread that runs posted tasks one at a time, kept for the life of its
/// owner, so that neither it nor the OpenMP threads its tasks start are
/// made again for every search.
class StagingThread {
public:
    StagingThread();
    ~StagingThread();
    StagingThread(const StagingThread&) = delete;
    StagingThread& operator=(const StagingThread&) = delete;

    /// Runs task on the thread (after the one posted before, if any).
    void post(std::function<void()> task);
    /// Waits until every posted task has returned.
    void wait();

private:
    void loop_();
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> tasks_;
    bool busy_ = false, stop_ = false;
    std::thread thread_;
};

}  // namespace gpu
}  // namespace faiss_ext
