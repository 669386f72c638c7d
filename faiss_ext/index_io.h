// Saving and loading faiss_ext indexes through FAISS's I/O layer.
//
// Our CPU types are written with their own fourcc using faiss/impl/io.h;
// FAISS types and FAISS wrappers (IndexIDMap, IndexPreTransform, ...) around
// our types go through unchanged; GPU indexes are written as their CPU twin
// (faiss_ext::CpuConvertible), as FAISS does for its GPU indexes. A file
// written by plain faiss::write_index reads back. Corrupt or truncated input
// throws faiss::FaissException; nothing crashes.
#pragma once

#include <faiss/Index.h>
#include <faiss/impl/io.h>

#include <cstdint>
#include <vector>

namespace faiss_ext {

/// An io_flags bit of read_index / deserialize_index for untrusted input:
/// read only the parts faiss_ext parses and checks itself (its own fourccs,
/// IndexFlat / IndexFlatL2 / IndexFlatIP, IndexIDMap / IndexIDMap2,
/// IndexPreTransform with RowCenteringTransform and NormalizationTransform,
/// IndexNNDescentFlat) and throw faiss::FaissException on any other fourcc
/// instead of handing it to FAISS 1.7.3's readers, which trust the sizes and
/// parameters in the file (a forged one can make them allocate what it claims
/// or crash: docs/fuzzing.md). A bit FAISS's own IO_FLAG_* values leave free.
constexpr int IO_FLAG_CHECKED_ONLY = 0x01000000;

/// Deepest nesting read_index accepts: wrappers it parses itself
/// (IndexIDMap / IndexIDMap2, IndexPreTransform, and IndexNNDescentFlat over
/// its storage) around the innermost index. write_index and index_factory
/// refuse deeper trees, so whatever they make reads back. (FAISS's own
/// nesting types, such as IndexRefine, are bounded by the reader's stack
/// budget instead: about a thousand levels.)
constexpr int kMaxIndexNesting = 32;

/// The nesting depth of idx as kMaxIndexNesting counts it (0 for a leaf; a
/// GPU index counts as its CPU twin, at most 1).
int index_nesting_depth(const faiss::Index* idx);

/// Writes idx to a file. Throws faiss::FaissException when the file cannot
/// be opened or written (a full disk included: the close is checked), and,
/// before opening the file, when idx nests deeper than kMaxIndexNesting.
void write_index(const faiss::Index* idx, const char* fname);
/// Writes idx to a FAISS IOWriter.
void write_index(const faiss::Index* idx, faiss::IOWriter* writer);
/// Serialises idx to bytes.
std::vector<uint8_t> serialize_index(const faiss::Index* idx);

/// Reads an index from a file (the caller owns the result).
faiss::Index* read_index(const char* fname, int io_flags = 0);
/// Reads an index from a FAISS IOReader.
faiss::Index* read_index(faiss::IOReader* reader, int io_flags = 0);
/// Reads an index from bytes.
faiss::Index* deserialize_index(const uint8_t* data, size_t size, int io_flags = 0);
/// Reads an index from bytes.
faiss::Index* deserialize_index(const std::vector<uint8_t>& data, int io_flags = 0);

}  // namespace faiss_ext
