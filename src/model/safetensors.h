// Reading safetensors files: the 8-byte little-endian header length, the JSON header
// (name -> {dtype, shape, data_offsets}; "__metadata__" ignored), and the sharded layout's
// model.safetensors.index.json ("weight_map": tensor name -> shard file). Every offset is checked
// (inside the file, no overlap, byte size == numel * dtype size) before any view is handed out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace cedar {

class MappedFile;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the start of the data section
};

struct SafetensorsHeader {
  uint64_t header_len = 0;
  uint64_t data_start = 0;                // 8 + header_len
  std::vector<SafetensorsEntry> tensors;  // in header order
};

// Parses and validates the header of a safetensors file held in memory (`size` bytes: the whole
// file, so that data offsets are checked against it). `label` (the file path) starts every error.
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size,
                                           const std::string& label);

// One mapped safetensors file with views into it.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // A safetensors file already in memory (e.g. inflated from a .gz); the object keeps the bytes
  // and `label` names it in errors and path().
  static std::unique_ptr<SafetensorsFile> from_memory(std::vector<uint8_t> bytes,
                                                      const std::string& label);
  ~SafetensorsFile();
  const std::string& path() const;
  const std::vector<TensorView>& tensors() const { return views_; }
  // Releases the mapping to the caller (the views stay valid while it lives); nullptr for a file
  // made from_memory.
  std::unique_ptr<MappedFile> take_mapping();

 private:
  SafetensorsFile() = default;
  void make_views(const uint8_t* data, size_t size);
  std::unique_ptr<MappedFile> file_;
  std::vector<uint8_t> bytes_;  // from_memory's bytes
  std::string path_;
  std::vector<TensorView> views_;
};

// Reads model.safetensors.index.json: tensor name -> shard file name (relative to the index's
// directory). Errors name the file.
std::map<std::string, std::string> read_safetensors_index(const std::string& path);

}  // namespace cedar
