// The avx512bf16 table's families for GGUF block weights computed in place (every ggml block
// type): the weight's codes become bf16 words in registers (blocks_dp_decoders.h: nibble/bit
// planes through VPERMW/VPERMI2W tables, int8 through fp32, IQ grids through table lookups or
// gathers) and VDPBF16PS multiplies them with the bf16 activations, 32 pairs per instruction;
// the blocks' scales multiply the lanes afterwards. No decoded buffer (docs/KERNELS.md "GGUF
// block families").
//
// Arithmetic (every output the same operations whatever M, so results are batch-invariant):
// the activation row is act_quant'ed (q x s, exact in bf16) and stored as bf16 words in each
// format's element order (element(): the order its decoder's shifts and shuffles give, 64 words
// per unit of two vectors), then the fp32 sum of every 16 values in K order (summed in double,
// rounded once). Per unit and output, into two fp32 lane accumulators:
// * one scale per 32 values in lane halves (Q8_0, Q4_0, Q5_0, Q5_K): t = VDPBF16PS(VDPBF16PS(0,
//   w0, x0), w1, x1), acc[c % 2] = fma(t, [dl_a x8 | dl_b x8], acc[c % 2]) (c: the unit in its
//   block);
// * one scale per 16 values (Q2_K: both vectors share lane groups of four; Q3_K, Q6_K: each
//   vector its own lane scales and accumulator) likewise, one VDPBF16PS sum per scale vector;
// * Q4_K (kBlockScales): every vector of a block has the same lane-to-sub-block map, so its low-
//   and high-nibble vectors each feed one VDPBF16PS chain from zero over the whole block, and
//   the block's two scale vectors multiply the chains into acc[0] and acc[1] at its end.
// Formats with a min (value = dl q - ml: Q2_K, Q4_K, Q5_K) add each block's sixteen negated
// 16-value mins times the activation's 16-value sums into acc[0] at the block's end (one FMA).
// The output is bf16(hsum16(acc[0] + acc[1])), sixteen consecutive outputs reduced at once
// (PendingSums, the same bits). Every product of a code and an activation is exact; the fp32
// sums differ from the reference's exact 32-value sums as the FP8 family's do.
//
// Rows whose width is not a multiple of 64 take the buffer family (gemm_blocks.h) for every M.
// Included only by the avx512bf16 table's translation unit, inside an anonymous namespace.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/fast/blocks_dp_decoders.h"
#include "kernels/fast/dp512.h"
#include "kernels/fast/gemm_blocks.h"
#include "kernels/fast/gemm_dp.h"
#include "kernels/fast/vec512.h"
#include "kernels/ggml_blocks.h"

namespace cedar::kernels::fast {
namespace {

// ---- activations: K bf16 words, block by block in the format's element order, then the fp32
// sum of every 16 values in K order ----

// K-quant rows not of whole blocks cannot be stored; the buffer family takes any other odd width
template <class D>
bool kq_whole(int K) {
  return K % 64 == 0 && K % D::kElems == 0;
}
template <class D>
int kq_act_floats(int K) {
  return kq_whole<D>(K) ? K / 2 + K / 16 : act_floats_blocks(K);
}

template <class D>
const int* kq_order() {
  static const auto o = [] {
    struct O {
      int e[D::kElems];
    } r;
    for (int s = 0; s < D::kElems; ++s) r.e[s] = D::element(s);
    return r;
  }();
  return o.e;
}

template <class D>
void prepare_kq(const float* x, int rows, int K, float* act) {
  if (!kq_whole<D>(K)) return prepare_blocks(x, rows, K, act);
  constexpr int E = D::kElems;
  const int lda = kq_act_floats<D>(K);
  const int* order = kq_order<D>();
  alignas(64) float v[E];
  alignas(64) uint16_t h[E];
  for (int m = 0; m < rows; ++m) {
    const float* xr = x + size_t(m) * K;
    uint16_t* words = reinterpret_cast<uint16_t*>(act + size_t(m) * lda);
    float* sums = act + size_t(m) * lda + K / 2;
    for (int b = 0; b < K / E; ++b) {
      for (int k = 0; k < E; k += 32) {
        act_quant_block(xr + E * b + k, nullptr, v + k);
        store_bf16(h + k, v + k);
      }
      for (int g = 0; g < E / 16; ++g) {
        double sum = 0;  // (rounded once)
        for (int i = 0; i < 16; ++i) sum += v[16 * g + i];
        sums[(E / 16) * b + g] = float(sum);
      }
      for (int slot = 0; slot < E; ++slot) words[E * b + slot] = h[order[slot]];
    }
  }
}

// A weight row as the products consume it: each(f, g) calls f(u, c, w, s) for every 64-word unit
// u in K order (c: its index in its block) and g(b, s0, s1, mins) after block b (kBlockScales:
// the block's two scale vectors; kMins: its groups' negated mins) -- decoded in registers
// (RegisterUnits) or read back from a panel the row was decoded into once (PanelUnits). The same
// values either way, so the same results.
template <class D>
struct RegisterUnits {
  const D& dec;
  const uint8_t* row;
  int K;
  template <class F, class G>
  void each(F&& f, G&& g) const {
    const uint8_t* ahead = row + kBlockPrefetch;
    for (int b = 0; b < K / D::kElems; ++b) {
      const uint8_t* bp = row + size_t(b) * D::kBytes;
      prefetch_lines(ahead, bp + kBlockPrefetch + D::kBytes);
      const typename D::Header h = dec.header(bp);
      CEDAR_UNROLL for (int c = 0; c < D::kElems / 64; ++c) {
        __m512i w[2];
        __m512 s[2];
        dec.unit(bp, h, c, w, s);
        f((b * D::kElems) / 64 + c, c, w, s);
      }
      if constexpr (D::kBlockScales || D::kMins) {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, mins = s0;
        if constexpr (D::kBlockScales) s0 = h.scale0, s1 = h.scale1;
        if constexpr (D::kMins) mins = h.mins;
        g(b, s0, s1, mins);
      }
    }
  }
};

// Per unit: two word vectors, then (unless kBlockScales) two scale vectors, 16 floats each; per
// block, after its units: kBlockScales' two scale vectors, then kMins' mins.
template <class D>
struct PanelLayout {
  static constexpr int kUnit = D::kBlockScales ? 32 : 64, kUnits = D::kElems / 64;
  static constexpr int kTail = kUnits * kUnit,
                       kBlock = kTail + (D::kBlockScales ? 32 : 0) + (D::kMins ? 16 : 0);
};
template <class D>
struct PanelUnits {
  using P = PanelLayout<D>;
  const float* panel;
  int K;
  // decodes `row` into `panel` (K / kElems blocks of P::kBlock floats)
  static void fill(const D& dec, const uint8_t* row, int K, float* panel) {
    RegisterUnits<D>{dec, row, K}.each(
        [&](int u, int, const __m512i* w, const __m512* s) {
          float* p = panel + size_t(u / P::kUnits) * P::kBlock + (u % P::kUnits) * P::kUnit;
          _mm512_storeu_si512(p, w[0]);
          _mm512_storeu_si512(p + 16, w[1]);
          if constexpr (!D::kBlockScales) {
            _mm512_storeu_ps(p + 32, s[0]);
            _mm512_storeu_ps(p + 48, D::kOneScale ? s[0] : s[1]);
          }
        },
        [&](int b, __m512 s0, __m512 s1, __m512 mins) {
          float* p = panel + size_t(b) * P::kBlock + P::kTail;
          if constexpr (D::kBlockScales) {
            _mm512_storeu_ps(p, s0);
            _mm512_storeu_ps(p + 16, s1);
            p += 32;
          }
          if constexpr (D::kMins) _mm512_storeu_ps(p, mins);
        });
  }
  template <class F, class G>
  void each(F&& f, G&& g) const {
    for (int b = 0; b < K / D::kElems; ++b) {
      const float* pb = panel + size_t(b) * P::kBlock;
      CEDAR_UNROLL for (int c = 0; c < P::kUnits; ++c) {
        const float* p = pb + c * P::kUnit;
        const __m512i w[2] = {_mm512_loadu_si512(p), _mm512_loadu_si512(p + 16)};
        __m512 s[2];
        if constexpr (!D::kBlockScales)
          s[0] = _mm512_loadu_ps(p + 32), s[1] = _mm512_loadu_ps(p + 48);
        f(b * P::kUnits + c, c, w, s);
      }
      if constexpr (D::kBlockScales || D::kMins) {
        const float* p = pb + P::kTail;
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, mins = s0;
        if constexpr (D::kBlockScales) {
          s0 = _mm512_loadu_ps(p);
          s1 = _mm512_loadu_ps(p + 16);
          p += 32;
        }
        if constexpr (D::kMins) mins = _mm512_loadu_ps(p);
        g(b, s0, s1, mins);
      }
    }
  }
};

// MR activation rows against one weight row's units. Per row two lane accumulators: kOneScale,
// a block's units alternate between them; else each vector of a unit has its own; kBlockScales,
// each vector's products go into its own per-block sum (VDPBF16PS chains from zero), which the
// block's scale vector multiplies into the first at the block's end. The negated mins times the
// activation's 16-value sums go into the first accumulator at each block's end. put(m, v)
// receives row m's acc0 + acc1, whose hsum16 rounded to bf16 is the output.
template <class D, int MR, class Units, class Put>
void kq_rows(const Units& units, const float* act, int lda, int K, Put&& put) {
  const float* sums = act + K / 2;
  __m512 acc[MR][2], t[MR][2];  // (t: kBlockScales' per-block sums)
  CEDAR_UNROLL for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = t[m][0] = t[m][1] =
      _mm512_setzero_ps();
  units.each(
      [&](int u, int c, const __m512i* w, const __m512* s) {
        CEDAR_UNROLL for (int m = 0; m < MR; ++m) {
          const float* x = act + size_t(m) * lda;
          const __m512i x0 = load_words(x, 64 * u), x1 = load_words(x, 64 * u + 32);
          const __m512 z = _mm512_setzero_ps();
          if constexpr (D::kBlockScales) {
            t[m][0] = dp(t[m][0], w[0], x0);
            t[m][1] = dp(t[m][1], w[1], x1);
          } else if constexpr (D::kOneScale) {
            acc[m][c % 2] = _mm512_fmadd_ps(dp(dp(z, w[0], x0), w[1], x1), s[0], acc[m][c % 2]);
          } else {
            acc[m][0] = _mm512_fmadd_ps(dp(z, w[0], x0), s[0], acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(dp(z, w[1], x1), s[1], acc[m][1]);
          }
        }
      },
      [&](int b, __m512 s0, __m512 s1, __m512 mins) {
        CEDAR_UNROLL for (int m = 0; m < MR; ++m) {
          if constexpr (D::kBlockScales) {
            acc[m][0] = _mm512_fmadd_ps(t[m][0], s0, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(t[m][1], s1, acc[m][1]);
            t[m][0] = t[m][1] = _mm512_setzero_ps();
          }
          if constexpr (D::kMins)
            acc[m][0] =
                _mm512_fmadd_ps(mins, _mm512_loadu_ps(sums + size_t(m) * lda + 16 * b), acc[m][0]);
        }
      });
  CEDAR_UNROLL for (int m = 0; m < MR; ++m) put(m, _mm512_add_ps(acc[m][0], acc[m][1]));
}

template <class D, int MR, class Units, class Put>
void kq_rows_upto(const Units& units, int M, const float* act, int lda, int K, Put&& put) {
  if (M == MR)
    kq_rows<D, MR>(units, act, lda, K, put);
  else if constexpr (MR > 1)
    kq_rows_upto<D, MR - 1>(units, M, act, lda, K, put);
}

// Up to kRows activation rows: each weight row decoded in registers as it streams by (a decode
// step). More: each weight row decoded once into a panel, then read back per kRows rows.
template <class D>
void gemm_kq(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
             float* out, int ldo) {
  if (!kq_whole<D>(K)) return gemm_blocks<V16, D::kType>(act, M, K, w, ws, n0, n1, out, ldo);
  constexpr int kRows = 8;
  static const D dec;
  const int lda = kq_act_floats<D>(K);
  const size_t rb = size_t(K / D::kElems) * D::kBytes;
  if (M <= kRows) {
    // consecutive outputs reduced sixteen at a time (PendingSums: the same bits as put_dp)
    PendingSums<true> pend[kRows];
    for (int n = n0; n < n1; ++n) {
      float* o = out + size_t(n - n0);
      kq_rows_upto<D, kRows>(RegisterUnits<D>{dec, w + size_t(n) * rb, K}, M, act, lda, K,
                             [&](int m, __m512 v) { pend[m].add(o + size_t(m) * ldo, v); });
    }
    for (int m = 0; m < M; ++m) pend[m].flush();
    return;
  }
  float* panel = dp_buffer(0, size_t(K / D::kElems) * PanelLayout<D>::kBlock);
  for (int n = n0; n < n1; ++n) {
    PanelUnits<D>::fill(dec, w + size_t(n) * rb, K, panel);
    const PanelUnits<D> units{panel, K};
    for (int m0 = 0; m0 < M; m0 += kRows) {
      float* o = out + size_t(m0) * ldo + size_t(n - n0);
      kq_rows_upto<D, kRows>(units, M - m0 < kRows ? M - m0 : kRows, act + size_t(m0) * lda, lda, K,
                             [&](int m, __m512 v) { put_dp<true>(o + size_t(m) * ldo, v); });
    }
  }
}

template <class D>
GemmKernels kq_family() {
  return {kq_act_floats<D>, prepare_kq<D>, gemm_kq<D>, 1};
}

// The formats with a register family here, over fill_block_families' buffer families.
void fill_block_families_dp(KernelTable& k) {
  fill_block_families<V16>(k);
  k.gemm[int(WeightFormat::kQ8_0)] = kq_family<KqQ8_0>();
  k.gemm[int(WeightFormat::kQ4_0)] = kq_family<KqQ45_0<false>>();
  k.gemm[int(WeightFormat::kQ5_0)] = kq_family<KqQ45_0<true>>();
  k.gemm[int(WeightFormat::kQ2_K)] = kq_family<KqQ2_K>();
  k.gemm[int(WeightFormat::kQ3_K)] = kq_family<KqQ3_K>();
  k.gemm[int(WeightFormat::kQ4_K)] = kq_family<KqQ4_K>();
  k.gemm[int(WeightFormat::kQ5_K)] = kq_family<KqQ5_K>();
  k.gemm[int(WeightFormat::kQ6_K)] = kq_family<KqQ6_K>();
  k.gemm[int(WeightFormat::kIQ2_XXS)] = kq_family<KqIQ2_XXS>();
  k.gemm[int(WeightFormat::kIQ1_S)] = kq_family<KqIQ1_S>();
  k.gemm[int(WeightFormat::kIQ1_M)] = kq_family<KqIQ1_M>();
}

}  // namespace
}  // namespace cedar::kernels::fast
