// Which engine runs an exact flat search of device-resident vectors: the
// tiled GEMM + selection (any shape), the fused few-query kernel (reads the
// vectors once for all queries) or the GEMM + radix select for large k with
// few queries. The rule lives in chooseFlatSearchPath only; docs/flat.md,
// "Few queries and large k", says why.
#pragma once

#include <cstdint>

namespace faiss_ext {
namespace gpu {

/// The engines of FlatStorage::search (device-resident vectors, FP32).
enum class FlatSearchPath : int {
    Auto = 0,           ///< chosen by chooseFlatSearchPath
    Tiled = 1,          ///< GEMM tiles + the selection algorithm (every shape)
    FusedFewQuery = 2,  ///< one pass over the vectors, distances and top-k fused
    RadixLargeK = 3,    ///< full-row GEMM tiles + per-row radix select
};

/// "auto", "tiled", "fused-few-query", "radix-large-k".
const char* flatSearchPathName(FlatSearchPath p);

/// The fused path holds at most this many queries per block (registers and
/// shared memory): at nq <= 32 a distance costs at most 2 * 32 FLOP per 4
/// bytes read, 16 FLOP/byte, under an H100's FP32 ridge (~67 TFLOP/s over
/// ~3.35 TB/s = 20 FLOP/byte), so one pass over the vectors stays bound by
/// memory, not by arithmetic; above it the cuBLAS GEMM is the better
/// arithmetic engine.
constexpr int64_t kFewQueryMaxQueries = 32;
/// The fused path keeps k <= 1024 candidates per query and block in shared
/// memory.
constexpr int64_t kFewQueryMaxK = 1024;
/// Radix select from this k on: its cost (four reads of the distance rows
/// and a sort of the k survivors) does not grow with k, while quick
/// multi-select's partition passes, merges across tiles and final sort do
/// (27.4 ms at nq 256, k 32768 over 1M vectors on an H100, 4x torch).
constexpr int64_t kRadixMinK = 2048;
/// ... and up to this many queries: rows of a full-width distance tile are
/// spread over many blocks, so a few hundred rows fill the GPU; many rows
/// are better served by the tiled path's warp-per-row selection.
constexpr int64_t kRadixMaxQueries = 512;

/// The shape of one search, as the rule sees it.
struct FlatSearchShape {
    int64_t nq = 0;
    int64_t nb = 0;
    int64_t kk = 0;  ///< min(k, nb)
    int d = 0;
    bool onDevice = true;      ///< vectors on the device (host storage: Tiled only)
    bool selfExcluded = false; ///< k-NN graph search (selfBase >= 0): Tiled only
    /// Rows of a full-width distance tile (nb columns) the temporary memory
    /// holds for the radix path (0: not even one).
    int64_t radixRowsFit = 0;
};

/// The path Auto takes for `s`: FusedFewQuery for nq <= kFewQueryMaxQueries
/// and kk <= kFewQueryMaxK, RadixLargeK for kk >= kRadixMinK and nq <=
/// kRadixMaxQueries when a full row fits, else Tiled.
FlatSearchPath chooseFlatSearchPath(const FlatSearchShape& s);

/// `requested` resolved for `s`: Auto through chooseFlatSearchPath; a forced
/// path is checked and throws a clear error when it cannot run this shape.
FlatSearchPath resolveFlatSearchPath(FlatSearchPath requested, const FlatSearchShape& s);

}  // namespace gpu
}  // namespace faiss_ext
