// Reading a whole gzip file (one member, RFC 1952) into memory with Debian's zlib: the compact
// default model is kept gzipped in the repository (models/default/, model/compact_model.h). The
// file is hostile until read: a corrupt or truncated stream, bytes after the member, or more
// output than the caller allows (a decompression bomb) each throw an error naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cedar {

// The decompressed bytes of one gzip member held in memory; throws std::runtime_error, starting
// with `label`, when [data, data + size) is not exactly one complete member or inflates to more
// than `max_bytes`.
std::vector<uint8_t> inflate_gzip(const uint8_t* data, size_t size, size_t max_bytes,
                                  const std::string& label);

// inflate_gzip of a whole file (mapped), the path as the label; also throws when it cannot be
// read.
std::vector<uint8_t> read_gzip_file(const std::string& path, size_t max_bytes);

}  // namespace cedar
