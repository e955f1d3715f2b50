// SequenceState: everything one sequence carries between forward calls (EXAMPLES.md §7.3), in
// the packed formats the model defines (spec §10.1), so that storing is lossless w.r.t. the
// reference's bf16 caches:
//   * per layer, a window ring of `sliding_window` slots (slot = pos % window): FP8 E4M3 codes +
//     one UE8M0 scale per 32 channels (528 B/row at the release width);
//   * per KV-source layer, the compressed main rows (packed E2M1 + E4M3 scale per 16) and the
//     index keys (packed E2M1 + UE8M0 scale per 32), appended as compressor groups complete, and
//     the fp32 k / gate logits of a trailing incomplete group (ratio > 1);
//   * the Engram history: the last max_ngram-1 mapped token ids;
//   * the number of tokens processed.
// Owned by the caller; not thread-safe (the forward mutates it from one thread at a time, after
// its parallel sections).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace cedar {

struct WindowRing {
  int window = 0, head_dim = 0;
  std::vector<uint8_t> codes;   // [window, head_dim] E4M3
  std::vector<uint8_t> scales;  // [window, head_dim / 32] UE8M0

  uint8_t* row_codes(int64_t pos) { return codes.data() + size_t(pos % window) * size_t(head_dim); }
  uint8_t* row_scales(int64_t pos) {
    return scales.data() + size_t(pos % window) * size_t(head_dim / 32);
  }
  // Dequantized (exact bf16 values) row of absolute position pos; the caller guarantees the ring
  // still holds it (pos > n_tokens - 1 - window).
  void read(int64_t pos, float* out) const;
};

struct CompressedKv {
  int ratio = 0, head_dim = 0, index_head_dim = 0;
  int64_t n_rows = 0;
  std::vector<uint8_t> kv_fp4;    // [n_rows, head_dim / 2] packed E2M1, even element low nibble
  std::vector<uint8_t> kv_scale;  // [n_rows, head_dim / 16] E4M3
  std::vector<uint8_t> ik_fp4;    // [n_rows, index_head_dim / 2]
  std::vector<uint8_t> ik_scale;  // [n_rows, index_head_dim / 32] UE8M0
  // The tokens of the trailing incomplete group (ratio > 1): fp32 wkv and wgate outputs.
  int n_tail = 0;
  std::vector<float> tail_k, tail_z;  // [ratio - 1, head_dim]

  // Appends one row (packed codes + scales of both the main row and the index key).
  void append(const uint8_t* kv_packed, const uint8_t* kv_scales, const uint8_t* ik_packed,
              const uint8_t* ik_scales);
  void read_kv(int64_t row, float* out) const;         // exact bf16 values [head_dim]
  void read_index_key(int64_t row, float* out) const;  // exact bf16 values [index_head_dim]
  const uint8_t* ik_row(int64_t row) const {
    return ik_fp4.data() + size_t(row) * size_t(index_head_dim / 2);
  }
  const uint8_t* ik_scales_row(int64_t row) const {
    return ik_scale.data() + size_t(row) * size_t(index_head_dim / 32);
  }
};

class SequenceState {
 public:
  SequenceState() = default;
  explicit SequenceState(const ModelConfig& cfg);

  int64_t n_tokens = 0;
  std::vector<WindowRing> window;        // one per backbone layer
  std::vector<CompressedKv> compressed;  // one per backbone layer; used only by KV sources
  std::vector<int32_t> engram_history;   // last (max_ngram - 1) mapped ids, oldest first

  // Bytes held by real allocations (capacity of every buffer).
  size_t bytes() const;
};

}  // namespace cedar
