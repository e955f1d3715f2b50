#include "base/npy.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace cedar {

NpyWriter::NpyWriter(const std::string& path, const std::vector<int64_t>& shape, const char* descr)
    : path_(path) {
  std::string sh = "(";
  size_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    sh += std::to_string(shape[i]);
    sh += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) sh += " ";
    n *= size_t(shape[i]);
  }
  sh += ")";
  const std::string d = descr;  // '<f4', '<u2', '|u1': the element size is its number
  const size_t elem = d.size() >= 3 ? size_t(std::stoul(d.substr(2))) : 0;
  if (elem == 0 || elem > 8) throw std::runtime_error("npy: unsupported dtype '" + d + "'");
  expected_ = n * elem;
  std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + sh + ", }";
  // magic(6) + version(2) + header length(2) + dict, padded with spaces to a multiple of 64,
  // terminated by '\n'
  size_t total = 10 + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
  const unsigned char head[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(dict.size() & 0xff), uint8_t(dict.size() >> 8)};
  if (std::fwrite(head, 1, 10, f_) != 10 ||
      std::fwrite(dict.data(), 1, dict.size(), f_) != dict.size())
    throw std::runtime_error("write error on " + path);
}

NpyWriter::~NpyWriter() {
  if (f_) std::fclose(f_);
}

void NpyWriter::write(const void* data, size_t bytes) {
  if (!f_) throw std::runtime_error("write after close on " + path_);
  if (std::fwrite(data, 1, bytes, f_) != bytes) throw std::runtime_error("write error on " + path_);
  written_ += bytes;
}

void NpyWriter::close() {
  if (!f_) return;
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) throw std::runtime_error("write error on " + path_);
  if (written_ != expected_)
    throw std::runtime_error(path_ + ": wrote " + std::to_string(written_) + " bytes, expected " +
                             std::to_string(expected_));
}

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  NpyWriter w(path, shape, "<f4");
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  w.write(data, n * 4);
  w.close();
}

void write_npy_i32(const std::string& path, const int32_t* data,
                   const std::vector<int64_t>& shape) {
  NpyWriter w(path, shape, "<i4");
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  w.write(data, n * 4);
  w.close();
}

}  // namespace cedar
