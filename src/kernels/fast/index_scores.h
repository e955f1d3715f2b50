// Indexer scores (NUMERICS §C) with int8 SIMD on the packed FP4 keys, eight key rows at a time
// (one row per fp32 lane after the integer part).
//
// Integer part, per 32-element block: key nibbles -> 2 * E2M1 + 12 (unsigned, 0..24) by one
// byte shuffle; _mm256_maddubs_epi16 against the query codes (2 * E2M1, signed) in the nibble
// order of the keys (the query is rearranged once per call); the +12 offset is taken back as
// 12 * (sum of the block's query codes). The int16 partial sums of eight rows are reduced by a
// tree of _mm256_hadd_epi16 (at most 32 * 24 * 12 = 9216 per block: no overflow), which leaves
// each block's eight row sums in one half register. All of this is exact.
//
// Float part, per head, lane = row: the block sums times 2^(qe + ke - 256) (exact above 2^-149),
// summed over the blocks in fp32 in block order (the reference sums in double: equal unless the
// blocks' exponents spread so far that the fp32 sum rounds), then the reference's rounding steps:
// bf16(sum), relu, bf16(* w), an fp32 sum over the heads (the reference: double) and bf16.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/vmath.h"
#include "kernels/ref/ref.h"

namespace cedar::kernels::fast {
namespace {

// Limits of the fast path (its buffers live on the stack); other shapes take the reference.
constexpr int kIdxMaxHd = 512, kIdxMaxQ = 32768;  // ihd, IH * ihd

// The query of one call in the keys' order: per head and 64-element chunk, 32 bytes of the even
// elements then 32 bytes of the odd ones; per (head, block) the +12 correction and 2^(qe - 129).
struct IndexQuery {
  alignas(32) int8_t q[kIdxMaxQ];
  int32_t corr[kIdxMaxQ / 32];
  float scale[kIdxMaxQ / 32];
};

inline void index_query(const int8_t* qc, const uint8_t* qe, int IH, int ihd, IndexQuery* out) {
  const int nb = ihd / 32;
  for (int h = 0; h < IH; ++h) {
    const int8_t* src = qc + size_t(h) * ihd;
    int8_t* dst = out->q + size_t(h) * ihd;
    for (int c = 0; c < ihd / 64; ++c)
      for (int p = 0; p < 32; ++p) {
        dst[64 * c + p] = src[64 * c + 2 * p];
        dst[64 * c + 32 + p] = src[64 * c + 2 * p + 1];
      }
    for (int b = 0; b < nb; ++b) {
      int s = 0;
      for (int i = 0; i < 32; ++i) s += src[32 * b + i];
      out->corr[h * nb + b] = 12 * s;
      out->scale[h * nb + b] = pow2f(int(qe[h * nb + b]) - 129);  // x 2^(ke-127): 2^(qe+ke-256)
    }
  }
}

// Eight key rows: per row and chunk the even elements' codes + 12, then the odd ones' (bytes).
inline void decode_index_keys(const uint8_t* keys, int ihd, const int32_t* t, __m256i* kbuf) {
  const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                       12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i nib = _mm256_set1_epi8(0x0f);
  const int nch = ihd / 64;
  for (int r = 0; r < 8; ++r) {
    const uint8_t* row = keys + size_t(t[r]) * size_t(ihd / 2);
    for (int c = 0; c < nch; ++c) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * c));
      kbuf[(r * nch + c) * 2] = _mm256_shuffle_epi8(lut, _mm256_and_si256(b, nib));
      kbuf[(r * nch + c) * 2 + 1] =
          _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(b, 4), nib));
    }
  }
}

// 2^(ke - 127) of eight rows for each block (code 0: 2^-127, like fmath::ue8m0).
inline void index_key_scales(const uint8_t* key_scales, int nb, const int32_t* t, __m256* ks) {
  const __m256i idx = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t)),
                                         _mm256_set1_epi32(nb / 4));
  const __m256 tiny = _mm256_set1_ps(0x1p-127f);
  for (int g = 0; g < nb / 4; ++g) {
    // lane r: the scale codes of blocks 4g..4g+3 of row t[r]
    const __m256i w = _mm256_i32gather_epi32(reinterpret_cast<const int*>(key_scales) + g, idx, 4);
    for (int i = 0; i < 4; ++i) {
      const __m256i e = _mm256_and_si256(_mm256_srli_epi32(w, 8 * i), _mm256_set1_epi32(0xff));
      const __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
      const __m256 zero = _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
      ks[4 * g + i] = _mm256_blendv_ps(f, tiny, zero);
    }
  }
}

// The integer block sums of chunk c of one head for eight rows: int16 lanes 0..7 = block 2c of
// rows 0..7, lanes 8..15 = block 2c + 1 (still with the +12 offset).
inline __m256i chunk_sums(const __m256i* kbuf, int nch, int c, __m256i qlo, __m256i qhi) {
  __m256i v[8];
  for (int r = 0; r < 8; ++r) {
    const __m256i* k = kbuf + (r * nch + c) * 2;
    v[r] = _mm256_add_epi16(_mm256_maddubs_epi16(k[0], qlo), _mm256_maddubs_epi16(k[1], qhi));
  }
  const __m256i a0 = _mm256_hadd_epi16(v[0], v[1]), a1 = _mm256_hadd_epi16(v[2], v[3]);
  const __m256i a2 = _mm256_hadd_epi16(v[4], v[5]), a3 = _mm256_hadd_epi16(v[6], v[7]);
  return _mm256_hadd_epi16(_mm256_hadd_epi16(a0, a1), _mm256_hadd_epi16(a2, a3));
}

// block term: (sum - 12 * sum q) * 2^(qe - 129) * 2^(ke - 127), exact
inline __m256 block_term(__m128i sums16, int32_t corr, float qscale, __m256 kscale) {
  const __m256i d = _mm256_sub_epi32(_mm256_cvtepi16_epi32(sums16), _mm256_set1_epi32(corr));
  const __m256 s = _mm256_mul_ps(_mm256_set1_ps(qscale), kscale);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(d), s);
}

// score of eight rows t[0..8)
inline __m256 index_tile(const IndexQuery& q, const float* w, int IH, int ihd, const uint8_t* keys,
                         const uint8_t* key_scales, const int32_t* t) {
  const int nch = ihd / 64, nb = ihd / 32;
  __m256i kbuf[8 * (kIdxMaxHd / 64) * 2];
  __m256 ks[kIdxMaxHd / 32];
  decode_index_keys(keys, ihd, t, kbuf);
  index_key_scales(key_scales, nb, t, ks);
  __m256 acc = _mm256_setzero_ps();
  for (int h = 0; h < IH; ++h) {
    const int8_t* qh = q.q + size_t(h) * ihd;
    __m256 dot = _mm256_setzero_ps();
    for (int c = 0; c < nch; ++c) {
      const __m256i qlo = _mm256_load_si256(reinterpret_cast<const __m256i*>(qh + 64 * c));
      const __m256i qhi = _mm256_load_si256(reinterpret_cast<const __m256i*>(qh + 64 * c + 32));
      const __m256i s = chunk_sums(kbuf, nch, c, qlo, qhi);
      for (int half = 0; half < 2; ++half) {
        const int b = 2 * c + half;
        const __m128i s16 = half ? _mm256_extracti128_si256(s, 1) : _mm256_castsi256_si128(s);
        dot = _mm256_add_ps(dot, block_term(s16, q.corr[h * nb + b], q.scale[h * nb + b], ks[b]));
      }
    }
    // ref: sc = bf16(q.k); pr = bf16(relu(sc) * w); the relu keeps +0 for -0 (max returns its
    // second operand)
    const __m256 sc = _mm256_max_ps(bf16_round8(dot), _mm256_setzero_ps());
    acc = _mm256_add_ps(acc, bf16_round8(_mm256_mul_ps(sc, _mm256_set1_ps(w[h]))));
  }
  return bf16_round8(acc);
}

// ref: model.py Indexer.forward scores (kernel_table.h index_scores)
void index_scores(const int8_t* qc, const uint8_t* qe, const float* w, int IH, int ihd,
                  const uint8_t* keys, const uint8_t* key_scales, const int32_t* rows, int64_t n,
                  float* score) {
  if (IH < 1 || ihd % 128 != 0 || ihd > kIdxMaxHd || IH * ihd > kIdxMaxQ) {
    ref::index_scores(qc, qe, w, IH, ihd, keys, key_scales, rows, n, score);
    return;
  }
  IndexQuery q;
  index_query(qc, qe, IH, ihd, &q);
  for (int64_t i0 = 0; i0 < n; i0 += 8) {
    const int nr = n - i0 < 8 ? int(n - i0) : 8;
    alignas(32) int32_t t[8];
    for (int r = 0; r < 8; ++r) {  // a short last tile repeats its last row
      const int64_t i = i0 + (r < nr ? r : nr - 1);
      t[r] = rows ? rows[i] : int32_t(i);
    }
    const __m256 s = index_tile(q, w, IH, ihd, keys, key_scales, t);
    if (nr == 8) {
      _mm256_storeu_ps(score + i0, s);
    } else {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, s);
      for (int r = 0; r < nr; ++r) score[i0 + r] = tmp[r];
    }
  }
}

}  // namespace
}  // namespace cedar::kernels::fast
