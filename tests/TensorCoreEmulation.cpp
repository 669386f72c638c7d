#include "TensorCoreEmulation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace faiss_ext {
namespace test {

float toTf32Truncated(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    if ((b & 0x7F800000u) == 0) b &= 0x80000000u;  // subnormal: flushed to a signed zero
    b &= 0xFFFFE000u;
    float r;
    std::memcpy(&r, &b, 4);
    return r;
}

float toBf16Nearest(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    if ((b & 0x7F800000u) == 0x7F800000u) return v;  // inf / NaN: not in the tests
    const uint32_t lsb = (b >> 16) & 1u;
    b = (b + 0x7FFFu + lsb) & 0xFFFF0000u;  // round to nearest, ties to even
    float r;
    std::memcpy(&r, &b, 4);
    return r;
}

std::pair<float, float> splitBf16(float v) {
    const float h = toBf16Nearest(v);
    return {h, toBf16Nearest(v - h)};
}

float flushSubnormal(float v) { return std::fabs(v) < 1.1754943508222875e-38f ? 0.f * v : v; }

double truncateToMultiple(double v, int exponent) {
    const double unit = std::ldexp(1.0, exponent);
    return std::trunc(v / unit) * unit;
}

float tensorCoreDot(const float* q, const float* x, int d, int t, float (*convert)(float),
                    float acc) {
    for (int i0 = 0; i0 < d; i0 += t) {
        std::vector<double> addends{double(acc)};
        for (int i = i0; i < std::min(d, i0 + t); ++i) {
            addends.push_back(double(convert(q[i])) * double(convert(x[i])));
        }
        double largest = 0.0;
        for (double a : addends) largest = std::max(largest, std::fabs(a));
        if (largest == 0.0) continue;
        const int e = std::ilogb(largest);  // 2^e <= largest < 2^(e+1)
        double sum = 0.0;
        for (double a : addends) sum += truncateToMultiple(a, e - 23);  // exact: few bits
        // Normalise by truncation to 24 significant bits.
        if (sum != 0.0) sum = truncateToMultiple(sum, std::ilogb(std::fabs(sum)) - 23);
        acc = float(sum);
        if (std::fabs(acc) < 1.1754943508222875e-38f) acc = 0.f;  // flushed partial sum
    }
    return acc;
}

float sequentialDot(const float* q, const float* x, int d) {
    float s = 0.f;
    for (int i = 0; i < d; ++i) s = std::fmaf(q[i], x[i], s);
    return s;
}

float pairwiseDot(const float* q, const float* x, int d) {
    std::vector<float> v(static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) v[size_t(i)] = q[i] * x[i];
    for (size_t w = v.size(); w > 1; w = (w + 1) / 2) {
        for (size_t i = 0; i < w / 2; ++i) v[i] = v[2 * i] + v[2 * i + 1];
        if (w % 2) v[w / 2] = v[w - 1];
    }
    return v.empty() ? 0.f : v[0];
}

float sumOfSquares(const float* x, int d) {
    float s = 0.f;
    for (int i = 0; i < d; ++i) s += x[i] * x[i];
    return s;
}

}  // namespace test
}  // namespace faiss_ext
