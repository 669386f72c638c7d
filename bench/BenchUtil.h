// Shared pieces of the benchmark programs: timing, the JSON line format of
// DESIGN.md ("Benchmarks"), machine description, and recall against an exact
// reference that tolerates ties.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace faiss_ext {
namespace bench {

/// Seconds since an arbitrary origin (steady clock).
double nowSeconds();

/// Median of the values (the mean of the two middle ones for an even count).
double median(std::vector<double> v);

/// The commit the program was built from (FAISS_EXT_GIT at run time
/// overrides it; "unknown" when neither is known).
std::string gitCommit();

/// The CPU's model name and the number of hardware threads, e.g.
/// "AMD EPYC 9454 48-Core Processor (16 threads)".
std::string cpuName();

/// What the process's BLAS is: OpenBLAS's configuration string and thread
/// count when OpenBLAS is loaded, else "unknown BLAS".
std::string blasDescription();

/// Builds one JSON object, keys in insertion order, for one line of output.
class JsonLine {
public:
    /// Adds a string value.
    JsonLine& str(const std::string& key, const std::string& value);
    /// Adds a number (non-finite values are written as null).
    JsonLine& num(const std::string& key, double value);
    /// Adds an integer.
    JsonLine& integer(const std::string& key, int64_t value);
    /// Adds a boolean.
    JsonLine& boolean(const std::string& key, bool value);
    /// Adds null.
    JsonLine& null(const std::string& key);
    /// Adds an already formatted JSON value (an object from another JsonLine).
    JsonLine& raw(const std::string& key, const std::string& json);
    /// The object as one line of JSON, without a newline.
    std::string text() const;

private:
    std::string body_;
};

/// Escapes s as a JSON string literal, quotes included.
std::string jsonString(const std::string& s);

/// Recall@k of results (I, n x kRes) against an exact reference
/// (refI, n x kRef, kRef >= k), counting ties as hits: a returned id counts
/// when it is one of the reference's first k ids, or when its exact distance
/// (from `dist`, computed in double) is no worse than that of the
/// reference's k-th id, within a relative tolerance. `dist(query, id)` gives
/// the exact distance; `largerIsBetter` for similarities. Ids < 0 never count.
double recallAtK(int64_t n, int k, const int64_t* I, int64_t kRes, const int64_t* refI,
                 int64_t kRef, const std::function<double(int64_t, int64_t)>& dist,
                 bool largerIsBetter, double relTol = 1e-5);

/// Parses "1,10,100" into integers. Throws std::invalid_argument on junk.
std::vector<int64_t> parseIntList(const std::string& s);

/// Parses "a,b,c" into strings (empty items dropped).
std::vector<std::string> parseList(const std::string& s);

/// Minimal command-line parser: "--name value" and "--flag" options.
class Args {
public:
    /// Parses argv; `flags` names the options that take no value.
    Args(int argc, char** argv, const std::vector<std::string>& flags);
    /// Whether --name was given.
    bool has(const std::string& name) const;
    /// The value of --name, or def.
    std::string get(const std::string& name, const std::string& def = "") const;
    /// The value of --name as an integer (accepts 200k, 1M suffixes), or def.
    int64_t getInt(const std::string& name, int64_t def) const;
    /// The value of --name as a double, or def.
    double getDouble(const std::string& name, double def) const;
    /// --help prints `usage`, --git the commit (gitCommit()); true when one
    /// of them was given (the program then exits 0).
    bool printedHelpOrGit(const std::string& usage) const;
    /// Throws std::invalid_argument naming any option not in `known`.
    void checkKnown(const std::vector<std::string>& known) const;

private:
    std::map<std::string, std::string> values_;
};

/// Parses an integer with an optional k / M suffix (x1000, x1000000).
int64_t parseCount(const std::string& s);

}  // namespace bench
}  // namespace faiss_ext
