#include "state/sequence_state.h"

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
                          const uint8_t* ik_packed, const uint8_t* ik_scales) {
  kv_fp4.insert(kv_fp4.end(), kv_packed, kv_packed + head_dim / 2);
  kv_scale.insert(kv_scale.end(), kv_scales, kv_scales + head_dim / 16);
  ik_fp4.insert(ik_fp4.end(), ik_packed, ik_packed + index_head_dim / 2);
  ik_scale.insert(ik_scale.end(), ik_scales, ik_scales + index_head_dim / 32);
  ++n_rows;
}

void CompressedKv::read_kv(int64_t row, float* out) const {
  if (row < 0 || row >= n_rows)
    throw std::runtime_error("compressed KV row " + std::to_string(row) + " out of range");
  const uint8_t* p = kv_fp4.data() + size_t(row) * size_t(head_dim / 2);
  const uint8_t* s = kv_scale.data() + size_t(row) * size_t(head_dim / 16);
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

size_t SequenceState::bytes() const {
  size_t b = engram_history.capacity() * sizeof(int32_t);
  for (const auto& w : window) b += w.codes.capacity() + w.scales.capacity();
  for (const auto& c : compressed) {
    b += c.kv_fp4.capacity() + c.kv_scale.capacity() + c.ik_fp4.capacity() + c.ik_scale.capacity() +
         (c.tail_k.capacity() + c.tail_z.capacity()) * sizeof(float);
  }
  return b;
}

}  // namespace cedar
