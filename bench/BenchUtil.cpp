#include "bench/BenchUtil.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#ifdef FAISS_EXT_HAVE_GIT_HEADER
#include "bench/GitCommit.h"
#endif
#ifndef FAISS_EXT_GIT_COMMIT
#define FAISS_EXT_GIT_COMMIT "unknown"
#endif

namespace faiss_ext {
namespace bench {

double nowSeconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

std::string gitCommit() {
    const char* env = std::getenv("FAISS_EXT_GIT");
    if (env && *env) return env;
    return FAISS_EXT_GIT_COMMIT;
}

std::string cpuName() {
    std::ifstream in("/proc/cpuinfo");
    std::string line, name = "unknown CPU";
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto p = line.find(':');
            if (p != std::string::npos) name = line.substr(p + 2);
            break;
        }
    }
    return name + " (" + std::to_string(std::thread::hardware_concurrency()) + " threads)";
}

std::string blasDescription() {
    using ConfigFn = char* (*)();
    using ThreadsFn = int (*)();
    auto config = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    auto threads = reinterpret_cast<ThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    if (!config) return "unknown BLAS (not OpenBLAS)";
    std::string s = config();
    if (threads) s += ", " + std::to_string(threads()) + " threads";
    return s;
}

std::string jsonString(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                    o += buf;
                } else {
                    o += c;
                }
        }
    }
    return o + "\"";
}

JsonLine& JsonLine::raw(const std::string& key, const std::string& json) {
    if (!body_.empty()) body_ += ", ";
    body_ += jsonString(key) + ": " + json;
    return *this;
}
JsonLine& JsonLine::str(const std::string& key, const std::string& value) {
    return raw(key, jsonString(value));
}
JsonLine& JsonLine::num(const std::string& key, double value) {
    if (!std::isfinite(value)) return raw(key, "null");
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", value);
    return raw(key, buf);
}
JsonLine& JsonLine::integer(const std::string& key, int64_t value) {
    return raw(key, std::to_string(value));
}
JsonLine& JsonLine::boolean(const std::string& key, bool value) {
    return raw(key, value ? "true" : "false");
}
JsonLine& JsonLine::null(const std::string& key) { return raw(key, "null"); }
std::string JsonLine::text() const { return "{" + body_ + "}"; }

double recallAtK(int64_t n, int k, const int64_t* I, int64_t kRes, const int64_t* refI,
                 int64_t kRef, const std::function<double(int64_t, int64_t)>& dist,
                 bool largerIsBetter, double relTol) {
    if (n <= 0 || k <= 0) return NAN;
    if (kRef < k || kRes < k) throw std::invalid_argument("recallAtK: k larger than the results");
    int64_t hits = 0, total = 0;
    std::unordered_set<int64_t> ref;
    for (int64_t q = 0; q < n; ++q) {
        ref.clear();
        int kq = 0;  // reference neighbours that exist (k may exceed ntotal)
        for (int j = 0; j < k; ++j) {
            int64_t id = refI[q * kRef + j];
            if (id >= 0) {
                ref.insert(id);
                ++kq;
            }
        }
        if (kq == 0) continue;
        const double kth = dist(q, refI[q * kRef + kq - 1]);
        const double tol = relTol * std::max(1.0, std::fabs(kth));
        int64_t h = 0;
        for (int j = 0; j < kq; ++j) {
            int64_t id = I[q * kRes + j];
            if (id < 0) continue;
            if (ref.count(id)) {
                ++h;
            } else {
                double dd = dist(q, id);
                if (largerIsBetter ? dd >= kth - tol : dd <= kth + tol) ++h;
            }
        }
        hits += h;
        total += kq;
    }
    return total ? double(hits) / double(total) : NAN;
}

std::vector<std::string> parseList(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

int64_t parseCount(const std::string& s) {
    if (s.empty()) throw std::invalid_argument("empty number");
    size_t pos = 0;
    double v = std::stod(s, &pos);
    std::string suffix = s.substr(pos);
    if (suffix == "k" || suffix == "K") v *= 1e3;
    else if (suffix == "m" || suffix == "M") v *= 1e6;
    else if (!suffix.empty()) throw std::invalid_argument("bad number '" + s + "'");
    return int64_t(std::llround(v));
}

std::vector<int64_t> parseIntList(const std::string& s) {
    std::vector<int64_t> out;
    for (auto& item : parseList(s)) out.push_back(parseCount(item));
    return out;
}

Args::Args(int argc, char** argv, const std::vector<std::string>& flags) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + a + "'");
        std::string name = a.substr(2);
        auto eq = name.find('=');
        if (eq != std::string::npos) {
            values_[name.substr(0, eq)] = name.substr(eq + 1);
        } else if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
            values_[name] = "1";
        } else {
            if (i + 1 >= argc) throw std::invalid_argument("option --" + name + " needs a value");
            values_[name] = argv[++i];
        }
    }
}
bool Args::has(const std::string& name) const { return values_.count(name) > 0; }
std::string Args::get(const std::string& name, const std::string& def) const {
    auto it = values_.find(name);
    return it == values_.end() ? def : it->second;
}
int64_t Args::getInt(const std::string& name, int64_t def) const {
    return has(name) ? parseCount(get(name)) : def;
}
double Args::getDouble(const std::string& name, double def) const {
    return has(name) ? std::stod(get(name)) : def;
}
bool Args::printedHelpOrGit(const std::string& usage) const {
    if (has("help")) {
        std::printf("%s", usage.c_str());
        return true;
    }
    if (has("git")) {
        std::printf("%s\n", gitCommit().c_str());
        return true;
    }
    return false;
}
void Args::checkKnown(const std::vector<std::string>& known) const {
    for (auto& kv : values_)
        if (std::find(known.begin(), known.end(), kv.first) == known.end())
            throw std::invalid_argument("unknown option --" + kv.first + " (see --help)");
}

}  // namespace bench
}  // namespace faiss_ext
