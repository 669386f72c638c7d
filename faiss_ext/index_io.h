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

/// Writes idx to a file.
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
