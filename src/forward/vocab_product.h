// A vocabulary-wide product -- the LM head, a DSpark Markov head: [m, D] -> fp32 [m, vocab] --
// computed once per distinct weight row. A model trained on part of the vocabulary and exported
// with one shared row for every id it never saw (the default model: 38,027 distinct rows of
// 129,280, docs/TRAINING.md) repeats that row tens of thousands of times; each output is its own
// row's dot product alone (kernel_table.h: batch invariance), so one product per distinct row,
// copied to every id that shares it, is the whole product. The reference table computes the
// distinct rows with linear(), so its bits are the whole weight's; the fast tables keep them
// packed for bf16_lanes (outputs in vector lanes: no per-output reduction, kernel_table.h), whose
// sums are those of any other fast bf16 product within its tolerance, the same at every row count.
// Immutable after construction.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "forward/linear.h"

namespace cedar {

// How the vocabulary head is computed (`--head-type`): from the weight as the checkpoint stores
// it, or from a copy requantized at load to 8 bits per value plus a bf16 scale per 32 values
// (numerics/q8b.h; a bf16 head only: about half its bytes per decoded token, the form the
// community GGUF files ship it in; docs/NUMERICS.md "Q8 head" measures what it changes).
enum class HeadType { kStored, kQ8 };
// "stored" | "q8" (throws std::runtime_error naming the flag otherwise)
HeadType parse_head_type(std::string_view s);

class VocabProduct {
 public:
  // Looks for repeated rows of a bf16 weight (any other format runs whole); see vocab_product.cpp
  // for when it keeps a copy of the distinct rows. kQ8: the rows that run are requantized.
  // `pool` (optional) splits the requantization across threads.
  explicit VocabProduct(const Linear& w, HeadType type = HeadType::kStored,
                        ThreadPool* pool = nullptr);

  // out [m, w.out] = linear(x [m, w.in], w) in fp32 (LinearOut::kF32).
  void forward(const Ctx& ctx, const float* x, int m, float* out) const;

  // The distinct rows alone (classes()): d [m, distinct_ld()], class c of row i at d[i * ld + c],
  // every id of the class having that output in forward(). Only when classes().
  void forward_distinct(const Ctx& ctx, const float* x, int m, float* d) const;
  bool classes() const { return !of_.empty(); }
  int distinct_ld() const { return ld_; }
  // the class of an id (only when classes())
  int32_t class_of(int32_t id) const { return of_[size_t(id)]; }

  int rows() const { return rows_; }  // w.out
  bool requantized() const { return distinct_.kind == Linear::Kind::Q8B; }
  // the rows computed per input row: w.out, or the distinct rows when they are computed alone
  int distinct_rows() const { return distinct_.out; }

 private:
  void expand(const Ctx& ctx, const float* d, int m, float* out) const;

  void requantize(ThreadPool* pool);

  int rows_ = 0;
  Linear distinct_;  // the product that runs: the weight, or its distinct rows
  // kQ8: distinct_'s rows as Q8B codes [out, in] and bf16 scales [out, in/32] (distinct_ points
  // at them)
  std::vector<uint8_t> q8_codes_;
  std::vector<uint16_t> q8_scales_;
  std::vector<uint16_t> words_;  // the distinct rows' bf16 words (when kept)
  // the distinct rows in pack_bf16_lanes' layout, for tables with bf16_lanes (empty: odd K)
  std::vector<uint32_t> packed_;
  int ld_ = 0;               // forward_distinct's row stride: whole groups of 16 when packed
  std::vector<int32_t> of_;  // [rows] the distinct row (class) of each id (empty: whole)
  // forward() writes the class with the most ids (most_) as runs and the other ids one by one
  int32_t most_ = 0;
  std::vector<int32_t> other_ids_, other_of_;  // ascending ids outside most_, and their classes
};

}  // namespace cedar
