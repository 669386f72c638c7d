// Global operator new / delete of the fuzz target: a single allocation larger
// than kAllocCapBytes throws std::bad_alloc, as an allocation larger than the
// machine's memory does outside the sanitizers (under ASan a failed operator
// new aborts the process instead of throwing).
//
// Why: FAISS 1.7.3's own readers (faiss::read_index and the readers it calls,
// which faiss_ext hands FAISS's fourccs to) resize each vector to the size
// the file claims (up to 2^40 elements) before reading its data, so a forged
// size makes them allocate it; faiss_ext cannot check those sizes without
// re-implementing FAISS's readers (docs/fuzzing.md). In production such an
// allocation either fails (std::bad_alloc, which faiss_ext turns into
// faiss::FaissException) or succeeds and is freed when the data turns out to
// be missing. With this cap the fuzzer tests the first path instead of
// reporting FAISS's allocation as a crash. Our own readers never allocate
// more than the bytes left in the input, which the seeds (a few KB) keep far
// below the cap.
#include <cstdlib>
#include <new>

namespace {

constexpr std::size_t kAllocCapBytes = std::size_t(256) << 20;

void* allocate(std::size_t n) {
    if (n > kAllocCapBytes) throw std::bad_alloc();
    void* p = std::malloc(n == 0 ? 1 : n);
    if (!p) throw std::bad_alloc();
    return p;
}

void* allocateNoThrow(std::size_t n) noexcept {
    if (n > kAllocCapBytes) return nullptr;
    return std::malloc(n == 0 ? 1 : n);
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocateNoThrow(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocateNoThrow(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
