// `cedar make-model`: a synthetic checkpoint in exactly the release layout (config.json with
// nested text_config/quantization_config, safetensors with the release's names, dtypes and scale
// layouts, the tokenizer files) with deterministic random weights of sane magnitudes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/config.h"

namespace cedar {

struct MakeModelOptions {
  std::string preset;  // "tiny" | "small" | "bench"
  uint64_t seed = 0;
  std::string out_dir;
  std::string tokenizer;  // path to tokenizer.json; tokenizer_config.json beside it is copied too
  int shards = 1;         // > 1: model-0000i-of-0000K.safetensors + model.safetensors.index.json
  bool force = false;     // allow writing into a non-empty out_dir
};

struct GeneratedTensor {
  ExpectedTensor spec;
  std::vector<uint8_t> data;  // little-endian, safetensors layout
};

// Every tensor of expected_tensors(cfg), sorted by name, with weights drawn from a splitmix64
// stream seeded by (seed, tensor name): the same (cfg, seed) gives the same bytes, and one tensor's
// values do not depend on which other tensors exist. Throws naming a tensor it has no rule for.
std::vector<GeneratedTensor> generate_weights(const ModelConfig& cfg, uint64_t seed);

// Writes config.json and the safetensors file(s) of (cfg, seed) into an existing directory.
void write_checkpoint(const ModelConfig& cfg, uint64_t seed, const std::string& dir, int shards,
                      const std::string& preset_name = "");

// The whole command: checks the options, creates out_dir, writes the checkpoint and copies the
// tokenizer. Throws std::runtime_error with a clear message on bad options or I/O errors.
void make_model(const MakeModelOptions& opt);

}  // namespace cedar
