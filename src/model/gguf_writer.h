// GgufWriter: writes one GGUF v3 file (../shared/spec/v41-gguf.md §1): metadata added in order,
// tensors registered with their shape and type and their bytes produced while the file is written
// (a converter streams a checkpoint through it without holding it). `cedar convert` and the tests'
// fixtures use it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace cedar::gguf {

class Writer {
 public:
  explicit Writer(uint32_t alignment = 32);

  void add_u16(const std::string& key, uint16_t v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_u32_array(const std::string& key, const std::vector<uint32_t>& v);
  void add_u64_array(const std::string& key, const std::vector<uint64_t>& v);
  void add_f32_array(const std::string& key, const std::vector<float>& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);

  // A tensor of `type` with shape `ne` (ggml order); `fill(dst)` writes its bytes (exactly
  // TensorInfo::bytes of them) when the file is written.
  using Fill = std::function<void(uint8_t* dst)>;
  void add_tensor(const std::string& name, uint32_t type, const std::vector<uint64_t>& ne,
                  Fill fill);
  // Bytes of a tensor of this type and shape (throws for an unknown type or a ragged ne0).
  static uint64_t tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne);

  // Called after each tensor's bytes are written: data bytes written so far, of the total (a split
  // counts every shard's).
  using Progress = std::function<void(uint64_t done, uint64_t total)>;
  void on_progress(Progress f) { progress_ = std::move(f); }

  // Writes the file (to path.tmp, then renamed). Throws naming the path on an I/O error.
  void write(const std::string& path) const;
  // The same model as shards of at most `max_tensors` tensors each, as llama.cpp's gguf-split
  // writes them (gguf_files.h: every shard with split.no/count/tensors.count, the other keys in
  // the first), or one file when they all fit in one. Returns the paths written.
  std::vector<std::string> write_split(const std::string& path, size_t max_tensors) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    uint64_t bytes, offset;
    Fill fill;
  };
  Progress progress_;
  void key(const std::string& k, ValueType t);
  template <class T>
  void raw(T v);
  template <class T>
  void array(const std::string& k, ValueType t, const std::vector<T>& v);
  void str(const std::string& s);

  uint32_t alignment_;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> kv_;  // the encoded key/value pairs
  std::vector<Tensor> tensors_;
  uint64_t data_bytes_ = 0;
};

}  // namespace cedar::gguf
