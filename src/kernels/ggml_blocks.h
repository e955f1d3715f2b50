// The ggml block types a V4.1 GGUF stores weights in (../shared/spec/v41-gguf.md §7): one block's
// bytes to its fp32 values, exactly as the format defines each value. Shared by the GGUF reader
// (model/gguf_decode.cpp, the oracle of `cedar inspect --tensor`) and the kernel families that
// compute with such weights in place (kernels/ref/gemm_blocks.cpp, kernels/fast/gemm_blocks.h), so
// both read the same values.
//
// Like the fast kernel headers this one includes nothing but C headers (and the IQ grids, plain
// constexpr arrays generated at configure time: cmake/GgmlTables.cmake) and keeps everything in an
// anonymous namespace: each translation unit, the ISA ones included, gets its own copy compiled
// with its own flags, and no AVX-512 code reaches another TU through a shared inline function.
// For the same reason the fp16 scale conversion is a template parameter (`Half`: any exact
// binary16 -> fp32 conversion; numerics/fp16.h's or F16C's).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ggml_iq_tables.h"

namespace cedar::ggml {
namespace {

constexpr uint32_t kQ4_0 = 2, kQ5_0 = 6, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13,
                   kQ6_K = 14, kIQ2_XXS = 16, kIQ1_S = 19, kIQ1_M = 29, kMXFP4 = 39;

// Elements and bytes of one block of type T.
constexpr int block_elems(uint32_t t) {
  return t == kQ8_0 || t == kQ4_0 || t == kQ5_0 || t == kMXFP4 ? 32 : 256;
}
constexpr int block_bytes(uint32_t t) {
  switch (t) {
    case kMXFP4:
      return 17;
    case kIQ2_XXS:
      return 66;
    case kIQ1_S:
      return 50;
    case kIQ1_M:
      return 56;
    case kQ4_0:
      return 18;
    case kQ5_0:
      return 22;
    case kQ8_0:
      return 34;
    case kQ2_K:
      return 84;
    case kQ3_K:
      return 110;
    case kQ4_K:
      return 144;
    case kQ5_K:
      return 176;
    default:
      return 210;  // kQ6_K
  }
}
template <uint32_t T>
struct Block {
  static constexpr int elems = block_elems(T), bytes = block_bytes(T);
};

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// ref: ggml-common.h block_q8_0 {d; qs[32]}
template <class Half>
void q8_0(const uint8_t* b, float* y, Half half) {
  const float d = half(u16_at(b));
  for (int i = 0; i < 32; ++i) y[i] = d * float(int8_t(b[2 + i]));
}

// block_q4_0 {d; qs[16]}: element j low nibble of qs[j], j + 16 its high nibble, minus 8
template <class Half>
void q4_0(const uint8_t* b, float* y, Half half) {
  const float d = half(u16_at(b));
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int(b[2 + j] & 15) - 8);
    y[j + 16] = d * float(int(b[2 + j] >> 4) - 8);
  }
}

// block_mxfp4 {e; qs[16]}: ggml's doubled E2M1 value times 2^(e - 128), i.e. the OCP E2M1 value
// times the UE8M0 scale 2^(e - 127) -- the release's FP4 value of the same code and scale byte;
// element j in the low nibble of qs[j], j + 16 in its high nibble. e = 255 (UE8M0's NaN) gives
// NaN, as the release's scale code does (ggml reads it as 2^127; no quantizer writes it).
inline void mxfp4(const uint8_t* b, float* y) {
  static constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const uint32_t bits = b[0] == 255 ? 0x7fc00000u : b[0] == 0 ? 0x00400000u : uint32_t(b[0]) << 23;
  float s;
  std::memcpy(&s, &bits, 4);
  for (int j = 0; j < 16; ++j) {
    y[j] = kE2m1[b[1 + j] & 15] * s;
    y[j + 16] = kE2m1[b[1 + j] >> 4] * s;
  }
}

// block_q5_0 {d; qh[4]; qs[16]}: nibbles as Q4_0, bit 4 of element j in bit j of qh, minus 16
template <class Half>
void q5_0(const uint8_t* b, float* y, Half half) {
  const float d = half(u16_at(b));
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int((b[6 + j] & 15) | ((qh >> j) & 1) << 4) - 16);
    y[j + 16] = d * float(int((b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16);
  }
}

// block_q2_K {scales[16]; qs[64]; d; dmin}: two halves of 128, four 2-bit passes each
template <class Half>
void q2_k(const uint8_t* b, float* y, Half half) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = half(u16_at(b + 80)), dmin = half(u16_at(b + 82));
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = qs + 32 * h;
    for (int p = 0; p < 4; ++p)
      for (int hf = 0; hf < 2; ++hf) {
        const uint8_t s = sc[8 * h + 2 * p + hf];
        const float dl = d * float(s & 15), ml = dmin * float(s >> 4);
        for (int l = 0; l < 16; ++l)
          y[128 * h + 32 * p + 16 * hf + l] = dl * float((q[16 * hf + l] >> (2 * p)) & 3) - ml;
      }
  }
}

// Q3_K's scale i of 16 from the 12 packed bytes s (4 low bits, then 2 high ones), minus 32
inline int q3_k_scale(const uint8_t* s, int i) {
  const int low = i < 8 ? (s[i] & 15) : (s[i - 8] >> 4);
  const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// block_q3_K {hmask[32]; qs[64]; scales[12]; d}: sixteen 6-bit signed scales, 2 low bits from
// qs and the high bit from hmask (set: 0, clear: -4)
template <class Half>
void q3_k(const uint8_t* b, float* y, Half half) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* s = b + 96;
  const float d = half(u16_at(b + 108));
  int scale[16];
  for (int i = 0; i < 16; ++i) scale[i] = q3_k_scale(s, i);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = qs + 32 * h;
    for (int p = 0; p < 4; ++p) {
      const int t = 4 * h + p;
      for (int hf = 0; hf < 2; ++hf) {
        const float dl = d * float(scale[8 * h + 2 * p + hf]);
        for (int l = 0; l < 16; ++l) {
          const int k = 16 * hf + l;
          const int q2 = (q[k] >> (2 * p)) & 3;
          const int hi = (hmask[k] >> t) & 1;
          y[128 * h + 32 * p + k] = dl * float(q2 - (hi ? 0 : 4));
        }
      }
    }
  }
}

// the 12-byte 6-bit scale/min packing of Q4_K and Q5_K
inline void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// block_q4_K {d; dmin; scales[12]; qs[128]} and block_q5_K {d; dmin; scales[12]; qh[32];
// qs[128]}: four 64-value chunks of two 32-value sub-blocks (low then high nibbles)
template <bool kFive, class Half>
void q45_k(const uint8_t* b, float* y, Half half) {
  const float d = half(u16_at(b)), dmin = half(u16_at(b + 2));
  const uint8_t* s = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFive ? 48 : 16);
  for (int c = 0; c < 4; ++c)
    for (int hf = 0; hf < 2; ++hf) {
      int sc, m;
      k_scale_min(s, 2 * c + hf, &sc, &m);
      const float dl = d * float(sc), ml = dmin * float(m);
      for (int l = 0; l < 32; ++l) {
        int q = hf ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
        if (kFive) q += ((qh[l] >> (2 * c + hf)) & 1) << 4;
        y[64 * c + 32 * hf + l] = dl * float(q) - ml;
      }
    }
}

// block_q6_K {ql[128]; qh[64]; scales[16] (int8); d}
template <class Half>
void q6_k(const uint8_t* b, float* y, Half half) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(u16_at(b + 208));
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const uint8_t* L = ql + 64 * h;
      const uint8_t H = qh[32 * h + l];
      const int q[4] = {(L[l] & 15) | ((H & 3) << 4), (L[l + 32] & 15) | (((H >> 2) & 3) << 4),
                        (L[l] >> 4) | (((H >> 4) & 3) << 4), (L[l + 32] >> 4) | ((H >> 6) << 4)};
      for (int k = 0; k < 4; ++k)
        y[128 * h + l + 32 * k] = d * float(sc[8 * h + is + 2 * k]) * float(q[k] - 32);
    }
}

// block_iq2_xxs {d; qs[32] (u16)}: eight 32-value groups of 8 bytes, read as two u32 words: the
// first's bytes index the grid of 8 magnitudes (each 8, 25 or 43) of the group's four 8-value
// runs; the second holds four 7-bit sign-pattern indices (an even number of minus signs: the
// eighth is implied) and, in its top 4 bits, the group scale s: d * (0.5 + s) / 4.
template <class Half>
void iq2_xxs(const uint8_t* b, float* y, Half half) {
  const float d = half(u16_at(b));
  for (int g = 0; g < 8; ++g, y += 32) {
    uint32_t idx, aux;
    std::memcpy(&idx, b + 2 + 8 * g, 4);
    std::memcpy(&aux, b + 6 + 8 * g, 4);
    const float dg = d * (0.5f + float(aux >> 28)) * 0.25f;
    for (int run = 0; run < 4; ++run) {
      const uint64_t grid = tables::kIq2xxsGrid[(idx >> (8 * run)) & 255];
      const uint8_t signs = tables::kKsignsIq2xs[(aux >> (7 * run)) & 127];
      for (int j = 0; j < 8; ++j) {
        const float v = dg * float((grid >> (8 * j)) & 255);
        y[8 * run + j] = signs & tables::kKmaskIq2xs[j] ? -v : v;
      }
    }
  }
}

// The IQ1 grids' entries are eight int8 values in {-1, 0, 1}, moved by +-1/8 per run.
constexpr float kIq1Delta = 0.125f;
inline void iq1_run(uint32_t grid_index, float scale, bool minus, float* y) {
  const uint64_t grid = tables::kIq1sGrid[grid_index];
  const float delta = minus ? -kIq1Delta : kIq1Delta;
  for (int j = 0; j < 8; ++j) y[j] = scale * (float(int8_t(grid >> (8 * j))) + delta);
}

// block_iq1_s {d; qs[32]; qh[8] (u16)}: per 32-value group g, qh[g] holds the four runs' 3 high
// grid-index bits (bits 0-11), the odd scale 2s + 1 (bits 12-14) and the delta's sign (bit 15).
// run(grid index, scale, minus, y) writes a run's eight values (iq1_run, or a vector form).
template <class Half, class Run>
void iq1_s_runs(const uint8_t* b, float* y, Half half, Run run) {
  const float d = half(u16_at(b));
  for (int g = 0; g < 8; ++g) {
    const uint16_t qh = u16_at(b + 34 + 2 * g);
    const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
    for (int r = 0; r < 4; ++r, y += 8)
      run(b[2 + 4 * g + r] | (((qh >> (3 * r)) & 7u) << 8), dl, qh & 0x8000, y);
  }
}

// block_iq1_m {qs[32]; qh[16]; scales[8]}: no d field -- its 16 bits are the top nibbles of the
// four u16 scale words; each group's two halves have their own odd 3-bit scales (bits 6(g%2)..),
// and each run its 3 high index bits and delta sign in a nibble of qh.
template <class Half, class Run>
void iq1_m_runs(const uint8_t* b, float* y, Half half, Run run) {
  uint16_t sc[4];
  for (int i = 0; i < 4; ++i) sc[i] = u16_at(b + 48 + 2 * i);
  const float d = half(uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                (sc[3] & 0xf000)));
  for (int g = 0; g < 8; ++g) {
    const int shift = 6 * (g % 2);
    const float dl[2] = {d * float(2 * ((sc[g / 2] >> shift) & 7) + 1),
                         d * float(2 * ((sc[g / 2] >> (shift + 3)) & 7) + 1)};
    for (int r = 0; r < 4; ++r, y += 8) {
      const uint8_t nib = uint8_t(b[32 + 2 * g + r / 2] >> (4 * (r % 2)));
      run(b[4 * g + r] | ((nib & 7u) << 8), dl[r / 2], nib & 8, y);
    }
  }
}

template <class Half>
void iq1_s(const uint8_t* b, float* y, Half half) {
  iq1_s_runs(b, y, half, iq1_run);
}
template <class Half>
void iq1_m(const uint8_t* b, float* y, Half half) {
  iq1_m_runs(b, y, half, iq1_run);
}

// One block of type T (one of the constants above) to its Block<T>::elems values.
template <uint32_t T, class Half>
void decode_block(const uint8_t* b, float* y, Half half) {
  if constexpr (T == kQ8_0) q8_0(b, y, half);
  if constexpr (T == kQ4_0) q4_0(b, y, half);
  if constexpr (T == kQ5_0) q5_0(b, y, half);
  if constexpr (T == kQ2_K) q2_k(b, y, half);
  if constexpr (T == kQ3_K) q3_k(b, y, half);
  if constexpr (T == kQ4_K) q45_k<false>(b, y, half);
  if constexpr (T == kQ5_K) q45_k<true>(b, y, half);
  if constexpr (T == kQ6_K) q6_k(b, y, half);
  if constexpr (T == kIQ2_XXS) iq2_xxs(b, y, half);
  if constexpr (T == kIQ1_S) iq1_s(b, y, half);
  if constexpr (T == kIQ1_M) iq1_m(b, y, half);
  if constexpr (T == kMXFP4) mxfp4(b, y);
}

// Calls f(std::integral_constant<uint32_t, T>{}) for the block type T == type and returns true;
// false (f not called) for any other type id. The one place a runtime type id becomes T.
template <class F>
bool with_block_type(uint32_t type, F&& f) {
  switch (type) {
    case kQ8_0:
      return f(std::integral_constant<uint32_t, kQ8_0>{}), true;
    case kQ4_0:
      return f(std::integral_constant<uint32_t, kQ4_0>{}), true;
    case kQ5_0:
      return f(std::integral_constant<uint32_t, kQ5_0>{}), true;
    case kQ2_K:
      return f(std::integral_constant<uint32_t, kQ2_K>{}), true;
    case kQ3_K:
      return f(std::integral_constant<uint32_t, kQ3_K>{}), true;
    case kQ4_K:
      return f(std::integral_constant<uint32_t, kQ4_K>{}), true;
    case kQ5_K:
      return f(std::integral_constant<uint32_t, kQ5_K>{}), true;
    case kQ6_K:
      return f(std::integral_constant<uint32_t, kQ6_K>{}), true;
    case kIQ2_XXS:
      return f(std::integral_constant<uint32_t, kIQ2_XXS>{}), true;
    case kIQ1_S:
      return f(std::integral_constant<uint32_t, kIQ1_S>{}), true;
    case kIQ1_M:
      return f(std::integral_constant<uint32_t, kIQ1_M>{}), true;
    case kMXFP4:
      return f(std::integral_constant<uint32_t, kMXFP4>{}), true;
  }
  return false;
}

// n values (whole blocks) of a row of type T.
template <uint32_t T, class Half>
void decode_row(const uint8_t* src, int64_t n, float* y, Half half) {
  for (int64_t i = 0; i < n / Block<T>::elems; ++i)
    decode_block<T>(src + i * Block<T>::bytes, y + i * Block<T>::elems, half);
}

}  // namespace
}  // namespace cedar::ggml
