// SequenceState: everything one sequence carries between forward calls (EXAMPLES.md §7.3), in
// the packed formats the model defines (spec §10.1), so that storing is lossless w.r.t. the
// reference's bf16 caches:
//   * per layer, a window ring of `sliding_window` slots (slot = pos % window): FP8 E4M3 codes +
//     one UE8M0 scale per 32 channels (528 B/row at the release width);
//   * per KV-source layer, the compressed main rows (packed E2M1 + E4M3 scale per 16) and the
//     index keys (packed E2M1 + UE8M0 scale per 32), appended as compressor groups complete, and
//     the fp32 k / gate logits of a trailing incomplete group (ratio > 1);
//   * the Engram history: the last max_ngram-1 mapped token ids;
//   * per DSpark stage, a ring of the drafter's main_kv rows (same packed format as a window);
//   * the number of tokens processed;
//   * CED bookkeeping (docs/FORWARD.md): how far the decoder layers have run (they lag while a
//     chunked CED prompt is open), the candidate-source input stream of the last <= window open
//     positions, and the first position whose window rows the rings hold.
// Owned by the caller; not thread-safe (the forward mutates it from one thread at a time, after
// its parallel sections).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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
  const uint8_t* row_codes(int64_t pos) const {
    return codes.data() + size_t(pos % window) * size_t(head_dim);
  }
  const uint8_t* row_scales(int64_t pos) const {
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
  // SequenceState::rewind's record of the last call (ratio > 1): the tail before it and the
  // fp32 k / gate logits of the call's rows (Compressor::append writes them while `on`).
  struct Undo {
    bool on = false;
    int n_tail = 0;
    std::vector<float> tail_k, tail_z, k, z;
  } undo;

  // Appends `rows` consecutive rows (packed codes + scales of both the main rows and the index
  // keys, each array row-major).
  void append(const uint8_t* kv_packed, const uint8_t* kv_scales, const uint8_t* ik_packed,
              const uint8_t* ik_scales, int64_t rows = 1);
  // Keeps the first `rows` rows (main rows and index keys); the tail is left as it is.
  void keep_rows(int64_t rows);
  void read_kv(int64_t row, float* out) const;         // exact bf16 values [head_dim]
  void read_index_key(int64_t row, float* out) const;  // exact bf16 values [index_head_dim]
  // bytes per row of the four arrays
  size_t kv_row_bytes() const { return size_t(head_dim / 2); }
  size_t kv_scales_row_bytes() const { return size_t(head_dim / 16); }
  size_t ik_row_bytes() const { return size_t(index_head_dim / 2); }
  size_t ik_scales_row_bytes() const { return size_t(index_head_dim / 32); }
  const uint8_t* kv_row(int64_t row) const { return kv_fp4.data() + size_t(row) * kv_row_bytes(); }
  const uint8_t* kv_scales_row(int64_t row) const {
    return kv_scale.data() + size_t(row) * kv_scales_row_bytes();
  }
  const uint8_t* ik_row(int64_t row) const { return ik_fp4.data() + size_t(row) * ik_row_bytes(); }
  const uint8_t* ik_scales_row(int64_t row) const {
    return ik_scale.data() + size_t(row) * ik_scales_row_bytes();
  }
};

// The mHC stream entering one layer for a run of consecutive positions: h as bf16 bits
// [rows, hc, D] (stream values are bf16 values, so this is lossless) and the fp32 pre-mix
// [rows, hc] of the previous FFN site.
struct StreamRows {
  int64_t first = 0;  // position of row 0
  int rows = 0;
  std::vector<uint16_t> h;
  std::vector<float> pre;
};

// An image's span in the sequence (v41-extras §3.4): START, (IMAGE x n_w, NEWLINE) x n_h, END
// from first_pos, every position holding the image placeholder id. Its rows route with the
// routers' bias_vl and are DEAD for Engram.
struct ImageSpan {
  int64_t first_pos = 0;
  int n_h = 0, n_w = 0;  // the aligner's token grid
  int64_t length() const { return int64_t(n_h) * (n_w + 1) + 2; }
  int64_t end() const { return first_pos + length(); }
  bool covers(int64_t pos) const { return pos >= first_pos && pos < end(); }
  bool operator==(const ImageSpan&) const = default;
};

// A state's handle on the other ranks of a model split into pipeline stages: moves with the
// state; a copy starts without one but keeps the original's, so that the copy's first forward
// has the ranks copy their parts of the original (the ranks refuse when the original has moved
// on by then).
struct StageRef {
  std::shared_ptr<void> handle, parent;
  StageRef() = default;
  StageRef(const StageRef& o) : parent(o.handle ? o.handle : o.parent) {}
  StageRef& operator=(const StageRef& o) {
    if (this != &o) {
      std::shared_ptr<void> p = o.handle ? o.handle : o.parent;
      handle.reset();
      parent = std::move(p);
    }
    return *this;
  }
  StageRef(StageRef&&) noexcept = default;
  StageRef& operator=(StageRef&&) noexcept = default;
};

class SequenceState {
 public:
  SequenceState() = default;
  explicit SequenceState(const ModelConfig& cfg);

  int64_t n_tokens = 0;
  std::vector<WindowRing> window;        // one per backbone layer
  std::vector<CompressedKv> compressed;  // one per backbone layer; used only by KV sources
  std::vector<int32_t> engram_history;   // last (max_ngram - 1) mapped ids, oldest first (-1:
                                         // an image position, DEAD)
  std::vector<ImageSpan> images;         // the image spans, ascending and disjoint
  bool in_image(int64_t pos) const {
    for (const ImageSpan& s : images)
      if (s.covers(pos)) return true;
    return false;
  }

  // CED: positions [0, dec_tokens) have run through the decoder layers. Equal to n_tokens except
  // while a chunked CED prompt is open (then ced_stream holds the candidate-source input of
  // positions [ced_stream.first, n_tokens), at most `window` rows).
  int64_t dec_tokens = 0;
  StreamRows ced_stream;
  // The rings of every layer hold valid rows for positions >= window_from only (0 normally; s
  // after a bounded replay or a truncated CED replay; n_tokens after drop_window()). A forward
  // whose first query needs an older row refuses to run.
  int64_t window_from = 0;
  // DSpark (forward/dspark.h): one ring per stage of the main_kv rows of the target's processed
  // positions [dspark_from, dspark_to) (at most `window` of them, slot = pos % window), written
  // by DSpark::seed; empty when the model has no stages. Any change to the processed positions
  // that seed() did not follow empties it (dspark_from = dspark_to = n_tokens).
  std::vector<WindowRing> dspark;
  int64_t dspark_from = 0, dspark_to = 0;

  // The undo log of the last forward that asked for one (ForwardOptions::keep_undo: a
  // speculative verify pass of at most `window` rows on a closed prompt): the ring slots its rows
  // overwrote, the state's counters and Engram history before it, the call's mapped ids.
  struct Undo {
    bool valid = false;
    int64_t p0 = 0;
    int n = 0, engram_keep = 0;
    bool seeded = false;
    int64_t window_from = 0, dspark_from = 0, dspark_to = 0;
    std::vector<int32_t> engram_history, mapped;
    std::vector<std::vector<uint8_t>> win_codes, win_scales;  // per layer: [n, head_dim], ...
    std::vector<std::vector<uint8_t>> ds_codes, ds_scales;    // per DSpark stage
  } undo;

  bool prompt_open() const { return dec_tokens < n_tokens; }

  // Set by a Transformer split into pipeline stages (forward/stage.h) at this state's first
  // forward: names the state's parts on the other ranks (released when it goes).
  StageRef stage;

  // Zeroes every ring and marks them empty (window_from = n_tokens): what a prefix-cache unit
  // without the window restores to; Transformer::replay() refills them.
  void drop_window();

  // Reserves the global rows of every KV source for n tokens (no reallocation while the state
  // grows up to n tokens). Never shrinks.
  void reserve(int64_t n);

  // Keeps positions [0, n_keep): global rows of complete groups (n_keep / ratio rows), drops
  // the ratio-2 tails (marked missing when n_keep % ratio != 0), the Engram history and the
  // window (window_from = n_keep). A bounded replay with the ids of the kept positions rebuilds
  // what was dropped (approximately: spec §9.4). Releases the freed capacity. Throws on an open
  // prompt or n_keep outside [0, n_tokens].
  void truncate(int64_t n_keep);

  // Starts the undo log of a call of n rows at p0 = n_tokens (Transformer::forward_batch, before
  // the call runs): `mapped` [n] the call's Engram-mapped ids, `engram_keep` the history length
  // (max_ngram - 1), `seeds` whether the call seeds the DSpark rings. end_undo() after the call.
  void begin_undo(int n, const int32_t* mapped, int engram_keep, bool seeds);
  void end_undo();

  // Drops the last k rows of the last call that kept an undo log (k <= its rows): afterwards the
  // state is bit for bit the state of a run that processed only the kept rows -- window rings,
  // compressed rows and ratio-2 tails, index keys, Engram history, DSpark rings, counters. The
  // log is consumed. Throws when there is no log, k is out of range or the state moved since.
  void rewind(int k);

  // Bytes held by real allocations (capacity of every buffer).
  size_t bytes() const;
  size_t global_bytes() const;  // compressed rows + index keys of every source
  size_t window_bytes() const;  // the rings
};

}  // namespace cedar
