// Minimal .npy (format 1.0) writer: little-endian, C order, any '<f4' / '<i4' / '<u2' / '|u1'
// style dtype (the element size is the descr's number).
// NpyWriter streams rows so large arrays (logits [T, vocab]) need not sit in memory at once.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cedar {

class NpyWriter {
 public:
  // Writes the header; throws std::runtime_error naming the file when it cannot be created.
  NpyWriter(const std::string& path, const std::vector<int64_t>& shape, const char* descr = "<f4");
  ~NpyWriter();
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;
  void write(const void* data, size_t bytes);
  // Flushes and checks that exactly the declared number of bytes was written.
  void close();

 private:
  std::string path_;
  FILE* f_ = nullptr;
  size_t expected_ = 0, written_ = 0;
};

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);
void write_npy_i32(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape);

}  // namespace cedar
