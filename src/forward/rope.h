// RopeTable: the rotary frequencies of one layer kind and the per-position cos/sin.
// ref: model.py precompute_freqs_cis (NUMERICS §P): fp32 frequencies as torch computes them,
// YaRN-blended on compressed layers; angles f32(f32(pos) * freq), cos/sin correctly rounded.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace cedar {

class RopeTable {
 public:
  RopeTable() = default;
  // yarn: apply the YaRN blend (only when original_max_position_embeddings > 0).
  RopeTable(int rope_dim, double theta, bool yarn, double factor, double beta_fast,
            double beta_slow, int64_t original_seq_len);
  // The table of a layer with compress ratio `ratio` (0: rope_theta, no YaRN; >0: compress θ).
  static RopeTable for_layer(const ModelConfig& cfg, int ratio);

  int rope_dim() const { return rope_dim_; }
  const std::vector<float>& freqs() const { return freqs_; }
  // cos/sin [rope_dim/2] for absolute position pos.
  void angles(int64_t pos, float* cos, float* sin) const;

 private:
  int rope_dim_ = 0;
  std::vector<float> freqs_;
};

}  // namespace cedar
