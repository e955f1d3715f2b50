#include "state/sequence_state.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "numerics/fp4.h"
#include "numerics/fp8.h"

namespace cedar {

namespace {

// Decoding tables (exact: the numerics conversions, evaluated once).
struct Tables {
  float e4m3[256], ue8m0[256], e2m1[16];
  Tables() {
    for (int c = 0; c < 256; ++c) {
      e4m3[c] = e4m3_to_f32(uint8_t(c));
      ue8m0[c] = ue8m0_to_f32(uint8_t(c));
    }
    for (int c = 0; c < 16; ++c) e2m1[c] = e2m1_to_f32(uint8_t(c));
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

void WindowRing::read(int64_t pos, float* out) const {
  const uint8_t* c = codes.data() + size_t(pos % window) * size_t(head_dim);
  const uint8_t* s = scales.data() + size_t(pos % window) * size_t(head_dim / 32);
  const Tables& T = tables();
  for (int i = 0; i < head_dim; ++i) out[i] = T.e4m3[c[i]] * T.ue8m0[s[i / 32]];
}

void CompressedKv::append(const uint8_t* kv_packed, const uint8_t* kv_scales,
                          const uint8_t* ik_packed, const uint8_t* ik_scales, int64_t rows) {
  const size_t n = size_t(rows);
  kv_fp4.insert(kv_fp4.end(), kv_packed, kv_packed + n * kv_row_bytes());
  kv_scale.insert(kv_scale.end(), kv_scales, kv_scales + n * kv_scales_row_bytes());
  ik_fp4.insert(ik_fp4.end(), ik_packed, ik_packed + n * ik_row_bytes());
  ik_scale.insert(ik_scale.end(), ik_scales, ik_scales + n * ik_scales_row_bytes());
  n_rows += rows;
}

void CompressedKv::read_kv(int64_t row, float* out) const {
  if (row < 0 || row >= n_rows)
    throw std::runtime_error("compressed KV row " + std::to_string(row) + " out of range");
  const uint8_t* p = kv_row(row);
  const uint8_t* s = kv_scales_row(row);
  const Tables& T = tables();
  for (int i = 0; i < head_dim; i += 2) {
    const float sc = T.e4m3[s[i / 16]];
    out[i] = T.e2m1[fp4_lo(p[i / 2])] * sc;
    out[i + 1] = T.e2m1[fp4_hi(p[i / 2])] * sc;
  }
}

void CompressedKv::read_index_key(int64_t row, float* out) const {
  const uint8_t* p = ik_row(row);
  const uint8_t* s = ik_scales_row(row);
  const Tables& T = tables();
  for (int i = 0; i < index_head_dim; i += 2) {
    const float sc = T.ue8m0[s[i / 32]];
    out[i] = T.e2m1[fp4_lo(p[i / 2])] * sc;
    out[i + 1] = T.e2m1[fp4_hi(p[i / 2])] * sc;
  }
}

SequenceState::SequenceState(const ModelConfig& cfg) {
  const int L = cfg.num_hidden_layers;
  dspark.resize(size_t(cfg.num_nextn_predict_layers));
  for (WindowRing& w : dspark) {
    w.window = cfg.sliding_window;
    w.head_dim = cfg.head_dim;
    w.codes.assign(size_t(w.window) * size_t(w.head_dim), 0);
    w.scales.assign(size_t(w.window) * size_t(w.head_dim / 32), 0);
  }
  window.resize(size_t(L));
  compressed.resize(size_t(L));
  for (int l = 0; l < L; ++l) {
    WindowRing& w = window[size_t(l)];
    w.window = cfg.sliding_window;
    w.head_dim = cfg.head_dim;
    w.codes.assign(size_t(w.window) * size_t(w.head_dim), 0);
    w.scales.assign(size_t(w.window) * size_t(w.head_dim / 32), 0);
    const bool kv_source = !cfg.layers.empty() ? cfg.plan(l).is_kv_source : false;
    if (kv_source) {
      CompressedKv& c = compressed[size_t(l)];
      c.ratio = cfg.plan(l).ratio;
      c.head_dim = cfg.head_dim;
      c.index_head_dim = cfg.index_head_dim;
      if (c.ratio > 1) {
        c.tail_k.assign(size_t(c.ratio - 1) * size_t(c.head_dim), 0.0f);
        c.tail_z.assign(size_t(c.ratio - 1) * size_t(c.head_dim), 0.0f);
      }
    }
  }
}

void CompressedKv::keep_rows(int64_t rows) {
  n_rows = rows;
  kv_fp4.resize(size_t(rows) * kv_row_bytes());
  kv_scale.resize(size_t(rows) * kv_scales_row_bytes());
  ik_fp4.resize(size_t(rows) * ik_row_bytes());
  ik_scale.resize(size_t(rows) * ik_scales_row_bytes());
}

void SequenceState::drop_window() {
  for (auto& w : window) {
    std::fill(w.codes.begin(), w.codes.end(), uint8_t(0));
    std::fill(w.scales.begin(), w.scales.end(), uint8_t(0));
  }
  window_from = n_tokens;
  dspark_from = dspark_to = n_tokens;
  undo.valid = false;
}

void SequenceState::reserve(int64_t n) {
  if (n < 0) throw std::runtime_error("SequenceState::reserve: negative token count");
  for (auto& c : compressed) {
    if (c.ratio <= 0) continue;
    const size_t rows = size_t(n / c.ratio);
    c.kv_fp4.reserve(rows * c.kv_row_bytes());
    c.kv_scale.reserve(rows * c.kv_scales_row_bytes());
    c.ik_fp4.reserve(rows * c.ik_row_bytes());
    c.ik_scale.reserve(rows * c.ik_scales_row_bytes());
  }
}

void SequenceState::truncate(int64_t n_keep) {
  if (prompt_open())
    throw std::runtime_error("SequenceState::truncate: a CED prompt is open (decoder at " +
                             std::to_string(dec_tokens) + " of " + std::to_string(n_tokens) +
                             " tokens)");
  if (n_keep < 0 || n_keep > n_tokens)
    throw std::runtime_error("SequenceState::truncate: n_keep " + std::to_string(n_keep) +
                             " outside [0, " + std::to_string(n_tokens) + "]");
  if (n_keep == n_tokens) return;
  for (auto& c : compressed) {
    if (c.ratio <= 0) continue;
    c.keep_rows(n_keep / c.ratio);
    c.kv_fp4.shrink_to_fit();
    c.kv_scale.shrink_to_fit();
    c.ik_fp4.shrink_to_fit();
    c.ik_scale.shrink_to_fit();
    // the parked tokens of group n_keep / ratio were folded into a row that is now dropped: they
    // are gone (n_tail = 0 != n_keep % ratio marks them missing; replay recomputes them)
    std::fill(c.tail_k.begin(), c.tail_k.end(), 0.0f);
    std::fill(c.tail_z.begin(), c.tail_z.end(), 0.0f);
    c.n_tail = 0;
  }
  engram_history.clear();
  std::erase_if(images, [&](const ImageSpan& s) { return s.first_pos >= n_keep; });
  n_tokens = dec_tokens = n_keep;
  ced_stream = StreamRows{};
  drop_window();
}

namespace {

// The ring slots of positions p0 .. p0+n-1 saved into codes/scales (n rows)...
void save_rows(const WindowRing& w, int64_t p0, int n, std::vector<uint8_t>& codes,
               std::vector<uint8_t>& scales) {
  const size_t hd = size_t(w.head_dim), hs = hd / 32;
  codes.resize(size_t(n) * hd);
  scales.resize(size_t(n) * hs);
  for (int i = 0; i < n; ++i) {
    std::copy_n(w.row_codes(p0 + i), hd, codes.data() + size_t(i) * hd);
    std::copy_n(w.row_scales(p0 + i), hs, scales.data() + size_t(i) * hs);
  }
}

// ... and saved rows j .. of them put back into the slots of positions p0 + j ..
void restore_rows(WindowRing& w, int64_t p0, int j, const std::vector<uint8_t>& codes,
                  const std::vector<uint8_t>& scales) {
  const size_t hd = size_t(w.head_dim), hs = hd / 32;
  for (size_t i = size_t(j); i < codes.size() / hd; ++i) {
    std::copy_n(codes.data() + i * hd, hd, w.row_codes(p0 + int64_t(i)));
    std::copy_n(scales.data() + i * hs, hs, w.row_scales(p0 + int64_t(i)));
  }
}

}  // namespace

void SequenceState::begin_undo(int n, const int32_t* mapped, int engram_keep, bool seeds) {
  if (prompt_open()) throw std::runtime_error("SequenceState::begin_undo: a CED prompt is open");
  const int W = window.empty() ? 0 : window[0].window;
  if (n <= 0 || n > W)
    throw std::runtime_error("SequenceState::begin_undo: " + std::to_string(n) +
                             " rows (an undo log covers 1 .. window rows)");
  Undo& u = undo;
  u.valid = true;
  u.p0 = n_tokens;
  u.n = n;
  u.engram_keep = engram_keep;
  u.seeded = seeds;
  u.window_from = window_from;
  u.dspark_from = dspark_from;
  u.dspark_to = dspark_to;
  u.engram_history = engram_history;
  u.mapped.assign(mapped, mapped + (mapped ? n : 0));
  u.win_codes.resize(window.size());
  u.win_scales.resize(window.size());
  for (size_t l = 0; l < window.size(); ++l)
    save_rows(window[l], u.p0, n, u.win_codes[l], u.win_scales[l]);
  u.ds_codes.resize(seeds ? dspark.size() : 0);
  u.ds_scales.resize(u.ds_codes.size());
  for (size_t s = 0; s < u.ds_codes.size(); ++s)
    save_rows(dspark[s], u.p0, n, u.ds_codes[s], u.ds_scales[s]);
  for (auto& c : compressed) {
    if (c.ratio <= 1) continue;
    c.undo.on = true;
    c.undo.n_tail = c.n_tail;
    c.undo.tail_k = c.tail_k;
    c.undo.tail_z = c.tail_z;
    c.undo.k.clear();
    c.undo.z.clear();
  }
}

void SequenceState::end_undo() {
  for (auto& c : compressed) c.undo.on = false;
}

void SequenceState::rewind(int k) {
  Undo& u = undo;
  if (!u.valid) throw std::runtime_error("SequenceState::rewind: no undo log (keep_undo)");
  if (n_tokens != u.p0 + u.n || prompt_open())
    throw std::runtime_error("SequenceState::rewind: the state moved since the logged call");
  if (k < 0 || k > u.n)
    throw std::runtime_error("SequenceState::rewind: " + std::to_string(k) +
                             " rows, the logged call has " + std::to_string(u.n));
  u.valid = false;
  const int j = u.n - k;
  const int64_t N = u.p0 + j;
  if (k == 0) return;
  // the slots of the dropped rows get back what they held before the call
  for (size_t l = 0; l < window.size(); ++l)
    restore_rows(window[l], u.p0, j, u.win_codes[l], u.win_scales[l]);
  for (auto& c : compressed) {
    if (c.ratio <= 0) continue;
    c.keep_rows(N / c.ratio);
    if (c.ratio == 1) continue;
    // the open group of N: positions N - m .. N - 1, from the call's rows or the tail before it
    const int m = int(N % c.ratio);
    const size_t hd = size_t(c.head_dim);
    std::fill(c.tail_k.begin(), c.tail_k.end(), 0.0f);
    std::fill(c.tail_z.begin(), c.tail_z.end(), 0.0f);
    for (int t = 0; t < m; ++t) {
      const int64_t q = N - m + t;
      const bool call = q >= u.p0;
      const size_t r = size_t(call ? q - u.p0 : q - (u.p0 - c.undo.n_tail));
      const std::vector<float>& sk = call ? c.undo.k : c.undo.tail_k;
      const std::vector<float>& sz = call ? c.undo.z : c.undo.tail_z;
      std::copy_n(sk.begin() + long(r * hd), hd, c.tail_k.begin() + long(size_t(t) * hd));
      std::copy_n(sz.begin() + long(r * hd), hd, c.tail_z.begin() + long(size_t(t) * hd));
    }
    c.n_tail = m;
  }
  if (!u.mapped.empty() || !u.engram_history.empty()) {
    std::vector<int32_t> all = u.engram_history;
    all.insert(all.end(), u.mapped.begin(), u.mapped.begin() + j);
    const size_t keep = size_t(u.engram_keep);
    engram_history.assign(all.end() - long(std::min(keep, all.size())), all.end());
  }
  n_tokens = dec_tokens = N;
  window_from = u.window_from;
  if (u.seeded) {
    for (size_t s = 0; s < dspark.size(); ++s)
      restore_rows(dspark[s], u.p0, j, u.ds_codes[s], u.ds_scales[s]);
    if (j == 0) {
      dspark_from = u.dspark_from;
      dspark_to = u.dspark_to;
    } else {
      const int64_t from = u.p0 == u.dspark_to ? u.dspark_from : u.p0;
      const int W = dspark.empty() ? 1 : dspark[0].window;
      dspark_to = N;
      dspark_from = std::max(from, N - W);
    }
  }
}

size_t SequenceState::global_bytes() const {
  size_t b = 0;
  for (const auto& c : compressed)
    b += c.kv_fp4.capacity() + c.kv_scale.capacity() + c.ik_fp4.capacity() + c.ik_scale.capacity();
  return b;
}

size_t SequenceState::window_bytes() const {
  size_t b = 0;
  for (const auto& w : window) b += w.codes.capacity() + w.scales.capacity();
  return b;
}

size_t SequenceState::bytes() const {
  size_t b = engram_history.capacity() * sizeof(int32_t) + global_bytes() + window_bytes();
  for (const auto& c : compressed) b += (c.tail_k.capacity() + c.tail_z.capacity()) * sizeof(float);
  b += ced_stream.h.capacity() * sizeof(uint16_t) + ced_stream.pre.capacity() * sizeof(float);
  for (const auto& w : dspark) b += w.codes.capacity() + w.scales.capacity();
  return b;
}

}  // namespace cedar
