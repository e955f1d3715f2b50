// Writing safetensors files (https://github.com/huggingface/safetensors format): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
// {...}} padded with spaces so the data starts 8-byte aligned, then the raw tensor bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace cedar {

struct SafetensorsOutput {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // numel * dtype_size(dtype) bytes
  size_t nbytes = 0;
};

// The header text (JSON object, keys sorted, offsets assigned in the order of `tensors`), padded
// to a multiple of 8 bytes. Throws std::runtime_error naming the tensor on a duplicate name or a
// byte count that does not match dtype and shape.
std::string safetensors_header(const std::vector<SafetensorsOutput>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// Writes a file whose tensor bytes arrive one tensor at a time (a multi-GB checkpoint need not be
// in memory at once): the constructor writes the header of `tensors` (their `data` is ignored),
// then append() takes exactly the next tensor's bytes, in the order given, and finish() closes the
// file. Throws naming the file on I/O errors or bytes that do not match the header.
class SafetensorsStreamWriter {
 public:
  SafetensorsStreamWriter(const std::string& path, const std::vector<SafetensorsOutput>& tensors,
                          const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  void append(const uint8_t* data, size_t nbytes);
  void finish();  // every tensor appended; closes the file

 private:
  void put(const void* p, size_t n);

  std::string path_;
  std::vector<size_t> sizes_;
  size_t next_ = 0;
  std::FILE* f_ = nullptr;
};

// Writes the file; tensor data follows in the order given. Throws naming the file on I/O errors.
void write_safetensors(const std::string& path, const std::vector<SafetensorsOutput>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace cedar
