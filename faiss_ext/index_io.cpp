// Saving and loading through FAISS's I/O layer (see index_io.h).
//
// The format is FAISS's own (faiss/impl/index_write.cpp): a fourcc names the
// class, then the faiss::Index header, then the class's fields. We write the
// wrappers that may hold our types (IndexPreTransform, IndexIDMap,
// IndexIDMap2) ourselves in that format, so that a file with only FAISS types
// in it stays readable by plain faiss::read_index, and our types get fourccs
// FAISS does not use:
//   "FxRC"  RowCenteringTransform: d_in (int32), d_out (int32), is_trained (u8)
//   "IxBL"  IndexBiLevelLSH (the twin of GpuIndexBiLevelLSH), version 2:
//           version (int32); the faiss::Index header; the BiLevelLSHConfig:
//           treeDepth, nTables, nProjections (int32), bucketWidth, meanRuleC
//           (float), diameterIterations, cuckooSubTables (int32),
//           cuckooMaxLoad (float), seed (uint64), then (version 2 only)
//           widthRule, widthNeighbours, defaultNprobe, defaultGroupProbes
//           (int32), defaultMinCandidates (int64), defaultGroupMargin,
//           autotuneRecall (float), lattice (int32; the model's too);
//           version 1 files read with widthRule RmsRadius (their rule), one
//           group per search and the other fields at their defaults;
//           has_model (u8, = is_trained);
//           when set, the BiLevelLSHModel: d, depth, nTables, nProjections,
//           bits (int32), then in FAISS's vector layout (size_t count, data)
//           nodeRule (u8), nodeVec, nodeThreshold, leafMean, leafWidth,
//           leafOffset (float), leafTrainCount (int64), proj, projBias
//           (float); last the ntotal x d vectors (FAISS vector of float).
//           The hash tables are not stored: the reader rebuilds them
//           (IndexBiLevelLSH::setContents), so they always match the vectors.
//
// Reading is a recursive descent that reads each fourcc first. Our fourccs,
// the wrappers above, IndexFlat, IndexNNDescentFlat ("INNf", the twin of
// GpuKnnGraphGNND: its graph ids are checked too, since FAISS's search follows
// them unchecked) and NormalizationTransform are read here with sanity checks
// on every size (a bad file must throw, never crash or allocate
// absurd memory: FAISS 1.7.3's reader trusts the sizes it reads); anything
// else is handed to faiss::read_index with the fourcc pushed back, or, under
// IO_FLAG_CHECKED_ONLY, refused. fuzz/ fuzzes this reader (docs/fuzzing.md).
#include "faiss_ext/index_io.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexNNDescent.h>
#include <faiss/IndexPreTransform.h>
#include <faiss/VectorTransform.h>
#include <faiss/impl/FaissAssert.h>
#include <faiss/index_io.h>
#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <typeinfo>

#include "faiss_ext/BiLevelLSHCommon.h"
#include "faiss_ext/CpuConvertible.h"
#include "faiss_ext/CpuTwin.h"
#include "faiss_ext/IndexBiLevelLSH.h"
#include "faiss_ext/IndexNNDescentFlatChecked.h"
#include "faiss_ext/RowCenteringTransform.h"

namespace faiss_ext {

namespace {

// ---------------------------------------------------------------- limits

/// Largest dimension accepted from a file.
constexpr int kMaxDim = 1 << 20;
/// Largest ntotal accepted from a file.
constexpr int64_t kMaxNtotal = int64_t(1) << 40;
/// Longest IndexPreTransform chain accepted from a file.
constexpr int kMaxChainLength = 64;
/// Deepest nesting of wrappers accepted from a file (guards the stack); the
/// writer and the factory refuse deeper trees (index_io.h).
constexpr int kMaxDepth = kMaxIndexNesting;
/// Most stack a read may use below read_index's frame. FAISS's own readers
/// (IndexRefine, IVF quantizers, ...) recurse on their own, past our depth
/// count: 100,000 nested "IxRF" overflowed an 8 MB stack. Every read of the
/// input goes through StreamReader, which throws past this budget (or when
/// less than kStackReserve bytes of the thread's stack would be left).
constexpr size_t kMaxReaderStackBytes = size_t(1) << 20;
constexpr size_t kStackReserve = size_t(64) << 10;
/// Arrays are read in chunks of this many bytes, so memory grows only as
/// data actually arrives (a truncated file cannot make us allocate its
/// claimed size).
constexpr size_t kChunkBytes = size_t(16) << 20;
/// Largest NN-Descent graph degree K accepted from a file.
constexpr int kMaxGraphDegree = 1 << 16;
/// Largest NN-Descent build / search parameter (S, R, L, iter, search_L)
/// accepted from a file: FAISS allocates pools of these sizes.
constexpr int kMaxNNDescentParam = 1 << 20;
/// The value FAISS writes in the two unused header fields.
constexpr int64_t kHeaderDummy = int64_t(1) << 20;

const uint32_t kFourccRowCentering = faiss::fourcc("FxRC");
const uint32_t kFourccBiLevelLSH = faiss::fourcc("IxBL");
/// Version of the "IxBL" layout written (1 is read too).
constexpr int32_t kBiLevelLSHVersion = 2;
/// Most vectors an IndexBiLevelLSH holds (its 32-bit ids).
constexpr int64_t kBiLevelLSHMaxNtotal = (int64_t(1) << 31) - 2;
/// The reader rebuilds the cuckoo hash table of an "IxBL" file: about
/// keys / cuckooMaxLoad slots for at most nTables x ntotal keys. Any
/// cuckooMaxLoad in (0, 0.95] is a valid configuration, so a forged tiny one
/// (fuzzing found 4.6e-11) would make it allocate terabytes: the table may
/// have at most this many slots per key ...
constexpr double kBiLevelLSHMaxSlotsPerKey = 64;
/// ... or this many slots in all (small tables).
constexpr double kBiLevelLSHSmallTableSlots = double(1 << 20);

const uint32_t kFourccFlatL2 = faiss::fourcc("IxF2");
const uint32_t kFourccFlatIP = faiss::fourcc("IxFI");
const uint32_t kFourccFlat = faiss::fourcc("IxFl");
const uint32_t kFourccIDMap = faiss::fourcc("IxMp");
const uint32_t kFourccIDMap2 = faiss::fourcc("IxM2");
const uint32_t kFourccPreTransform = faiss::fourcc("IxPT");
const uint32_t kFourccNormalization = faiss::fourcc("VNrm");
const uint32_t kFourccNNDescentFlat = faiss::fourcc("INNf");

bool isKnownMetric(int m) {
    switch (m) {
        case faiss::METRIC_INNER_PRODUCT:
        case faiss::METRIC_L2:
        case faiss::METRIC_L1:
        case faiss::METRIC_Linf:
        case faiss::METRIC_Lp:
        case faiss::METRIC_Canberra:
        case faiss::METRIC_BrayCurtis:
        case faiss::METRIC_JensenShannon:
            return true;
        default:
            return false;
    }
}

// ---------------------------------------------------------------- writing

/// Writes raw bytes; throws when the writer accepts fewer.
void writeBytes(faiss::IOWriter* w, const void* p, size_t bytes) {
    if (bytes == 0) return;
    size_t got = (*w)(p, 1, bytes);
    FAISS_THROW_IF_NOT_FMT(got == bytes, "write error on '%s': wrote %zu of %zu bytes",
                           w->name.c_str(), got, bytes);
}

template <typename T>
void writeValue(faiss::IOWriter* w, const T& v) {
    writeBytes(w, &v, sizeof(T));
}

/// FAISS's vector layout: element count (size_t), then the elements.
template <typename T>
void writeVector(faiss::IOWriter* w, const std::vector<T>& v) {
    writeValue<size_t>(w, v.size());
    writeBytes(w, v.data(), v.size() * sizeof(T));
}

/// FAISS's faiss::Index header.
void writeHeader(faiss::IOWriter* w, const faiss::Index* idx) {
    writeValue<int32_t>(w, int32_t(idx->d));
    writeValue<int64_t>(w, int64_t(idx->ntotal));
    writeValue<int64_t>(w, kHeaderDummy);
    writeValue<int64_t>(w, kHeaderDummy);
    writeValue<uint8_t>(w, idx->is_trained ? 1 : 0);
    writeValue<int32_t>(w, int32_t(idx->metric_type));
    if (idx->metric_type > 1) writeValue<float>(w, idx->metric_arg);
}

void writeTransform(faiss::IOWriter* w, const faiss::VectorTransform* vt) {
    FAISS_THROW_IF_NOT_MSG(vt, "write_index: null VectorTransform in IndexPreTransform chain");
    if (dynamic_cast<const RowCenteringTransform*>(vt)) {
        writeValue<uint32_t>(w, kFourccRowCentering);
        writeValue<int32_t>(w, vt->d_in);
        writeValue<int32_t>(w, vt->d_out);
        writeValue<uint8_t>(w, vt->is_trained ? 1 : 0);
    } else {
        faiss::write_VectorTransform(vt, w);
    }
}

/// IndexBiLevelLSH as "IxBL" (layout at the top of this file).
void writeBiLevelLSH(faiss::IOWriter* w, const IndexBiLevelLSH* idx) {
    const BiLevelLSHConfig& c = idx->getConfig();
    const BiLevelLSHModel& m = idx->getModel();
    const std::vector<float>& vectors = idx->getVectors();
    FAISS_THROW_IF_NOT_FMT(
        idx->is_trained == !m.empty() && vectors.size() == size_t(idx->ntotal) * size_t(idx->d),
        "write_index: inconsistent IndexBiLevelLSH (is_trained %d, model d %d, %zu floats for "
        "ntotal %lld x d %d)",
        int(idx->is_trained), m.d, vectors.size(), (long long)idx->ntotal, int(idx->d));
    writeValue<uint32_t>(w, kFourccBiLevelLSH);
    writeValue<int32_t>(w, kBiLevelLSHVersion);
    writeHeader(w, idx);
    writeValue<int32_t>(w, c.treeDepth);
    writeValue<int32_t>(w, c.nTables);
    writeValue<int32_t>(w, c.nProjections);
    writeValue<float>(w, c.bucketWidth);
    writeValue<float>(w, c.meanRuleC);
    writeValue<int32_t>(w, c.diameterIterations);
    writeValue<int32_t>(w, c.cuckooSubTables);
    writeValue<float>(w, c.cuckooMaxLoad);
    writeValue<uint64_t>(w, c.seed);
    writeValue<int32_t>(w, int32_t(c.widthRule));
    writeValue<int32_t>(w, c.widthNeighbours);
    writeValue<int32_t>(w, c.defaultNprobe);
    writeValue<int32_t>(w, c.defaultGroupProbes);
    writeValue<int64_t>(w, c.defaultMinCandidates);
    writeValue<float>(w, c.defaultGroupMargin);
    writeValue<float>(w, c.autotuneRecall);
    writeValue<int32_t>(w, c.lattice);
    writeValue<uint8_t>(w, m.empty() ? 0 : 1);
    if (!m.empty()) {
        writeValue<int32_t>(w, m.d);
        writeValue<int32_t>(w, m.depth);
        writeValue<int32_t>(w, m.nTables);
        writeValue<int32_t>(w, m.nProjections);
        writeValue<int32_t>(w, m.bits);
        writeVector(w, m.nodeRule);
        writeVector(w, m.nodeVec);
        writeVector(w, m.nodeThreshold);
        writeVector(w, m.leafMean);
        writeVector(w, m.leafWidth);
        writeVector(w, m.leafOffset);
        writeVector(w, m.leafTrainCount);
        writeVector(w, m.proj);
        writeVector(w, m.projBias);
    }
    writeVector(w, vectors);
}

/// A file writer that reports every failure, closing included: FAISS
/// 1.7.3's FileIOWriter only prints a failed fclose to stderr, so a full
/// disk (or /dev/full) went unnoticed: the data sits in stdio's buffer until
/// the close.
class CheckedFileWriter : public faiss::IOWriter {
  public:
    explicit CheckedFileWriter(const char* fname) {
        name = fname;
        f_ = std::fopen(fname, "wb");
        FAISS_THROW_IF_NOT_FMT(f_, "write_index: could not open '%s' for writing: %s", fname,
                               std::strerror(errno));
    }
    ~CheckedFileWriter() override {
        if (f_) std::fclose(f_);
    }
    size_t operator()(const void* ptr, size_t size, size_t nitems) override {
        return std::fwrite(ptr, size, nitems, f_);
    }
    int fileno() override { return ::fileno(f_); }
    /// Flushes and closes the file; throws on any error.
    void close() {
        errno = 0;
        const bool flushed = std::fflush(f_) == 0 && !std::ferror(f_);
        const int flushErr = errno;
        errno = 0;
        const int rc = std::fclose(f_);
        f_ = nullptr;
        FAISS_THROW_IF_NOT_FMT(flushed && rc == 0, "write_index: writing '%s' failed: %s",
                               name.c_str(), std::strerror(flushErr ? flushErr : errno));
    }

  private:
    FILE* f_ = nullptr;
};

void writeIndexRec(const faiss::Index* idx, faiss::IOWriter* w) {
    FAISS_THROW_IF_NOT_MSG(idx, "write_index: null index");

    if (auto conv = dynamic_cast<const CpuConvertible*>(idx)) {
        // a GPU index is saved as its CPU twin, as FAISS does
        std::unique_ptr<faiss::Index> twin(conv->copyToCpuIndex());
        FAISS_THROW_IF_NOT_MSG(twin, "write_index: copyToCpuIndex returned a null index");
        writeIndexRec(twin.get(), w);
        return;
    }
    if (auto lsh = dynamic_cast<const IndexBiLevelLSH*>(idx)) {
        // under its reader lock: an add in another thread waits
        lsh->readLocked([&] { writeBiLevelLSH(w, lsh); });
        return;
    }
    if (auto m = dynamic_cast<const faiss::IndexIDMap*>(idx)) {
        // IndexIDMap2 derives from IndexIDMap; same fields, its own fourcc
        bool two = dynamic_cast<const faiss::IndexIDMap2*>(idx) != nullptr;
        writeValue<uint32_t>(w, two ? kFourccIDMap2 : kFourccIDMap);
        writeHeader(w, m);
        writeIndexRec(m->index, w);
        writeVector(w, m->id_map);
        return;
    }
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(idx)) {
        writeValue<uint32_t>(w, kFourccPreTransform);
        writeHeader(w, pt);
        writeValue<int32_t>(w, int32_t(pt->chain.size()));
        for (const faiss::VectorTransform* vt : pt->chain) writeTransform(w, vt);
        writeIndexRec(pt->index, w);
        return;
    }
    if (containsCpuConvertible(idx)) {
        // other wrappers (IndexShards, IndexReplicas) around GPU indexes
        std::unique_ptr<faiss::Index> twin(cloneToCpu(idx));
        faiss::write_index(twin.get(), w);
        return;
    }
    faiss::write_index(idx, w);
}

// ---------------------------------------------------------------- reading

/// The address of the caller's frame (stacks grow down on every platform
/// this builds for).
__attribute__((noinline)) uintptr_t stackPosition() {
    return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
}

/// The lowest usable address of this thread's stack, or 0 when unknown
/// (looked up once per thread: pthread_getattr_np reads /proc for the main
/// thread).
uintptr_t threadStackLow() {
    static thread_local uintptr_t low = 1;
    if (low == 1) {
        low = 0;
#if defined(__linux__) && defined(__GLIBC__)
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            void* addr = nullptr;
            size_t size = 0;
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) low = uintptr_t(addr);
            pthread_attr_destroy(&attr);
        }
#endif
    }
    return low;
}

/// How far below `sp` a read may go: kMaxReaderStackBytes, less when the
/// thread's stack ends sooner (kStackReserve kept for unwinding).
size_t readerStackBudget(uintptr_t sp) {
    size_t budget = kMaxReaderStackBytes;
    const uintptr_t low = threadStackLow();
    if (low != 0) budget = sp > low + kStackReserve ? std::min(budget, sp - low - kStackReserve) : 0;
    return budget;
}

/// An IOReader over another one that counts bytes, knows how many remain when
/// the source tells (bytes in memory, a regular file), can push bytes back,
/// and throws on short reads in its own helpers.
class StreamReader : public faiss::IOReader {
  public:
    explicit StreamReader(faiss::IOReader* inner) : inner_(inner) {
        name = inner->name;
        stackTop_ = stackPosition();
        stackBudget_ = readerStackBudget(stackTop_);
        if (auto v = dynamic_cast<faiss::VectorIOReader*>(inner)) {
            known_ = true;
            limit_ = v->rp <= v->data.size() ? v->data.size() - v->rp : 0;
        } else if (auto f = dynamic_cast<faiss::FileIOReader*>(inner)) {
            struct stat st;
            long pos = f->f ? std::ftell(f->f) : -1;
            if (f->f && pos >= 0 && fstat(::fileno(f->f), &st) == 0 && S_ISREG(st.st_mode)) {
                known_ = true;
                limit_ = size_t(st.st_size) > size_t(pos) ? size_t(st.st_size) - size_t(pos) : 0;
            }
        }
    }

    /// fread semantics: bytes pushed back first, then the wrapped reader.
    size_t operator()(void* ptr, size_t size, size_t nitems) override {
        const uintptr_t sp = stackPosition();
        FAISS_THROW_IF_NOT_FMT(sp >= stackTop_ || stackTop_ - sp <= stackBudget_,
                               "corrupt input '%s': indexes nested too deep (reading at byte %zu "
                               "needed more than %zu bytes of stack)",
                               name.c_str(), offset_, stackBudget_);
        if (size == 0 || nitems == 0) return 0;
        FAISS_THROW_IF_NOT_FMT(nitems <= std::numeric_limits<size_t>::max() / size,
                               "read of %zu items of %zu bytes overflows", nitems, size);
        size_t want = size * nitems;
        auto* out = static_cast<uint8_t*>(ptr);
        size_t got = 0;
        while (got < want && !pushback_.empty()) {
            out[got++] = pushback_.back();
            pushback_.pop_back();
        }
        while (got < want) {
            size_t n = (*inner_)(out + got, 1, want - got);
            if (n == 0) break;
            got += n;
            fromInner_ += n;
        }
        offset_ += got;
        // like fread, a partial item is lost; callers treat it as end of input
        return got / size;
    }

    int fileno() override { return inner_->fileno(); }

    /// Reads exactly `bytes` bytes or throws (truncated input).
    void readExact(void* p, size_t bytes, const char* what) {
        if (bytes == 0) return;
        size_t at = offset_;
        size_t got = (*this)(p, 1, bytes);
        FAISS_THROW_IF_NOT_FMT(got == bytes,
                               "truncated input '%s': reading %s at byte %zu needed %zu bytes, "
                               "got %zu",
                               name.c_str(), what, at, bytes, got);
    }

    template <typename T>
    T read(const char* what) {
        T v;
        readExact(&v, sizeof(T), what);
        return v;
    }

    /// Reads `count` elements into v, in chunks; throws if the input is known
    /// to be shorter.
    template <typename T>
    void readArray(std::vector<T>& v, size_t count, const char* what) {
        FAISS_THROW_IF_NOT_FMT(count <= std::numeric_limits<size_t>::max() / sizeof(T),
                               "corrupt input '%s': %s has an absurd size %zu", name.c_str(), what,
                               count);
        size_t bytes = count * sizeof(T);
        if (known_) {
            FAISS_THROW_IF_NOT_FMT(bytes <= remaining(),
                                   "truncated input '%s': %s needs %zu bytes at byte %zu, only "
                                   "%zu remain",
                                   name.c_str(), what, bytes, offset_, remaining());
        }
        v.clear();
        if (known_) {
            // the input holds all of it (checked above): one allocation, one
            // read, as FAISS's reader does (no copies as the vector grows)
            v.resize(count);
            readExact(v.data(), bytes, what);
            return;
        }
        // size unknown (a stream): grow as the bytes arrive, so that a
        // corrupt count cannot make us allocate memory the input never fills
        const size_t perChunk = std::max<size_t>(1, kChunkBytes / sizeof(T));
        size_t done = 0;
        while (done < count) {
            size_t n = std::min(perChunk, count - done);
            v.resize(done + n);
            readExact(v.data() + done, n * sizeof(T), what);
            done += n;
        }
    }

    /// FAISS's vector layout: a size_t count (at most maxCount), then data.
    template <typename T>
    void readVector(std::vector<T>& v, size_t maxCount, const char* what) {
        size_t count = read<size_t>(what);
        FAISS_THROW_IF_NOT_FMT(count <= maxCount,
                               "corrupt input '%s': %s has %zu elements (at most %zu expected)",
                               name.c_str(), what, count, maxCount);
        readArray(v, count, what);
    }

    /// Makes the next read return these bytes again.
    void pushBack(const void* p, size_t bytes) {
        auto* b = static_cast<const uint8_t*>(p);
        for (size_t i = bytes; i > 0; --i) pushback_.push_back(b[i - 1]);
        offset_ -= bytes;
    }

    /// Bytes left in the input, when known.
    size_t remaining() const { return limit_ - std::min(limit_, fromInner_) + pushback_.size(); }

  private:
    faiss::IOReader* inner_;
    std::vector<uint8_t> pushback_;  // read back to front
    size_t offset_ = 0;
    size_t fromInner_ = 0;
    bool known_ = false;
    size_t limit_ = 0;
    uintptr_t stackTop_ = 0;
    size_t stackBudget_ = 0;
};

/// The faiss::Index fields of FAISS's header.
struct IndexHeader {
    int d = 0;
    int64_t ntotal = 0;
    bool isTrained = false;
    faiss::MetricType metric = faiss::METRIC_L2;
    float metricArg = 0;

    void applyTo(faiss::Index* idx) const {
        idx->d = d;
        idx->ntotal = ntotal;
        idx->is_trained = isTrained;
        idx->metric_type = metric;
        idx->metric_arg = metricArg;
    }
};

IndexHeader readHeader(StreamReader& r, const char* cls) {
    IndexHeader h;
    int32_t d = r.read<int32_t>("index header (d)");
    FAISS_THROW_IF_NOT_FMT(d >= 0 && d <= kMaxDim, "corrupt input '%s': %s has d = %d",
                           r.name.c_str(), cls, int(d));
    int64_t ntotal = r.read<int64_t>("index header (ntotal)");
    FAISS_THROW_IF_NOT_FMT(ntotal >= 0 && ntotal <= kMaxNtotal,
                           "corrupt input '%s': %s has ntotal = %" PRId64, r.name.c_str(), cls,
                           ntotal);
    r.read<int64_t>("index header");  // two unused fields
    r.read<int64_t>("index header");
    uint8_t trained = r.read<uint8_t>("index header (is_trained)");
    FAISS_THROW_IF_NOT_FMT(trained <= 1, "corrupt input '%s': %s has is_trained byte %d",
                           r.name.c_str(), cls, int(trained));
    int32_t metric = r.read<int32_t>("index header (metric_type)");
    FAISS_THROW_IF_NOT_FMT(isKnownMetric(metric), "corrupt input '%s': %s has metric_type %d",
                           r.name.c_str(), cls, int(metric));
    h.d = d;
    h.ntotal = ntotal;
    h.isTrained = trained != 0;
    h.metric = faiss::MetricType(metric);
    if (metric > 1) {
        h.metricArg = r.read<float>("index header (metric_arg)");
        FAISS_THROW_IF_NOT_FMT(std::isfinite(h.metricArg),
                               "corrupt input '%s': %s has metric_arg %g", r.name.c_str(), cls,
                               double(h.metricArg));
    }
    return h;
}

/// Runs a FAISS reader, turning whatever it throws into FaissException.
template <typename F>
auto delegateToFaiss(StreamReader& r, uint32_t h, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const faiss::FaissException&) {
        throw;
    } catch (const std::bad_alloc&) {
        FAISS_THROW_FMT("corrupt input '%s': FAISS's reader for fourcc '%s' ran out of memory",
                        r.name.c_str(), faiss::fourcc_inv_printable(h).c_str());
    } catch (const std::exception& e) {
        FAISS_THROW_FMT("corrupt input '%s': FAISS's reader for fourcc '%s' failed: %s",
                        r.name.c_str(), faiss::fourcc_inv_printable(h).c_str(), e.what());
    }
}

/// Reads the common VectorTransform fields: d_in, d_out, is_trained.
void readTransformTail(StreamReader& r, faiss::VectorTransform* vt, const char* cls) {
    int32_t dIn = r.read<int32_t>("VectorTransform d_in");
    int32_t dOut = r.read<int32_t>("VectorTransform d_out");
    uint8_t trained = r.read<uint8_t>("VectorTransform is_trained");
    FAISS_THROW_IF_NOT_FMT(dIn > 0 && dIn <= kMaxDim && dIn == dOut && trained <= 1,
                           "corrupt input '%s': %s has d_in = %d, d_out = %d, is_trained byte "
                           "%d",
                           r.name.c_str(), cls, int(dIn), int(dOut), int(trained));
    vt->d_in = dIn;
    vt->d_out = dOut;
    vt->is_trained = trained != 0;
}

/// Throws, under IO_FLAG_CHECKED_ONLY, instead of handing fourcc h to FAISS.
void checkDelegationAllowed(StreamReader& r, uint32_t h, int ioFlags, const char* what) {
    FAISS_THROW_IF_NOT_FMT(!(ioFlags & IO_FLAG_CHECKED_ONLY),
                           "read_index: %s fourcc '%s' in '%s' is read only by FAISS's own "
                           "reader, which IO_FLAG_CHECKED_ONLY excludes",
                           what, faiss::fourcc_inv_printable(h).c_str(), r.name.c_str());
}

faiss::VectorTransform* readTransform(StreamReader& r, int ioFlags) {
    uint32_t h = r.read<uint32_t>("VectorTransform fourcc");
    if (h == kFourccRowCentering) {
        auto vt = std::make_unique<RowCenteringTransform>();
        readTransformTail(r, vt.get(), "RowCenteringTransform");
        return vt.release();
    }
    if (h == kFourccNormalization) {
        float norm = r.read<float>("NormalizationTransform norm");
        // FAISS applies only the L2 norm (others throw "not implemented")
        FAISS_THROW_IF_NOT_FMT(norm == 2.0f,
                               "corrupt input '%s': NormalizationTransform has norm %g (only "
                               "2 is supported)",
                               r.name.c_str(), double(norm));
        auto vt = std::make_unique<faiss::NormalizationTransform>();
        vt->norm = norm;
        readTransformTail(r, vt.get(), "NormalizationTransform");
        return vt.release();
    }
    checkDelegationAllowed(r, h, ioFlags, "VectorTransform");
    r.pushBack(&h, sizeof(h));
    faiss::VectorTransform* vt =
        delegateToFaiss(r, h, [&] { return faiss::read_VectorTransform(&r); });
    FAISS_THROW_IF_NOT_FMT(vt, "corrupt input '%s': no VectorTransform read", r.name.c_str());
    return vt;
}

faiss::Index* readIndexRec(StreamReader& r, int ioFlags, int depth);

/// Reads the inner index of a wrapper; never null.
faiss::Index* readInner(StreamReader& r, int ioFlags, int depth, const char* cls) {
    faiss::Index* inner = readIndexRec(r, ioFlags, depth + 1);
    FAISS_THROW_IF_NOT_FMT(inner, "corrupt input '%s': %s wraps no index", r.name.c_str(), cls);
    return inner;
}

faiss::Index* readFlat(StreamReader& r, uint32_t h) {
    const char* cls = h == kFourccFlatL2   ? "IndexFlatL2"
                      : h == kFourccFlatIP ? "IndexFlatIP"
                                           : "IndexFlat";
    IndexHeader hd = readHeader(r, cls);
    FAISS_THROW_IF_NOT_FMT((h == kFourccFlatL2) == (hd.metric == faiss::METRIC_L2) &&
                               (h == kFourccFlatIP) == (hd.metric == faiss::METRIC_INNER_PRODUCT),
                           "corrupt input '%s': %s with metric_type %d", r.name.c_str(), cls,
                           int(hd.metric));
    std::unique_ptr<faiss::IndexFlat> idx;
    if (h == kFourccFlatL2) {
        idx = std::make_unique<faiss::IndexFlatL2>(hd.d);
    } else if (h == kFourccFlatIP) {
        idx = std::make_unique<faiss::IndexFlatIP>(hd.d);
    } else {
        idx = std::make_unique<faiss::IndexFlat>(hd.d, hd.metric);
    }
    hd.applyTo(idx.get());
    idx->code_size = sizeof(float) * size_t(hd.d);
    // FAISS writes the number of floats, then the floats
    size_t nfloat = r.read<size_t>("IndexFlat vector count");
    size_t expected = size_t(hd.ntotal) * size_t(hd.d);  // < 2^60: no overflow
    FAISS_THROW_IF_NOT_FMT(nfloat == expected,
                           "corrupt input '%s': %s holds %zu floats, expected ntotal * d = %" PRId64
                           " * %d",
                           r.name.c_str(), cls, nfloat, hd.ntotal, hd.d);
    r.readArray(idx->codes, nfloat * sizeof(float), "IndexFlat vectors");
    return idx.release();
}

/// Whether index answers ids of its own rather than positions in
/// [0, ntotal): an id map, directly or under pre-transforms.
bool mapsIds(const faiss::Index* index) {
    if (dynamic_cast<const faiss::IndexIDMap*>(index)) return true;
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index)) return mapsIds(pt->index);
    return false;
}

faiss::Index* readIDMap(StreamReader& r, uint32_t h, int ioFlags, int depth) {
    const bool two = h == kFourccIDMap2;
    const char* cls = two ? "IndexIDMap2" : "IndexIDMap";
    IndexHeader hd = readHeader(r, cls);
    std::unique_ptr<faiss::IndexIDMap> idx;
    if (two) {
        idx = std::make_unique<faiss::IndexIDMap2>();
    } else {
        idx = std::make_unique<faiss::IndexIDMap>();
    }
    hd.applyTo(idx.get());
    idx->index = readInner(r, ioFlags, depth, cls);
    idx->own_fields = true;
    FAISS_THROW_IF_NOT_FMT(idx->index->d == hd.d && idx->index->ntotal == hd.ntotal,
                           "corrupt input '%s': %s (d %d, ntotal %" PRId64
                           ") wraps an index with d %d, ntotal %" PRId64,
                           r.name.c_str(), cls, hd.d, hd.ntotal, int(idx->index->d),
                           int64_t(idx->index->ntotal));
    FAISS_THROW_IF_NOT_FMT(!hd.isTrained || idx->index->is_trained,
                           "corrupt input '%s': trained %s wraps an untrained index",
                           r.name.c_str(), cls);
    // FAISS's IndexIDMap::search indexes id_map with the labels of the index
    // it wraps, unchecked; an inner id map answers its own (any) ids. FAISS's
    // API cannot fill such a tree (the outer add_with_ids calls the inner id
    // map's add, which throws), so only an empty one is read. Found by
    // fuzzing: IDMap2 over IDMap2 read, then a search read past id_map.
    FAISS_THROW_IF_NOT_FMT(hd.ntotal == 0 || !mapsIds(idx->index),
                           "corrupt input '%s': %s with ntotal %" PRId64
                           " wraps another id map, whose ids it would use as positions",
                           r.name.c_str(), cls, hd.ntotal);
    r.readVector(idx->id_map, size_t(hd.ntotal), "IndexIDMap id_map");
    FAISS_THROW_IF_NOT_FMT(idx->id_map.size() == size_t(hd.ntotal),
                           "corrupt input '%s': %s has %zu ids for ntotal %" PRId64, r.name.c_str(),
                           cls, idx->id_map.size(), hd.ntotal);
    if (two) static_cast<faiss::IndexIDMap2*>(idx.get())->construct_rev_map();
    return idx.release();
}

faiss::Index* readPreTransform(StreamReader& r, int ioFlags, int depth) {
    const char* cls = "IndexPreTransform";
    IndexHeader hd = readHeader(r, cls);
    auto idx = std::make_unique<faiss::IndexPreTransform>();
    idx->own_fields = true;  // the destructor frees what was read so far
    hd.applyTo(idx.get());
    int32_t nt = r.read<int32_t>("IndexPreTransform chain length");
    FAISS_THROW_IF_NOT_FMT(nt >= 0 && nt <= kMaxChainLength,
                           "corrupt input '%s': %s has a chain of %d transforms", r.name.c_str(),
                           cls, int(nt));
    int dim = hd.d;
    for (int32_t i = 0; i < nt; ++i) {
        std::unique_ptr<faiss::VectorTransform> vt(readTransform(r, ioFlags));
        FAISS_THROW_IF_NOT_FMT(vt->d_in == dim,
                               "corrupt input '%s': %s transform %d takes d %d, expected %d",
                               r.name.c_str(), cls, int(i), vt->d_in, dim);
        dim = vt->d_out;
        idx->chain.push_back(vt.release());
    }
    idx->index = readInner(r, ioFlags, depth, cls);
    FAISS_THROW_IF_NOT_FMT(idx->index->d == dim && idx->index->ntotal == hd.ntotal,
                           "corrupt input '%s': %s (output d %d, ntotal %" PRId64
                           ") wraps an index with d %d, ntotal %" PRId64,
                           r.name.c_str(), cls, dim, hd.ntotal, int(idx->index->d),
                           int64_t(idx->index->ntotal));
    if (hd.isTrained) {
        bool allTrained = idx->index->is_trained;
        for (const faiss::VectorTransform* vt : idx->chain)
            allTrained = allTrained && vt->is_trained;
        FAISS_THROW_IF_NOT_FMT(allTrained, "corrupt input '%s': trained %s holds an untrained part",
                               r.name.c_str(), cls);
    }
    return idx.release();
}

/// IndexNNDescentFlat in FAISS's layout (faiss/impl/index_write.cpp): the
/// header; NNDescent's ntotal, d, K, S, R, L, iter, search_L, random_seed
/// (int32 each), has_built (u8), final_graph (FAISS vector of int32); then
/// the storage index.
faiss::Index* readNNDescentFlat(StreamReader& r, int ioFlags, int depth) {
    const char* cls = "IndexNNDescentFlat";
    IndexHeader hd = readHeader(r, cls);
    auto idx = std::make_unique<IndexNNDescentFlatChecked>();
    idx->own_fields = true;  // the destructor frees the storage read below
    hd.applyTo(idx.get());
    faiss::NNDescent& nn = idx->nndescent;
    const int32_t ntotal = r.read<int32_t>("NNDescent ntotal");
    const int32_t d = r.read<int32_t>("NNDescent d");
    FAISS_THROW_IF_NOT_FMT(ntotal == hd.ntotal && d == hd.d,
                           "corrupt input '%s': %s (d %d, ntotal %" PRId64
                           ") holds an NNDescent with d %d, ntotal %d",
                           r.name.c_str(), cls, hd.d, hd.ntotal, int(d), int(ntotal));
    const int32_t K = r.read<int32_t>("NNDescent K");
    FAISS_THROW_IF_NOT_FMT(K >= 1 && K <= kMaxGraphDegree,
                           "corrupt input '%s': %s has graph degree K = %d", r.name.c_str(), cls,
                           int(K));
    const char* names[] = {"S", "R", "L", "iter", "search_L"};
    int32_t params[5];
    for (int i = 0; i < 5; ++i) {
        params[i] = r.read<int32_t>("NNDescent parameters");
        FAISS_THROW_IF_NOT_FMT(params[i] >= 0 && params[i] <= kMaxNNDescentParam,
                               "corrupt input '%s': %s has NNDescent %s = %d (expected 0..%d)",
                               r.name.c_str(), cls, names[i], int(params[i]), kMaxNNDescentParam);
    }
    nn.ntotal = ntotal;
    nn.d = d;
    nn.K = K;
    nn.S = params[0];
    nn.R = params[1];
    nn.L = params[2];
    nn.iter = params[3];
    nn.search_L = params[4];
    nn.random_seed = r.read<int32_t>("NNDescent random_seed");
    const uint8_t built = r.read<uint8_t>("NNDescent has_built");
    FAISS_THROW_IF_NOT_FMT(built <= 1, "corrupt input '%s': %s has has_built byte %d",
                           r.name.c_str(), cls, int(built));
    nn.has_built = built != 0;
    // no writer builds an empty graph (FAISS's needs > 100 nodes; GNND's
    // twin says built only when ntotal > 0), and FAISS's search would draw
    // its random start nodes modulo ntotal = 0
    FAISS_THROW_IF_NOT_FMT(!nn.has_built || ntotal > 0,
                           "corrupt input '%s': %s has an empty graph flagged as built",
                           r.name.c_str(), cls);
    const size_t graphSize = size_t(ntotal) * size_t(K);
    r.readVector(nn.final_graph, graphSize, "NNDescent final_graph");
    FAISS_THROW_IF_NOT_FMT(
        nn.final_graph.size() == graphSize || (!nn.has_built && nn.final_graph.empty()),
        "corrupt input '%s': %s has %zu graph entries for ntotal * K = %d * %d", r.name.c_str(),
        cls, nn.final_graph.size(), int(ntotal), int(K));
    for (size_t i = 0; i < nn.final_graph.size(); ++i) {
        const int id = nn.final_graph[i];
        // -1: no neighbour (a list of a graph with fewer than K + 1 nodes)
        FAISS_THROW_IF_NOT_FMT(id >= -1 && id < ntotal,
                               "corrupt input '%s': %s graph entry %zu (node %zu) is %d, not a "
                               "node id below ntotal %d",
                               r.name.c_str(), cls, i, i / size_t(K), id, int(ntotal));
    }

    idx->storage = readInner(r, ioFlags, depth, cls);
    const faiss::Index& storage = *idx->storage;
    auto* flat = dynamic_cast<const faiss::IndexFlat*>(&storage);
    FAISS_THROW_IF_NOT_FMT(flat,
                           "corrupt input '%s': %s stores its vectors in a %s, not an "
                           "IndexFlat",
                           r.name.c_str(), cls, typeid(storage).name());
    FAISS_THROW_IF_NOT_FMT(
        flat->d == hd.d && flat->ntotal == hd.ntotal && flat->metric_type == hd.metric,
        "corrupt input '%s': %s (d %d, ntotal %" PRId64
        ", metric %d) stores its vectors in an IndexFlat with d %d, ntotal "
        "%" PRId64 ", metric %d",
        r.name.c_str(), cls, hd.d, hd.ntotal, int(hd.metric), int(flat->d), int64_t(flat->ntotal),
        int(flat->metric_type));
    return idx.release();
}

/// Reads a FAISS vector of exactly `count` elements of the Bi-level LSH
/// model (`what` names it).
template <typename T>
void readModelArray(StreamReader& r, std::vector<T>& v, size_t count, const char* what) {
    r.readVector(v, count, what);
    FAISS_THROW_IF_NOT_FMT(v.size() == count,
                           "corrupt input '%s': IndexBiLevelLSH model %s has %zu elements, "
                           "expected %zu",
                           r.name.c_str(), what, v.size(), count);
}

/// Throws unless every value of v is finite (or, with allowInf, not NaN).
void checkModelFloats(StreamReader& r, const std::vector<float>& v, const char* what,
                      bool allowInf = false) {
    for (size_t i = 0; i < v.size(); ++i) {
        const bool ok = allowInf ? !std::isnan(v[i]) : std::isfinite(v[i]);
        FAISS_THROW_IF_NOT_FMT(ok, "corrupt input '%s': IndexBiLevelLSH model %s[%zu] is %g",
                               r.name.c_str(), what, i, double(v[i]));
    }
}

/// Runs a check of the Bi-level LSH core, adding the input's name to what it
/// throws.
template <typename F>
void checkBiLevel(StreamReader& r, F&& check) {
    try {
        check();
    } catch (const faiss::FaissException& e) {
        FAISS_THROW_FMT("corrupt input '%s': IndexBiLevelLSH: %s", r.name.c_str(), e.what());
    } catch (const std::bad_alloc&) {
        FAISS_THROW_FMT("input '%s': IndexBiLevelLSH: out of memory rebuilding its tables",
                        r.name.c_str());
    }
}

/// The header of an IndexBiLevelLSH, checked against what the index can be.
IndexHeader readBiLevelHeader(StreamReader& r, const char* cls) {
    IndexHeader hd = readHeader(r, cls);
    FAISS_THROW_IF_NOT_FMT(hd.d > 0, "corrupt input '%s': %s has d = %d", r.name.c_str(), cls,
                           hd.d);
    FAISS_THROW_IF_NOT_FMT(hd.metric == faiss::METRIC_L2,
                           "corrupt input '%s': %s has metric_type %d (only METRIC_L2)",
                           r.name.c_str(), cls, int(hd.metric));
    FAISS_THROW_IF_NOT_FMT(hd.ntotal <= kBiLevelLSHMaxNtotal,
                           "corrupt input '%s': %s has ntotal = %" PRId64 " (at most %" PRId64 ")",
                           r.name.c_str(), cls, hd.ntotal, kBiLevelLSHMaxNtotal);
    FAISS_THROW_IF_NOT_FMT(hd.isTrained || hd.ntotal == 0,
                           "corrupt input '%s': untrained %s holds %" PRId64 " vectors",
                           r.name.c_str(), cls, hd.ntotal);
    return hd;
}

/// The configuration of an IndexBiLevelLSH of format `version`, checked.
BiLevelLSHConfig readBiLevelConfig(StreamReader& r, int32_t version) {
    BiLevelLSHConfig c;
    c.treeDepth = r.read<int32_t>("IndexBiLevelLSH treeDepth");
    c.nTables = r.read<int32_t>("IndexBiLevelLSH nTables");
    c.nProjections = r.read<int32_t>("IndexBiLevelLSH nProjections");
    c.bucketWidth = r.read<float>("IndexBiLevelLSH bucketWidth");
    c.meanRuleC = r.read<float>("IndexBiLevelLSH meanRuleC");
    c.diameterIterations = r.read<int32_t>("IndexBiLevelLSH diameterIterations");
    c.cuckooSubTables = r.read<int32_t>("IndexBiLevelLSH cuckooSubTables");
    c.cuckooMaxLoad = r.read<float>("IndexBiLevelLSH cuckooMaxLoad");
    c.seed = r.read<uint64_t>("IndexBiLevelLSH seed");
    if (version == 1) {
        // what version 1 indexes did: the RMS rule, one group per search
        c.widthRule = BiLevelWidthRule::RmsRadius;
        c.defaultGroupProbes = 1;
        c.defaultGroupMargin = 0.f;
    } else {
        c.widthRule = BiLevelWidthRule(r.read<int32_t>("IndexBiLevelLSH widthRule"));
        c.widthNeighbours = r.read<int32_t>("IndexBiLevelLSH widthNeighbours");
        c.defaultNprobe = r.read<int32_t>("IndexBiLevelLSH defaultNprobe");
        c.defaultGroupProbes = r.read<int32_t>("IndexBiLevelLSH defaultGroupProbes");
        c.defaultMinCandidates = r.read<int64_t>("IndexBiLevelLSH defaultMinCandidates");
        c.defaultGroupMargin = r.read<float>("IndexBiLevelLSH defaultGroupMargin");
        c.autotuneRecall = r.read<float>("IndexBiLevelLSH autotuneRecall");
        c.lattice = r.read<int32_t>("IndexBiLevelLSH lattice");
    }
    checkBiLevel(r, [&] { c.check(); });
    return c;
}

/// The values of a read model that its consistency check does not cover:
/// finite arrays, projection biases in [0, 1), non-negative counts.
void checkBiLevelModelValues(StreamReader& r, const BiLevelLSHModel& m) {
    checkModelFloats(r, m.nodeVec, "nodeVec");
    checkModelFloats(r, m.nodeThreshold, "nodeThreshold", /*allowInf=*/true);
    checkModelFloats(r, m.leafMean, "leafMean");
    checkModelFloats(r, m.leafOffset, "leafOffset");
    checkModelFloats(r, m.proj, "proj");
    for (size_t i = 0; i < m.projBias.size(); ++i)
        FAISS_THROW_IF_NOT_FMT(m.projBias[i] >= 0.f && m.projBias[i] < 1.f,
                               "corrupt input '%s': IndexBiLevelLSH model projBias[%zu] is "
                               "%g, not in [0, 1)",
                               r.name.c_str(), i, double(m.projBias[i]));
    for (size_t g = 0; g < m.leafTrainCount.size(); ++g)
        FAISS_THROW_IF_NOT_FMT(m.leafTrainCount[g] >= 0,
                               "corrupt input '%s': IndexBiLevelLSH model leafTrainCount[%zu] "
                               "is %" PRId64,
                               r.name.c_str(), g, m.leafTrainCount[g]);
}

/// The trained model of an IndexBiLevelLSH of dimension d and configuration
/// c: its shape checked against both before any array is read, then its
/// arrays and their values.
BiLevelLSHModel readBiLevelModel(StreamReader& r, const char* cls, int d,
                                 const BiLevelLSHConfig& c) {
    BiLevelLSHModel m;
    m.d = r.read<int32_t>("IndexBiLevelLSH model d");
    m.depth = r.read<int32_t>("IndexBiLevelLSH model depth");
    m.nTables = r.read<int32_t>("IndexBiLevelLSH model nTables");
    m.nProjections = r.read<int32_t>("IndexBiLevelLSH model nProjections");
    m.bits = r.read<int32_t>("IndexBiLevelLSH model bits");
    m.lattice = c.lattice;
    FAISS_THROW_IF_NOT_FMT(m.d == d && m.depth == c.treeDepth && m.nTables == c.nTables &&
                               m.nProjections == c.nProjections &&
                               m.bits == lsh::bitsPerCoordinate(c.nProjections),
                           "corrupt input '%s': %s model (d %d, depth %d, L %d, M %d, bits "
                           "%d) does not match the index (d %d) and its configuration "
                           "(depth %d, L %d, M %d)",
                           r.name.c_str(), cls, m.d, m.depth, m.nTables, m.nProjections, m.bits,
                           d, c.treeDepth, c.nTables, c.nProjections);
    // sizes from checked dimensions: d <= 2^20, nodes < 2^14, L x M <= 2^11
    const size_t dims = size_t(d);
    const size_t nodes = size_t(m.internalNodes()), G = size_t(m.groups());
    const size_t LM = size_t(m.nTables) * size_t(m.nProjections);
    readModelArray(r, m.nodeRule, nodes, "nodeRule");
    readModelArray(r, m.nodeVec, nodes * dims, "nodeVec");
    readModelArray(r, m.nodeThreshold, nodes, "nodeThreshold");
    readModelArray(r, m.leafMean, G * dims, "leafMean");
    readModelArray(r, m.leafWidth, G, "leafWidth");
    readModelArray(r, m.leafOffset, G * LM, "leafOffset");
    readModelArray(r, m.leafTrainCount, G, "leafTrainCount");
    readModelArray(r, m.proj, LM * dims, "proj");
    readModelArray(r, m.projBias, LM, "projBias");
    checkBiLevel(r, [&] { m.checkConsistent(); });
    checkBiLevelModelValues(r, m);
    return m;
}

/// Refuses a configuration whose hash table for the header's vectors would
/// not stay proportional to them (setContents builds it).
void checkBiLevelTableSize(StreamReader& r, const char* cls, const IndexHeader& hd,
                           const BiLevelLSHConfig& c) {
    const double maxKeys = double(c.nTables) * double(hd.ntotal);
    const double slots = maxKeys / double(c.cuckooMaxLoad);
    FAISS_THROW_IF_NOT_FMT(
        slots <= std::max(kBiLevelLSHSmallTableSlots, kBiLevelLSHMaxSlotsPerKey * maxKeys),
        "corrupt input '%s': %s has cuckooMaxLoad %g: its hash table for up to %.0f keys "
        "(nTables %d x ntotal %" PRId64
        ") would need %.3g slots (at most %.0f per key, or "
        "%.0f in all)",
        r.name.c_str(), cls, double(c.cuckooMaxLoad), maxKeys, c.nTables, hd.ntotal, slots,
        kBiLevelLSHMaxSlotsPerKey, kBiLevelLSHSmallTableSlots);
}

/// IndexBiLevelLSH ("IxBL", layout at the top of this file). Every size is
/// checked against the header and the configuration before it is read;
/// setContents then rebuilds the hash tables.
faiss::Index* readBiLevelLSH(StreamReader& r) {
    const char* cls = "IndexBiLevelLSH";
    const int32_t version = r.read<int32_t>("IndexBiLevelLSH version");
    FAISS_THROW_IF_NOT_FMT(version == 1 || version == kBiLevelLSHVersion,
                           "corrupt input '%s': %s has format version %d (this reader knows 1 "
                           "and %d)",
                           r.name.c_str(), cls, int(version), int(kBiLevelLSHVersion));
    const IndexHeader hd = readBiLevelHeader(r, cls);
    const BiLevelLSHConfig c = readBiLevelConfig(r, version);
    const uint8_t hasModel = r.read<uint8_t>("IndexBiLevelLSH has_model");
    FAISS_THROW_IF_NOT_FMT(hasModel <= 1 && (hasModel != 0) == hd.isTrained,
                           "corrupt input '%s': %s has has_model byte %d with is_trained %d",
                           r.name.c_str(), cls, int(hasModel), int(hd.isTrained));
    BiLevelLSHModel m;
    if (hasModel) m = readBiLevelModel(r, cls, hd.d, c);
    const size_t nfloat = size_t(hd.ntotal) * size_t(hd.d);  // < 2^51: no overflow
    std::vector<float> vectors;
    r.readVector(vectors, nfloat, "IndexBiLevelLSH vectors");
    FAISS_THROW_IF_NOT_FMT(vectors.size() == nfloat,
                           "corrupt input '%s': %s holds %zu floats, expected ntotal * d = %" PRId64
                           " * %d",
                           r.name.c_str(), cls, vectors.size(), hd.ntotal, hd.d);
    checkBiLevelTableSize(r, cls, hd, c);

    auto idx = std::make_unique<IndexBiLevelLSH>(hd.d, c, faiss::METRIC_L2);
    checkBiLevel(r, [&] { idx->setContents(c, std::move(m), std::move(vectors)); });
    FAISS_THROW_IF_NOT_FMT(idx->ntotal == hd.ntotal && idx->is_trained == hd.isTrained,
                           "corrupt input '%s': %s read back with ntotal %" PRId64
                           ", is_trained %d; the header says %" PRId64 ", %d",
                           r.name.c_str(), cls, int64_t(idx->ntotal), int(idx->is_trained),
                           hd.ntotal, int(hd.isTrained));
    return idx.release();
}

faiss::Index* readIndexRec(StreamReader& r, int ioFlags, int depth) {
    FAISS_THROW_IF_NOT_FMT(depth <= kMaxDepth,
                           "corrupt input '%s': indexes nested more than %d deep", r.name.c_str(),
                           kMaxDepth);
    uint32_t h = r.read<uint32_t>("index fourcc");
    if (h == kFourccFlatL2 || h == kFourccFlatIP || h == kFourccFlat) return readFlat(r, h);
    if (h == kFourccIDMap || h == kFourccIDMap2) return readIDMap(r, h, ioFlags, depth);
    if (h == kFourccPreTransform) return readPreTransform(r, ioFlags, depth);
    if (h == kFourccNNDescentFlat) return readNNDescentFlat(r, ioFlags, depth);
    if (h == kFourccBiLevelLSH) return readBiLevelLSH(r);
    checkDelegationAllowed(r, h, ioFlags, "index");
    r.pushBack(&h, sizeof(h));
    return delegateToFaiss(r, h, [&] { return faiss::read_index(&r, ioFlags); });
}

}  // namespace

// ---------------------------------------------------------------- public API

int index_nesting_depth(const faiss::Index* index) {
    if (!index) return 0;
    if (dynamic_cast<const CpuConvertible*>(index)) return 1;  // its twin: at most 1
    if (auto m = dynamic_cast<const faiss::IndexIDMap*>(index))
        return 1 + index_nesting_depth(m->index);
    if (auto pt = dynamic_cast<const faiss::IndexPreTransform*>(index))
        return 1 + index_nesting_depth(pt->index);
    if (dynamic_cast<const faiss::IndexNNDescentFlat*>(index)) return 1;  // and its storage
    return 0;
}

void write_index(const faiss::Index* idx, faiss::IOWriter* writer) {
    FAISS_THROW_IF_NOT_MSG(idx, "write_index: null index");
    FAISS_THROW_IF_NOT_MSG(writer, "write_index: null writer");
    const int depth = index_nesting_depth(idx);
    FAISS_THROW_IF_NOT_FMT(depth <= kMaxIndexNesting,
                           "write_index: the index nests %d levels deep; read_index accepts at "
                           "most %d (nothing was written)",
                           depth, kMaxIndexNesting);
    writeIndexRec(idx, writer);
}

void write_index(const faiss::Index* idx, const char* fname) {
    FAISS_THROW_IF_NOT_MSG(idx, "write_index: null index");
    FAISS_THROW_IF_NOT_MSG(fname, "write_index: null file name");
    const int depth = index_nesting_depth(idx);
    FAISS_THROW_IF_NOT_FMT(depth <= kMaxIndexNesting,
                           "write_index: the index nests %d levels deep; read_index accepts at "
                           "most %d ('%s' was not opened)",
                           depth, kMaxIndexNesting, fname);
    CheckedFileWriter writer(fname);
    writeIndexRec(idx, &writer);
    writer.close();
}

std::vector<uint8_t> serialize_index(const faiss::Index* idx) {
    faiss::VectorIOWriter writer;
    faiss_ext::write_index(idx, &writer);
    return std::move(writer.data);
}

faiss::Index* read_index(faiss::IOReader* reader, int io_flags) {
    FAISS_THROW_IF_NOT_MSG(reader, "read_index: null reader");
    StreamReader r(reader);
    faiss::Index* idx = readIndexRec(r, io_flags, 0);
    FAISS_THROW_IF_NOT_FMT(idx, "read_index: no index in '%s'", r.name.c_str());
    return idx;
}

faiss::Index* read_index(const char* fname, int io_flags) {
    FAISS_THROW_IF_NOT_MSG(fname, "read_index: null file name");
    struct stat st;
    FAISS_THROW_IF_NOT_FMT(::stat(fname, &st) != 0 || !S_ISDIR(st.st_mode),
                           "read_index: '%s' is a directory, not an index file", fname);
    faiss::FileIOReader reader(fname);
    return faiss_ext::read_index(&reader, io_flags);
}

faiss::Index* deserialize_index(const uint8_t* data, size_t size, int io_flags) {
    FAISS_THROW_IF_NOT_MSG(data || size == 0, "deserialize_index: null data");
    faiss::VectorIOReader reader;
    if (size > 0) reader.data.assign(data, data + size);
    reader.name = "<bytes>";
    return faiss_ext::read_index(&reader, io_flags);
}

faiss::Index* deserialize_index(const std::vector<uint8_t>& data, int io_flags) {
    return deserialize_index(data.data(), data.size(), io_flags);
}

}  // namespace faiss_ext
