// Sparse attention with bf16 dot products (the avx512bf16 table): attn.h's block structure,
// online softmax and bf16 probabilities, with both products on VDPBF16PS.
//
// Every operand is a bf16 value: the query (bf16 in the reference), the key rows (an E4M3 code
// times a power of two, or an E2M1 code times an E4M3 scale: at most 6 significant bits) and the
// probabilities (rounded to bf16 by the reference's softmax step). So every product is exact in
// fp32, as in attn.h; what changes is how they are summed:
//  * scores: q_h . k_j over hd as 16 fp32 lanes of word-pair sums, one chain per (head, key),
//    then hsum16x16's fixed tree (attn.h: four double lanes, rounded once). A score can differ
//    from the reference's in its last fp32 bit, and a probability's bf16 rounding with it;
//  * p . v: key pairs (j, j + 1) interleaved per dimension, so that one instruction adds
//    p_j v_j[d] + p_j+1 v_j+1[d] into the lane of dimension d (attn.h: one FMA per key).
// Per (head, key) with hd = 512: 16 instructions for the score (attn.h: 128 double FMAs) and 16
// for p . v (attn.h: 64 fp32 FMAs). Measured cost and tolerance: docs/NUMERICS.md "Fast kernels".
//
// Included only by src/kernels/avx512bf16/avx512bf16.cpp, inside an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/fast/attn.h"
#include "kernels/fast/dp512.h"

namespace cedar::kernels::fast {
namespace {

// fp32 block rows (attn.h's decode) [64, hd] | key words [64, hd] | key-pair words [32, hd, 2] |
// query words [H, hd] | acc [H, hd] | probabilities [H, 64] | pair words [H, 32] | max, den,
// alpha [H] | 16 floats of padding for 64-byte alignment
size_t sparse_attn_dp_scratch(int H, int hd) {
  return size_t(kAttnBlock) * size_t(hd) * 2 + size_t(H) * size_t(hd) / 2 + size_t(H) * size_t(hd) +
         size_t(H) * kAttnBlock + size_t(H) * (kAttnBlock / 2) + 3 * size_t(H) + 16;
}

// 32 fp32 values (bf16 values) -> 32 bf16 words in order (exact)
inline __m512i words_of(const float* x) {
  return __m512i(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
}

// The decoded fp32 rows [nb8, hd] as key words (row-major) and key-pair words: pair t, dimension
// d is the dword (word of row 2t, word of row 2t + 1) at kp[(t * hd + d) * 2].
inline void block_words(const float* kb, int nb8, int hd, uint16_t* kw, uint16_t* kp) {
  for (int j = 0; j < nb8; ++j)
    for (int d = 0; d < hd; d += 32)
      _mm512_storeu_si512(kw + size_t(j) * hd + d, words_of(kb + size_t(j) * hd + d));
  const __m512i hi = _mm512_set1_epi32(int(0xFFFF0000u));
  for (int t = 0; t < nb8 / 2; ++t) {
    const float* a = kb + size_t(2 * t) * hd;
    const float* b = a + hd;
    for (int d = 0; d < hd; d += 16) {
      // a bf16 value's fp32 bits are its word and 16 zero bits: a's word low, b's word high
      const __m512i ba = _mm512_castps_si512(_mm512_loadu_ps(a + d));
      const __m512i wa = _mm512_mask_srli_epi32(ba, __mmask16(0xFFFF), ba, 16);  // (dp512.h)
      const __m512i wb = _mm512_castps_si512(_mm512_loadu_ps(b + d));
      _mm512_storeu_si512(kp + (size_t(t) * hd + d) * 2,
                          _mm512_ternarylogic_epi32(wa, wb, hi, 0xD8));  // hi ? wb : wa
    }
  }
}

// s[h * 64 + j] = f32(q_h . k_j) * scale for HB heads and keys j .. j + 3
template <int HB>
inline void score_tile_dp(const uint16_t* qw, int hd, const uint16_t* kw, float scale, float* s) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int d = 0; d < hd; d += 32) {
    __m512i k[4];
    for (int j = 0; j < 4; ++j) k[j] = _mm512_loadu_si512(kw + size_t(j) * hd + d);
    for (int h = 0; h < HB; ++h) {
      const __m512i q = _mm512_loadu_si512(qw + size_t(h) * hd + d);
      for (int j = 0; j < 4; ++j) acc[h * 4 + j] = dp(acc[h * 4 + j], k[j], q);
    }
  }
  alignas(64) float dots[16];
  _mm512_store_ps(dots, hsum16x16(acc));
  for (int h = 0; h < HB; ++h)
    for (int j = 0; j < 4; ++j) {
      const float dot = dots[h * 4 + j];
      s[h * kAttnBlock + j] = (dot == 0.0f ? 0.0f : dot) * scale;  // a zero sum is +0.0
    }
}

// blk = sum over key pairs of p . v (one chain per lane, pairs in list order), acc = acc * alpha
// + blk, for HB heads and 16 * DV dimensions from d0; pw [h * 32 + t]: the pair's probabilities
template <int HB, int DV>
inline void pv_tile_dp(const uint16_t* kp, int hd, int d0, int pairs, const uint32_t* pw,
                       const float* alpha, float* acc) {
  __m512 b[HB][DV];
  for (int h = 0; h < HB; ++h)
    for (int v = 0; v < DV; ++v) b[h][v] = _mm512_setzero_ps();
  for (int t = 0; t < pairs; ++t) {
    __m512i kv[DV];
    for (int v = 0; v < DV; ++v)
      kv[v] = _mm512_loadu_si512(kp + (size_t(t) * hd + d0 + 16 * v) * 2);
    for (int h = 0; h < HB; ++h) {
      const __m512i p = _mm512_set1_epi32(int(pw[h * (kAttnBlock / 2) + t]));
      for (int v = 0; v < DV; ++v) b[h][v] = dp(b[h][v], kv[v], p);
    }
  }
  for (int h = 0; h < HB; ++h) {
    const __m512 al = _mm512_set1_ps(alpha[h]);
    for (int v = 0; v < DV; ++v) {
      float* a = acc + size_t(h) * hd + d0 + 16 * v;
      _mm512_storeu_ps(a, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(a), al), b[h][v]));
    }
  }
}

// ref: kernel.py sparse_attn for one query, all heads (kernel_table.h sparse_attn); head dims
// that are not whole 32-word vectors take attn.h's kernel
void sparse_attn_dp(const float* q, int H, int hd, const AttnKeys& keys, const float* sink,
                    float scale, float* out, float* scratch) {
  if (hd % 32 != 0) return sparse_attn(q, H, hd, keys, sink, scale, out, scratch);
  const int n = keys.n_win + keys.n_comp;
  float* kb = scratch;
  uint16_t* kw = reinterpret_cast<uint16_t*>(kb + size_t(kAttnBlock) * hd);
  uint16_t* kp = kw + size_t(kAttnBlock) * hd;
  uint16_t* qw = kp + size_t(kAttnBlock) * hd;
  float* acc = reinterpret_cast<float*>(qw + size_t(H) * hd);
  float* p = acc + size_t(H) * hd;
  uint32_t* pw = reinterpret_cast<uint32_t*>(p + size_t(H) * kAttnBlock);
  float* mx = reinterpret_cast<float*>(pw + size_t(H) * (kAttnBlock / 2));
  float* den = mx + H;
  float* alpha = den + H;
  for (int i = 0; i < H * hd; i += 32) _mm512_storeu_si512(qw + i, words_of(q + i));
  start_heads(H, hd, acc, mx, den);
  for (int j0 = 0; j0 < n; j0 += kAttnBlock) {
    const int nb = n - j0 < kAttnBlock ? n - j0 : kAttnBlock, nb8 = (nb + 7) & ~7;
    decode_block(keys, hd, j0, nb, nb8, kb);
    block_words(kb, nb8, hd, kw, kp);
    int h = 0;
    auto scores = [&]<int HB>(int h0) {
      for (int j = 0; j < nb8; j += 4)
        score_tile_dp<HB>(qw + size_t(h0) * hd, hd, kw + size_t(j) * hd, scale,
                          p + h0 * kAttnBlock + j);
    };
    for (; h + 4 <= H; h += 4) scores.template operator()<4>(h);
    for (; h < H; ++h) scores.template operator()<1>(h);
    for (int i = 0; i < H; ++i) {
      alpha[i] = softmax_step(p + i * kAttnBlock, nb, nb8, mx + i, den + i);
      // the bf16 probabilities (0 past nb) as words, paired like the keys
      const uint32_t* pb = reinterpret_cast<const uint32_t*>(p + i * kAttnBlock);
      for (int t = 0; t < nb8 / 2; ++t)
        pw[i * (kAttnBlock / 2) + t] = (pb[2 * t] >> 16) | (pb[2 * t + 1] & 0xFFFF0000u);
    }
    const int pairs = (nb + 1) / 2;
    auto pv = [&]<int HB>(int h0) {
      constexpr int DV = HB == 4 ? 4 : 2;  // 16 or 2 accumulators; hd % 32 == 0
      for (int d = 0; d + 16 * DV <= hd; d += 16 * DV)
        pv_tile_dp<HB, DV>(kp, hd, d, pairs, pw + h0 * (kAttnBlock / 2), alpha + h0,
                           acc + size_t(h0) * hd);
      if constexpr (DV == 4) {
        if (hd % 64 != 0)
          pv_tile_dp<HB, 2>(kp, hd, hd - 32, pairs, pw + h0 * (kAttnBlock / 2), alpha + h0,
                            acc + size_t(h0) * hd);
      }
    };
    h = 0;
    for (; h + 4 <= H; h += 4) pv.template operator()<4>(h);
    for (; h < H; ++h) pv.template operator()<1>(h);
  }
  finish_heads(H, hd, acc, mx, den, sink, out);
}

}  // namespace
}  // namespace cedar::kernels::fast
