#include "base/gzip_file.h"

#include <zlib.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "base/mapped_file.h"

namespace cedar {

namespace {

// Owns a z_stream set up for gzip decoding; inflateEnd on every way out.
class Inflater {
 public:
  explicit Inflater(const std::string& path) {
    // 15 + 16: the largest window, and a gzip header and trailer (CRC-32, length) checked
    if (inflateInit2(&z_, 15 + 16) != Z_OK) throw std::runtime_error(path + ": zlib init failed");
  }
  ~Inflater() { inflateEnd(&z_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  z_stream* get() { return &z_; }

 private:
  z_stream z_{};
};

}  // namespace

std::vector<uint8_t> inflate_gzip(const uint8_t* data, size_t size, size_t max_bytes,
                                  const std::string& label) {
  if (size == 0) throw std::runtime_error(label + ": empty file, not gzip");
  Inflater inf(label);
  z_stream* z = inf.get();
  z->next_in = const_cast<Bytef*>(data);  // zlib's API is not const-correct
  std::vector<uint8_t> out;
  size_t fed = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (z->avail_in == 0) {  // avail_in is 32-bit: feed the input in pieces
      const size_t n = std::min<size_t>(size - fed, 1u << 30);
      if (n == 0) throw std::runtime_error(label + ": truncated gzip stream");
      z->avail_in = uInt(n);
      fed += n;
    }
    if (out.size() == max_bytes)
      throw std::runtime_error(label + ": inflates to more than " + std::to_string(max_bytes) +
                               " bytes");
    // the output grows by itself (from 64 KiB, at most 16 MiB at a time): small files stay cheap
    const size_t step = std::clamp<size_t>(out.size(), size_t(1) << 16, size_t(1) << 24);
    const size_t chunk = std::min(max_bytes - out.size(), step);
    const size_t at = out.size();
    out.resize(at + chunk);
    z->next_out = out.data() + at;
    z->avail_out = uInt(chunk);
    rc = inflate(z, Z_NO_FLUSH);
    out.resize(at + (chunk - z->avail_out));
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      throw std::runtime_error(label + ": corrupt gzip stream (" +
                               std::string(z->msg ? z->msg : zError(rc)) + ")");
  }
  if (z->avail_in != 0 || fed != size)
    throw std::runtime_error(label + ": bytes after the gzip stream");
  return out;
}

std::vector<uint8_t> read_gzip_file(const std::string& path, size_t max_bytes) {
  const auto in = MappedFile::open(path);
  return inflate_gzip(in->data(), in->size(), max_bytes, path);
}

}  // namespace cedar
