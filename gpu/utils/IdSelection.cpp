#include "faiss_ext/gpu/utils/IdSelection.h"

#include "faiss_ext/gpu/utils/DeviceUtils.h"

#include <faiss/impl/FaissAssert.h>

#include <algorithm>

namespace faiss_ext {
namespace gpu {

std::unique_ptr<IdSelection> IdSelection::fromParams(const faiss::SearchParameters* params,
                                                     int64_t ntotal) {
    if (!params || !params->sel) return nullptr;
    return std::unique_ptr<IdSelection>(new IdSelection(params->sel, ntotal));
}

void IdSelection::copyWordsTo(uint32_t* dst, cudaStream_t stream) const {
    if (words_.empty()) return;
    FAISS_EXT_CUDA_CHECK(cudaMemcpyAsync(dst, words_.data(), sizeof(uint32_t) * words_.size(),
                                         cudaMemcpyHostToDevice, stream));
}

IdSelection::IdSelection(const faiss::IDSelector* sel, int64_t ntotal) : ntotal_(ntotal) {
    FAISS_THROW_IF_NOT_MSG(sel, "IdSelection: null IDSelector");
    FAISS_THROW_IF_NOT_FMT(ntotal >= 0 && ntotal < (int64_t(1) << 32),
                           "IdSelection: %lld positions (at most 2^32 - 1)", (long long)ntotal);
    if (auto b = dynamic_cast<const faiss::IDSelectorBitmap*>(sel)) {
        FAISS_THROW_IF_NOT_MSG(b->bitmap || b->n == 0, "IDSelectorBitmap: null bitmap");
    }
    if (auto a = dynamic_cast<const faiss::IDSelectorArray*>(sel)) {
        FAISS_THROW_IF_NOT_MSG(a->ids || a->n == 0, "IDSelectorArray: null ids");
    }
    words_.assign(size_t((ntotal + 31) / 32), 0u);
    fill_(sel);
    finish_();
}

void IdSelection::setRange_(int64_t lo, int64_t hi) {
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, ntotal_);
    for (int64_t i = lo; i < hi;) {
        const int64_t w = i >> 5;
        const int64_t end = std::min<int64_t>(hi, (w + 1) << 5);
        const int bits = int(end - i);
        const uint32_t mask = bits == 32 ? ~0u : (((1u << bits) - 1u) << (i & 31));
        words_[size_t(w)] |= mask;
        i = end;
    }
}

void IdSelection::setIds_(const int64_t* ids, size_t n) {
    for (size_t j = 0; j < n; ++j) {
        const int64_t i = ids[j];
        if (i >= 0 && i < ntotal_) words_[size_t(i >> 5)] |= 1u << (i & 31);
    }
}

void IdSelection::fill_(const faiss::IDSelector* sel) {
    if (auto r = dynamic_cast<const faiss::IDSelectorRange*>(sel)) {
        setRange_(r->imin, r->imax);
    } else if (auto a = dynamic_cast<const faiss::IDSelectorArray*>(sel)) {
        setIds_(a->ids, a->n);
    } else if (auto b = dynamic_cast<const faiss::IDSelectorBatch*>(sel)) {
        for (int64_t i : b->set) {
            if (i >= 0 && i < ntotal_) words_[size_t(i >> 5)] |= 1u << (i & 31);
        }
    } else if (auto bm = dynamic_cast<const faiss::IDSelectorBitmap*>(sel)) {
        // FAISS's bitmap: id i is bit i % 8 of byte i / 8: the same bits as
        // little-endian 32-bit words.
        const size_t bytes = std::min(bm->n, size_t(words_.size()) * 4);
        for (size_t j = 0; j < bytes; ++j) {
            words_[j / 4] |= uint32_t(bm->bitmap[j]) << (8 * (j % 4));
        }
    } else if (dynamic_cast<const faiss::IDSelectorAll*>(sel)) {
        setRange_(0, ntotal_);
    } else if (auto no = dynamic_cast<const faiss::IDSelectorNot*>(sel)) {
        FAISS_THROW_IF_NOT_MSG(no->sel, "IDSelectorNot: null inner selector");
        fill_(no->sel);
        for (auto& w : words_) w = ~w;
    } else {
        const int64_t nw = int64_t(words_.size());
#pragma omp parallel for schedule(static) if (ntotal_ > 65536)
        for (int64_t w = 0; w < nw; ++w) {
            uint32_t bits = 0;
            const int64_t end = std::min<int64_t>(ntotal_, (w + 1) * 32);
            for (int64_t i = w * 32; i < end; ++i) {
                if (sel->is_member(i)) bits |= 1u << (i & 31);
            }
            words_[size_t(w)] = bits;
        }
    }
    // No bit past ntotal (IDSelectorNot, bitmaps longer than the index).
    if (ntotal_ & 31) words_.back() &= (1u << (ntotal_ & 31)) - 1u;
}

void IdSelection::finish_() {
    count_ = 0;
    first_ = ntotal_;
    int64_t last = -1;
    for (size_t w = 0; w < words_.size(); ++w) {
        const uint32_t bits = words_[w];
        if (!bits) continue;
        count_ += __builtin_popcount(bits);
        if (first_ == ntotal_) first_ = int64_t(w) * 32 + __builtin_ctz(bits);
        last = int64_t(w) * 32 + 31 - __builtin_clz(bits);
    }
    contiguous_ = count_ > 0 && last - first_ + 1 == count_;
}

std::vector<uint32_t> IdSelection::positions() const {
    std::vector<uint32_t> out;
    out.reserve(size_t(count_));
    for (size_t w = 0; w < words_.size(); ++w) {
        for (uint32_t bits = words_[w]; bits; bits &= bits - 1) {
            out.push_back(uint32_t(w * 32 + __builtin_ctz(bits)));
        }
    }
    return out;
}

std::vector<uint32_t> IdSelection::unselectedPositions() const {
    std::vector<uint32_t> out;
    out.reserve(size_t(ntotal_ - count_));
    for (int64_t i = 0; i < ntotal_; ++i)
        if (!contains(i)) out.push_back(uint32_t(i));
    return out;
}

}  // namespace gpu
}  // namespace faiss_ext
