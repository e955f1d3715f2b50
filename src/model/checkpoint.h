// Checkpoint: a model directory laid out like the Hugging Face release (config.json,
// model.safetensors.index.json + shards, or one model.safetensors), memory-mapped. open()
// validates the whole tensor inventory against the config (names, dtypes, shapes, scale
// layouts, no missing and no extra tensors) and throws std::runtime_error naming the
// offending tensor or key.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/tensor.h"

namespace cedar {

class MappedFile;  // base/mapped_file.h

class Checkpoint {
 public:
  static std::unique_ptr<Checkpoint> open(const std::string& dir);
  ~Checkpoint();

  const ModelConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }

  bool has(const std::string& name) const;
  // Throws naming the tensor when absent.
  const TensorView& get(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Bytes of all mapped shards.
  size_t mapped_bytes() const;
  // Where the n bytes at p (inside one mapped shard) live on disk: that shard's path and the
  // byte offset. Empty when p is not inside a mapping (a tensor the weights copied).
  struct Location {
    std::string path;
    size_t offset = 0;
  };
  std::optional<Location> locate(const uint8_t* p, size_t n) const;
  // Reads every shard's pages into the page cache (MappedFile::prefetch), calling
  // progress(done, total) in bytes after each step.
  void prefetch(const std::function<void(size_t done, size_t total)>& progress) const;

 private:
  Checkpoint() = default;
  std::string dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorView> tensors_;
};

// The full expected inventory for a config: name -> (dtype, shape). Used by open() to validate,
// by make-model to write, and by inspect to count parameters.
struct ExpectedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& cfg);

}  // namespace cedar
