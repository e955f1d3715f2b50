// Sparse attention of one query over its packed key list (kernel.py sparse_attn, NUMERICS §A),
// all H heads, fp32 vector lanes.
//
// The list is walked in the reference's blocks of 64 entries. Each block's key rows are decoded
// once into fp32 (exact values; shared by all heads) in `scratch`; then per head: the scores
// q.k_j (exact products summed in double lanes, rounded once) times the scale, the online
// softmax step with the reference's structure (running max from -1e30, correctly rounded exp of
// s - max, the denominator from a double sum, probabilities rounded to bf16 relative to the
// running max) and the block's sum of p * v (one fp32 FMA chain over the block per output lane)
// added to acc * alpha.
// The sink joins the denominator at the end. Heads are processed in groups of 4 / 2 / 1 that
// share key loads; the arithmetic of a head does not depend on its group.
//
// Against the reference: the scores (exact dot products), the exponentials (correctly rounded)
// and the denominators (double sums) are the reference's, so are the bf16 probabilities; only
// the fp32 sum of p * v differs in order, which moves an output by at most one bf16 ulp, rarely
// (docs/NUMERICS.md "Fast kernels").
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/fast/vec256.h"
#include "kernels/fast/vmath.h"
#include "kernels/kernel_table.h"

namespace cedar::kernels::fast {
namespace {

constexpr int kAttnBlock = 64;  // list entries per online-softmax step (the reference's)

// decoded block [64, hd] | acc [H, hd] | scores / probabilities [H, 64] | max, den, alpha [H] |
// the query in double [H, hd] (two floats each, 32-byte aligned by the padding)
size_t sparse_attn_scratch(int H, int hd) {
  return size_t(kAttnBlock) * size_t(hd) + size_t(H) * size_t(hd) + size_t(H) * kAttnBlock +
         3 * size_t(H) + 8 + 2 * size_t(H) * size_t(hd);
}

// A window row (E4M3 + UE8M0 / 32) -> exact fp32 values in element order (V8::dec_e4m3 gives
// the values times 2^-8: the scale is multiplied by 2^8).
inline void decode_fp8_row(const KeyRow& r, int hd, float* out) {
  for (int b = 0; b < hd / 32; ++b) {
    __m256 v[4];
    V8::dec_e4m3(r.codes + 32 * b, v);
    const __m256 s = _mm256_set1_ps(ue8m0_f32(r.scales[b]) * 256.0f);
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + 32 * b + 8 * i, _mm256_mul_ps(v[i], s));
  }
}

// A compressed row (packed E2M1 + E4M3 / 16) -> exact fp32 values in element order: each nibble
// looks up the high byte of its value's fp16; even and odd elements are
// interleaved back before the fp16 conversion.
inline void decode_fp4_row(const KeyRow& r, int hd, float* out) {
  const __m128i lut =
      _mm_setr_epi8(0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, char(0x80), char(0xB8),
                    char(0xBC), char(0xBE), char(0xC0), char(0xC2), char(0xC4), char(0xC6));
  const __m128i nib = _mm_set1_epi8(0x0F), z = _mm_setzero_si128();
  for (int b = 0; b < hd / 32; ++b) {
    const __m128i p = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r.codes + 16 * b));
    const __m128i ev = _mm_shuffle_epi8(lut, _mm_and_si128(p, nib));
    const __m128i od = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(p, 4), nib));
    const __m128i x0 = _mm_unpacklo_epi8(ev, od), x1 = _mm_unpackhi_epi8(ev, od);
    const __m256 s0 = _mm256_set1_ps(e4m3_f32(r.scales[2 * b]));
    const __m256 s1 = _mm256_set1_ps(e4m3_f32(r.scales[2 * b + 1]));
    float* o = out + 32 * b;
    _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi8(z, x0)), s0));
    _mm256_storeu_ps(o + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpackhi_epi8(z, x0)), s0));
    _mm256_storeu_ps(o + 16, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi8(z, x1)), s1));
    _mm256_storeu_ps(o + 24, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpackhi_epi8(z, x1)), s1));
  }
}

// List entries [j0, j0 + nb) decoded into kb, rows nb..nb8 zeroed (nb8: nb rounded up to 8).
inline void decode_block(const AttnKeys& keys, int hd, int j0, int nb, int nb8, float* kb) {
  for (int j = 0; j < nb; ++j) {
    const int e = j0 + j;
    if (e < keys.n_win)
      decode_fp8_row(keys.win[e], hd, kb + size_t(j) * hd);
    else
      decode_fp4_row(keys.comp[e - keys.n_win], hd, kb + size_t(j) * hd);
  }
  std::memset(kb + size_t(nb) * hd, 0, sizeof(float) * size_t(nb8 - nb) * size_t(hd));
}

// s[h * 64 + j] = f32(q_h . k_j) * scale for HB heads and 8 / HB keys, the dot product exact as
// the reference's (bf16 x bf16 products are exact; they are summed in four double lanes, then
// one fixed tree and one rounding): identical scores give identical probabilities, so the
// bf16 rounding of p (which a one-ulp score change can flip, moving a whole output row) agrees
// with the reference.
template <int HB>
inline void score_tile(const double* qd, int hd, const float* k, float scale, float* s) {
  constexpr int KB = 8 / HB;
  __m256d a[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_pd();
  for (int d = 0; d < hd; d += 4) {
    for (int j = 0; j < KB; ++j) {
      const __m256d kv = _mm256_cvtps_pd(_mm_loadu_ps(k + size_t(j) * hd + d));
      for (int h = 0; h < HB; ++h)
        a[h * KB + j] =
            _mm256_fmadd_pd(_mm256_loadu_pd(qd + size_t(h) * hd + d), kv, a[h * KB + j]);
    }
  }
  for (int h = 0; h < HB; ++h)
    for (int j = 0; j < KB; ++j) {
      const __m256d v = a[h * KB + j];
      const __m128d t = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
      const float dot = float(_mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t))));
      s[h * kAttnBlock + j] = (dot == 0.0f ? 0.0f : dot) * scale;  // a zero sum is +0.0
    }
}

// blk = sum_j p_j * k_j (one FMA chain per lane, j in list order), acc = acc * alpha + blk, for
// HB heads and 8 * DV lanes of hd starting at the given column.
template <int HB, int DV>
inline void pv_tile(const float* kb, int hd, int nb, const float* p, const float* alpha,
                    float* acc) {
  __m256 b[HB][DV];
  for (int h = 0; h < HB; ++h)
    for (int v = 0; v < DV; ++v) b[h][v] = _mm256_setzero_ps();
  for (int j = 0; j < nb; ++j) {
    __m256 kv[DV];
    for (int v = 0; v < DV; ++v) kv[v] = _mm256_loadu_ps(kb + size_t(j) * hd + 8 * v);
    for (int h = 0; h < HB; ++h) {
      const __m256 pj = _mm256_broadcast_ss(p + h * kAttnBlock + j);
      for (int v = 0; v < DV; ++v) b[h][v] = _mm256_fmadd_ps(pj, kv[v], b[h][v]);
    }
  }
  for (int h = 0; h < HB; ++h) {
    const __m256 al = _mm256_set1_ps(alpha[h]);
    for (int v = 0; v < DV; ++v) {
      float* a = acc + size_t(h) * hd + 8 * v;
      _mm256_storeu_ps(a, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a), al), b[h][v]));
    }
  }
}

// Scores and p * v of heads [h0, h0 + HB) over one decoded block.
template <int HB>
inline void head_group_scores(const double* qd, int hd, const float* kb, int nb8, float scale,
                              float* s) {
  for (int j = 0; j < nb8; j += 8 / HB) score_tile<HB>(qd, hd, kb + size_t(j) * hd, scale, s + j);
}
template <int HB>
inline void head_group_pv(const float* kb, int hd, int nb, const float* p, const float* alpha,
                          float* acc) {
  constexpr int DV = HB == 4 ? 2 : 4;  // 8 accumulators, 4 for a lone head (hd % 32 == 0)
  for (int d = 0; d < hd; d += 8 * DV) pv_tile<HB, DV>(kb + d, hd, nb, p, alpha, acc + d);
}

// ref: kernel.py sparse_attn's online softmax step for one head over one block: s [nb8] scores
// (the entries from nb on are padding) -> bf16 probabilities in place; updates the running max
// and the denominator, returns alpha = exp(old max - new max).
inline float softmax_step(float* s, int nb, int nb8, float* mx, float* den) {
  for (int j = nb; j < nb8; ++j) s[j] = -__builtin_inff();
  __m256 m = _mm256_set1_ps(-__builtin_inff());
  for (int j = 0; j < nb8; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
  const float bmax = V8::hmax(m);
  const float mnew = *mx < bmax ? bmax : *mx;
  const float alpha = exp1_cr(*mx - mnew);
  const __m256 mv = _mm256_set1_ps(mnew);
  __m256d sum = _mm256_setzero_pd();  // the block's sum of p in double, as the reference's
  for (int j = 0; j < nb8; j += 8) {
    const __m256 p = exp8_cr(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    sum = _mm256_add_pd(sum, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(p)),
                                           _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1))));
    _mm256_storeu_ps(s + j, bf16_round8(p));  // rounded relative to the running max
  }
  const __m128d t = _mm_add_pd(_mm256_castpd256_pd128(sum), _mm256_extractf128_pd(sum, 1));
  const float bsum = float(_mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t))));
  *den = *den * alpha + bsum;
  *mx = mnew;
  return alpha;
}

// Calls f<HB>(h0) over the heads in groups of 4, then 2, then 1.
template <class F>
inline void for_head_groups(int H, F&& f) {
  int h = 0;
  for (; h + 4 <= H; h += 4) f.template operator()<4>(h);
  for (; h + 2 <= H; h += 2) f.template operator()<2>(h);
  for (; h < H; ++h) f.template operator()<1>(h);
}

// Before the first block: acc = 0, every head's running max -1e30 and denominator 0.
inline void start_heads(int H, int hd, float* acc, float* mx, float* den) {
  std::memset(acc, 0, sizeof(float) * size_t(H) * size_t(hd));
  for (int h = 0; h < H; ++h) {
    mx[h] = -1e30f;
    den[h] = 0.0f;
  }
}

// After the last block: out = bf16(acc / (den + exp(sink - max))), the sink joining the
// denominator last.
inline void finish_heads(int H, int hd, const float* acc, const float* mx, const float* den,
                         const float* sink, float* out) {
  for (int h = 0; h < H; ++h) {
    const __m256 d = _mm256_set1_ps(den[h] + exp1_cr(sink[h] - mx[h]));
    for (int i = 0; i < hd; i += 8) {
      const size_t o = size_t(h) * hd + i;
      _mm256_storeu_ps(out + o, bf16_round8(_mm256_div_ps(_mm256_loadu_ps(acc + o), d)));
    }
  }
}

// ref: kernel.py sparse_attn for one query, all heads (kernel_table.h sparse_attn)
void sparse_attn(const float* q, int H, int hd, const AttnKeys& keys, const float* sink,
                 float scale, float* out, float* scratch) {
  const int n = keys.n_win + keys.n_comp;
  float* kb = scratch;
  float* acc = kb + size_t(kAttnBlock) * hd;
  float* p = acc + size_t(H) * hd;
  float* mx = p + size_t(H) * kAttnBlock;
  float* den = mx + H;
  float* alpha = den + H;
  // the query heads in double, once (32-byte aligned inside the scratch's padding)
  uintptr_t qa = reinterpret_cast<uintptr_t>(alpha + H);
  double* qd = reinterpret_cast<double*>((qa + 31) & ~uintptr_t(31));
  for (int i = 0; i < H * hd; i += 4) _mm256_store_pd(qd + i, _mm256_cvtps_pd(_mm_loadu_ps(q + i)));
  start_heads(H, hd, acc, mx, den);
  for (int j0 = 0; j0 < n; j0 += kAttnBlock) {
    const int nb = n - j0 < kAttnBlock ? n - j0 : kAttnBlock, nb8 = (nb + 7) & ~7;
    decode_block(keys, hd, j0, nb, nb8, kb);
    for_head_groups(H, [&]<int HB>(int h0) {
      head_group_scores<HB>(qd + size_t(h0) * hd, hd, kb, nb8, scale, p + h0 * kAttnBlock);
    });
    for (int h = 0; h < H; ++h)
      alpha[h] = softmax_step(p + h * kAttnBlock, nb, nb8, mx + h, den + h);
    for_head_groups(H, [&]<int HB>(int h0) {
      head_group_pv<HB>(kb, hd, nb, p + h0 * kAttnBlock, alpha + h0, acc + size_t(h0) * hd);
    });
  }
  finish_heads(H, hd, acc, mx, den, sink, out);
}

}  // namespace
}  // namespace cedar::kernels::fast
