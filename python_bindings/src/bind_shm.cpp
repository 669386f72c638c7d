// What a ShardedIndex's shared-memory segments (faiss_ext/distributed_shm.py)
// need in C++: _ShmCopy writes the queries into a segment, and _shm_signal /
// _shm_wait are the flags with which the driver and its shard actors on one
// host tell each other that queries are written and that a shard's results
// are in.
//
// Why the copy here: the driver copies while its Ray calls are on their way
// (the copy of 10,000 x 96 queries took ~0.45 ms on an H200 host, the first
// call ~1.2 ms to start), and Python threads copying beside the thread that
// submits the calls would wait for its GIL.
//
// Why in C++: a flag must become visible only after the data it announces
// (release store, acquire load). Plain numpy stores give that on x86 but not
// on ARM hosts (Grace), where another process could see the flag before the
// results. The wait also spins here without the GIL, so that the driver's
// other threads (the query copy, the merges) run meanwhile.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"

namespace faiss_ext {
namespace python {

namespace {

/// A wait spins this long, so that a flag set within microseconds is seen at
/// once, and then sleeps in steps of kSleepStep: a driver whose shards take
/// tens of milliseconds (or CPU actors sharing its cores) must not burn a
/// core meanwhile; a step adds at most ~0.1 ms to a search (Linux's sleep
/// granularity), against Ray's 0.6-1.7 ms round trips that the flags save.
constexpr std::chrono::microseconds kSpinTime{50};
constexpr std::chrono::microseconds kSleepStep{50};

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/// The int64 words of `flags`: a writable, C-contiguous, 1-D int64 array
/// (a view of the segment; a converted copy would share nothing).
int64_t* flagWords(const py::array& flags, size_t& n) {
    if (!py::isinstance<py::array_t<int64_t>>(flags) || flags.ndim() != 1 ||
        !(flags.flags() & py::array::c_style) || !flags.writeable()) {
        throw py::type_error("flags must be a writable, contiguous 1-D int64 array (a view of "
                             "the shared segment), got " + typeName(flags));
    }
    n = size_t(flags.shape(0));
    return static_cast<int64_t*>(const_cast<void*>(flags.data()));
}

void checkSlot(int64_t slot, size_t n) {
    if (slot < 0 || size_t(slot) >= n) {
        throw py::index_error("flag slot " + std::to_string(slot) + " outside the " +
                              std::to_string(n) + " flags");
    }
}

/// flags[slot] = value, after every earlier write of this thread.
void shmSignal(const py::array& flags, int64_t slot, int64_t value) {
    size_t n = 0;
    int64_t* words = flagWords(flags, n);
    checkSlot(slot, n);
    __atomic_store_n(words + slot, value, __ATOMIC_RELEASE);
}

/// The slots (of `slots`) whose flag equals value, waiting up to timeout
/// seconds for at least one; empty after the timeout.
std::vector<int64_t> shmWait(const py::array& flags, const std::vector<int64_t>& slots,
                             int64_t value, double timeoutSeconds) {
    size_t n = 0;
    int64_t* words = flagWords(flags, n);
    for (int64_t s : slots) checkSlot(s, n);
    if (!(timeoutSeconds >= 0)) {
        throw py::value_error("timeout = " + std::to_string(timeoutSeconds) + " must be >= 0");
    }
    std::vector<int64_t> done;
    py::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(timeoutSeconds));
    for (;;) {
        for (int64_t s : slots) {
            if (__atomic_load_n(words + s, __ATOMIC_ACQUIRE) == value) done.push_back(s);
        }
        if (!done.empty() || slots.empty()) break;
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        if (now - start < kSpinTime) {
            cpuRelax();
        } else {
            std::this_thread::sleep_for(kSleepStep);
        }
    }
    return done;
}

/// Checks that dst (writable) and src are C-contiguous float32 matrices of
/// one shape and threads >= 1.
void checkCopy(const py::array& dst, const py::array& src, int threads) {
    auto isFloatMatrix = [](const py::array& a) {
        return py::isinstance<py::array_t<float>>(a) && a.ndim() == 2 &&
               (a.flags() & py::array::c_style);
    };
    if (!isFloatMatrix(dst) || !dst.writeable() || !isFloatMatrix(src)) {
        throw py::type_error("_ShmCopy: dst (writable) and src must be C-contiguous 2-D float32 "
                             "arrays, got " + typeName(dst) + " and " + typeName(src));
    }
    if (dst.shape(0) != src.shape(0) || dst.shape(1) != src.shape(1)) {
        throw py::value_error("_ShmCopy: dst has shape " + shapeString(dst) +
                              " but src has shape " + shapeString(src));
    }
    if (threads < 1) {
        throw py::value_error("_ShmCopy: threads = " + std::to_string(threads) +
                              " must be >= 1");
    }
}

/// Copies rows x rowBytes from in to out over `threads` OpenMP threads
/// (whatever OMP_NUM_THREADS says).
void copyRows(char* out, const char* in, int64_t rows, size_t rowBytes, int threads) {
    const int parts = int(std::min<int64_t>(threads, std::max<int64_t>(rows, 1)));
#pragma omp parallel for num_threads(parts) schedule(static)
    for (int p = 0; p < parts; ++p) {
        const int64_t r0 = rows * p / parts;
        const int64_t r1 = rows * (p + 1) / parts;
        std::memcpy(out + r0 * rowBytes, in + r0 * rowBytes, size_t(r1 - r0) * rowBytes);
    }
}

/// A copy of the queries into a segment, running on its own thread while
/// the driver submits its calls, that sets flags[slot] = value (release)
/// once every row is in: the actors start on that flag. Holds dst, src
/// and flags until wait() or destruction, which join the thread.
class ShmCopy {
public:
    ShmCopy(py::array dst, py::array src, int threads, py::array flags, int64_t slot,
            int64_t value)
        : dst_(std::move(dst)), src_(std::move(src)), flags_(std::move(flags)) {
        checkCopy(dst_, src_, threads);
        size_t n = 0;
        int64_t* word = flagWords(flags_, n);
        checkSlot(slot, n);
        word += slot;
        char* out = static_cast<char*>(dst_.mutable_data());
        const char* in = static_cast<const char*>(src_.data());
        const int64_t rows = dst_.shape(0);
        const size_t rowBytes = size_t(dst_.shape(1)) * sizeof(float);
        thread_ = std::thread([=] {
            copyRows(out, in, rows, rowBytes, threads);
            __atomic_store_n(word, value, __ATOMIC_RELEASE);
        });
    }

    ~ShmCopy() {
        if (thread_.joinable()) thread_.join();  // no Python object is touched: no GIL needed
    }

    /// Returns once every row is copied and the flag set.
    void wait() {
        py::gil_scoped_release release;
        if (thread_.joinable()) thread_.join();
    }

private:
    py::array dst_, src_, flags_;
    std::thread thread_;
};

}  // namespace

void bindShm(py::module_& m) {
    using namespace pybind11::literals;
    py::class_<ShmCopy>(m, "_ShmCopy",
                        "dst[:] = src (C-contiguous float32 matrices of one shape) over `threads` "
                        "OpenMP threads, on a thread of its own, then flags[slot] = value "
                        "(release); wait() joins it (faiss_ext.distributed_shm).")
        .def(py::init<py::array, py::array, int, py::array, int64_t, int64_t>(), "dst"_a, "src"_a,
             "threads"_a, "flags"_a, "slot"_a, "value"_a)
        .def("wait", &ShmCopy::wait);
    m.def("_shm_signal", &shmSignal, "flags"_a, "slot"_a, "value"_a,
          "flags[slot] = value with release order: a process that sees the value also sees "
          "every write made before it (faiss_ext.distributed_shm).");
    m.def("_shm_wait", &shmWait, "flags"_a, "slots"_a, "value"_a, "timeout"_a,
          "The slots whose flag equals value (acquire order), waiting without the GIL up to "
          "timeout seconds for at least one; [] after the timeout (faiss_ext.distributed_shm).");
}

}  // namespace python
}  // namespace faiss_ext
