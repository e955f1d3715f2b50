// Engram: the conditional n-gram memory written into the mHC stream before a block (NUMERICS §E,
// spec §8). Hash rows of each position come from the mapped ids of the last max_ngram tokens
// (EngramLayout); the gathered FP8 rows are projected to one key per stream copy plus a shared
// value, and each copy takes the value through a sigmoid gate of its normalised dot with its key.
// Immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "forward/linear.h"
#include "model/config.h"
#include "model/engram_layout.h"

namespace cedar {

class Engram {
 public:
  Engram(const ModelConfig& cfg, int layer, const LayerWeights& w, const EngramLayout& layout);

  // Row ids [n, n_cols] of chunk rows: mapped[0 .. hist+n) holds the mapped ids of positions
  // p0-hist .. p0+n-1 (hist <= max_ngram-1 previous tokens), -1 at image positions (DEAD).
  // ref: engram.py NgramHashState.forward
  void hash_rows(const int32_t* mapped, int hist, int n, int64_t p0, int32_t pad_id,
                 int64_t* rows) const;

  // h [n, hc, D] updated in place; rows [n, n_cols]; image[i] != 0 (image may be null): row i
  // is in an image span and keeps h. ref: model.py Engram.forward
  void forward(const Ctx& ctx, float* h, int n, const int64_t* rows,
               const uint8_t* image = nullptr) const;

  int table() const { return index_; }  // its position in engram_layer_ids

 private:
  const ModelConfig& cfg_;
  const LayerWeights& w_;
  const EngramLayout& layout_;
  int index_;  // position in engram_layer_ids
  int layer_;
};

}  // namespace cedar
