// A vocabulary-wide product -- the LM head, a DSpark Markov head: [m, D] -> fp32 [m, vocab] --
// computed once per distinct weight row. A model trained on part of the vocabulary and exported
// with one shared row for every id it never saw (the default model: 38,027 distinct rows of
// 129,280, docs/TRAINING.md) repeats that row tens of thousands of times; each output is its own
// row's dot product alone (kernel_table.h: batch invariance), so one product per distinct row,
// copied to every id that shares it, has the same bits as the whole product in every table.
// Immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "forward/linear.h"

namespace cedar {

class VocabProduct {
 public:
  // Looks for repeated rows of a bf16 weight (any other format runs whole); see vocab_product.cpp
  // for when it keeps a copy of the distinct rows.
  explicit VocabProduct(const Linear& w);

  // out [m, w.out] = linear(x [m, w.in], w) in fp32 (LinearOut::kF32).
  void forward(const Ctx& ctx, const float* x, int m, float* out) const;

  int rows() const { return rows_; }  // w.out
  // the rows computed per input row: w.out, or the distinct rows when they are computed alone
  int distinct_rows() const { return distinct_.out; }

 private:
  int rows_ = 0;
  Linear distinct_;              // the product that runs: the weight, or its distinct rows
  std::vector<uint16_t> words_;  // the distinct rows' bf16 words (when kept)
  std::vector<int32_t> of_;      // [rows] the distinct row of each id (empty: whole weight)
};

}  // namespace cedar
