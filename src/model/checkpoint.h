// Checkpoint: the weights of one model in the release layout, from one of two sources:
//   * a model directory laid out like the Hugging Face release (config.json,
//     model.safetensors.index.json + shards, or one model.safetensors), memory-mapped;
//   * a GGUF file of dialect A (model/gguf_source.cpp): the config from its keys, tensors stored
//     as the release stores them viewed in place, projections stored as ggml blocks with a kernel
//     family left in place as block weights, the others re-encoded into the release's formats at
//     load (an FP8-role tensor stored as BF16 becomes E4M3 + UE8M0 32x32 again).
// Either way open() validates the whole tensor inventory against the config (names, dtypes,
// shapes, scale layouts, no missing and no extra tensors) and throws std::runtime_error naming
// the offending tensor or key, so everything after it sees one layout.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/tensor.h"

namespace cedar {

class MappedFile;  // base/mapped_file.h
struct ExpectedTensor;

class Checkpoint {
 public:
  struct OpenOptions {
    // GGUF: FP8- and FP4-role weights stored in a ggml block type with a kernel family (Q8_0,
    // Q4_0, Q5_0, Q2_K .. Q6_K, IQ2_XXS, IQ1_S, IQ1_M) stay in the file as block weights
    // (below); false re-encodes them into the release's formats like any other type (`cedar
    // convert --from`, which reads the release tensors).
    bool blocks_in_place = true;
  };
  // A directory or a GGUF file (sniffed by its magic).
  static std::unique_ptr<Checkpoint> open(const std::string& path, const OpenOptions& opt);
  static std::unique_ptr<Checkpoint> open(const std::string& path) { return open(path, {}); }
  ~Checkpoint();

  enum class Format { kSafetensors, kGguf };
  Format format() const { return format_; }
  const ModelConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  // The Hugging Face tokenizer.json text: the directory's file, or a GGUF file's
  // tokenizer.huggingface.json key or, without it, the tokenizer rebuilt from its tokenizer.ggml.*
  // keys (model/gguf_tokenizer.h). Throws naming the file when it cannot be read.
  std::string tokenizer_json() const;
  // A GGUF file's Engram token map (deepseek41.engram.token_map), which the engine checks against
  // the map it derives from the tokenizer; empty for a directory.
  const std::vector<int32_t>& engram_token_map() const { return engram_token_map_; }
  // How the source's tensors became the release layout: in place, or re-encoded at load (and how
  // many of the re-encoded values the release formats could not hold exactly: 0 for a lossless
  // file).
  struct LoadStats {
    int64_t in_place = 0, reencoded = 0, inexact_values = 0, blocks = 0;
    size_t reencoded_bytes = 0, block_bytes = 0;
  };
  const LoadStats& load_stats() const { return stats_; }

  // A weight a GGUF file stores in a ggml block type that the kernels compute in place
  // (WeightFormat kQ8_0 .. kMXFP4), or an Engram table whose rows are decoded as they are
  // gathered, rather than re-encoded: under the release weight's name ("X.weight" of an FP8- or
  // FP4-role projection or table, whose "X.scale" then does not exist, nor "X.weight" in
  // tensors()), its logical [out, in], the ggml type id and its bytes (out rows of in /
  // block_elems blocks).
  struct BlockWeight {
    uint32_t ggml_type = 0;
    int64_t out = 0, in = 0;
    const uint8_t* data = nullptr;
    size_t nbytes = 0;
  };
  // nullptr when `name` is not a block weight
  const BlockWeight* block_weight(const std::string& name) const;
  const std::map<std::string, BlockWeight>& block_weights() const { return blocks_; }

  bool has(const std::string& name) const;
  // Throws naming the tensor when absent.
  const TensorView& get(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Bytes of all mapped shards (a GGUF file: the file).
  size_t mapped_bytes() const;
  // Where the n bytes at p (inside one mapped shard) live on disk: that shard's path and the
  // byte offset. Empty when p is not inside a mapping (a tensor the weights copied, or one a GGUF
  // source re-encoded).
  struct Location {
    std::string path;
    size_t offset = 0;
  };
  std::optional<Location> locate(const uint8_t* p, size_t n) const;
  // Reads every shard's pages into the page cache (MappedFile::prefetch), calling
  // progress(done, total) in bytes after each step.
  void prefetch(const std::function<void(size_t done, size_t total)>& progress) const;
  // The same for the tensors (and GGUF block weights) whose name `want` accepts, in the files
  // (not those a load re-encoded into memory): e.g. the dense weights of a model whose routed
  // experts stream from storage. Returns the bytes read in.
  size_t prefetch_tensors(const std::function<bool(const std::string& name)>& want,
                          const std::function<void(size_t done, size_t total)>& progress) const;

 private:
  Checkpoint() = default;
  static std::unique_ptr<Checkpoint> open_directory(const std::string& dir);
  static std::unique_ptr<Checkpoint> open_gguf(const std::string& path,
                                               const OpenOptions& opt);  // gguf_source.cpp
  // The inventory check both sources end with.
  void validate() const;
  // expected_tensors(config_) when the source can come close to holding it: `capacity` is the
  // most release tensors its file(s) can provide; a config describing more than twice that
  // (+ 4096) is refused naming the path, the counts and the keys that set them, before the list
  // is built.
  std::vector<ExpectedTensor> inventory(size_t capacity) const;
  // Whether an expected tensor absent from tensors_ is held by a block weight: "X.weight" of the
  // same logical shape, or its "X.scale".
  bool block_covers(const ExpectedTensor& e) const;
  // n bytes, 64-byte aligned, owned by the checkpoint (tensors a GGUF source re-encodes).
  uint8_t* allocate(size_t n);

  Format format_ = Format::kSafetensors;
  std::string path_;
  ModelConfig config_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, BlockWeight> blocks_;
  struct FreeAligned {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, FreeAligned>> owned_;
  std::string tokenizer_json_;  // GGUF: read at open
  std::vector<int32_t> engram_token_map_;
  LoadStats stats_;
};

// The full expected inventory for a config: name -> (dtype, shape). Used by open() to validate,
// by make-model to write, and by inspect to count parameters. Stops with std::length_error once
// it would list more than max_tensors: open() passes what its file can hold, so that a config
// claiming more layers or experts than the file has tensors is refused before the list is
// built for it (ModelConfig::check_limits bounds the list of any valid config).
struct ExpectedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
std::vector<ExpectedTensor> expected_tensors(
    const ModelConfig& cfg, size_t max_tensors = std::numeric_limits<size_t>::max());

}  // namespace cedar
