// The GEMM families of the avx512bf16 table (kernel_table.h GemmKernels): bf16 dot products
// (VDPBF16PS) over the decoders of fast/dp512.h.
//
// Arithmetic, the same in every path so that a row's result never depends on what shares the
// call (batch invariance):
// * FP8/FP4/FP8W: per unit (two or four 32-blocks) and output, t = the unit's products summed by
//   VDPBF16PS from zero, vector by vector; then acc = fma(t, block scales, acc), unit by unit;
//   the output is hsum16(acc) (FP8/FP4 rounded to bf16). The activation scales are in the
//   prepared values (act_quant's q x s, exact in bf16).
// * BF16: acc[u % 2] = VDPBF16PS(acc[u % 2], x, w) over the 32-element units, then
//   hsum16(acc[0] + acc[1]).
// VDPBF16PS treats bf16 subnormals as zero and flushes subnormal sums (docs/NUMERICS.md "Fast
// kernels"): the decoded weights and act_quant's values are normal numbers, so only activations
// below 2^-126 (bf16/FP8W inputs) and sums below 2^-126 are affected.
//
// Memory: a decode step (up to kGemvRows activation rows) reads each weight row once, start to
// end, and moves to the next: row-sequential streams are what the hardware prefetcher follows
// at full speed (measured: interleaving two to four rows' streams halves the read rate), with a
// software prefetch a few KiB ahead that keeps the memory busy while a unit computes. More rows
// decode R weight rows into a panel once and run MR x R register tiles over it.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/fast/dp512.h"
#include "kernels/fast/gemm.h"
#include "kernels/fast/quant.h"
#include "kernels/kernel_table.h"

namespace cedar::kernels::fast {
namespace {

// A per-thread buffer for the decoded panel or a row group's scale vectors (grows, never
// shrinks; freed at thread exit).
inline float* dp_buffer(int which, size_t floats) {
  static thread_local PanelBuffer b[2];
  return b[which].get(floats);
}

// The formats: the decoder, where a row and its scales are, and the scale vectors of a row's
// units (RowScales: row(n) before the row's units, unit(u) for each).
// kGemvRows: up to this many activation rows a product streams the weight rows (gemv_dp), more
// share a panel. Measured (gemm_bench gemv_rows*, Zen 4): FP8 and FP4 at 4-8 rows decode each unit
// once into registers for all rows faster than a panel's stores and reloads (a batched decode
// step's share of a routed expert is usually this small); bf16 needs no decode, and its tiles
// reading the weight in place win from 4 rows on.
struct DpFp8 {
  using Dec = Fp8Dec;
  static constexpr bool kScaled = true;
  static constexpr int kPrefetch = 4096, kGemvRows = 8;
  static size_t row_bytes(int K) { return size_t(K); }
  // unit u of row n: its two blocks' scales (a 32-row group shares them); a missing second
  // block (K % 64 == 32) reads code 0
  static __m512 scales(const uint8_t* ws, int K, int n, int u) {
    const uint8_t* s = ws + size_t(n / 32) * size_t(K / 32) + size_t(2 * u);
    return Dec::scales(s[0], 2 * u + 1 < K / 32 ? s[1] : 0);
  }
  // a 32-row group shares its scales: the group's vectors are made once, when a row of a new
  // group starts
  struct RowScales {
    const uint8_t* ws;
    int K, group = -1;
    float* buf;
    RowScales(const uint8_t* ws_, int K_)
        : ws(ws_), K(K_), buf(dp_buffer(1, size_t((K_ + 63) / 64) * 16)) {}
    void row(int n) {
      if (n / 32 == group) return;
      group = n / 32;
      for (int u = 0; u < (K + 63) / 64; ++u) _mm512_storeu_ps(buf + 16 * u, scales(ws, K, n, u));
    }
    template <class Whole>
    __m512 unit(int u, Whole) const {
      return _mm512_loadu_ps(buf + 16 * u);
    }
  };
};
// The scale vectors of a format whose every row has its own scales, read with each unit:
// F::whole_scales for a whole unit (one load), F::scales for the row's short last one.
template <class F>
struct PerRowScales {
  const uint8_t* ws;
  int K, n = 0;
  PerRowScales(const uint8_t* ws_, int K_) : ws(ws_), K(K_) {}
  void row(int n_) { n = n_; }
  template <class Whole>
  __m512 unit(int u, Whole) const {
    if constexpr (Whole::value)
      return F::whole_scales(ws, K, n, u);
    else
      return F::scales(ws, K, n, u);
  }
};
struct DpFp4 {
  using Dec = Fp4Dec;
  static constexpr bool kScaled = true;
  static constexpr int kPrefetch = 4096, kGemvRows = 8;
  static size_t row_bytes(int K) { return size_t(K / 2); }
  static __m512 scales(const uint8_t* ws, int K, int n, int u) {
    const int nb = K / 32;
    return Dec::scales(ws + size_t(n) * size_t(nb) + size_t(4 * u), std::min(4, nb - 4 * u));
  }
  // a whole unit's four codes in one load
  static __m512 whole_scales(const uint8_t* ws, int K, int n, int u) {
    return Dec::scales4(ws + size_t(n) * size_t(K / 32) + size_t(4 * u));
  }
  using RowScales = PerRowScales<DpFp4>;
};
// FP4 weights stored as ggml MXFP4 blocks: DpFp4's words, scales and arithmetic (so its bits),
// read from the blocks, which hold the scale codes too (the `ws` the kernel gets is ignored).
struct DpMxfp4 {
  using Dec = Mxfp4Dec;
  static constexpr bool kScaled = true, kScalesInBlocks = true;
  static constexpr int kPrefetch = 4096, kGemvRows = 8;
  static size_t row_bytes(int K) { return size_t(K / 32) * 17; }
  static __m512 scales(const uint8_t* w, int K, int n, int u) {
    return Dec::scales_at(w + size_t(n) * row_bytes(K) + size_t(u) * Dec::kBytes,
                          std::min(4, K / 32 - 4 * u));
  }
  struct RowScales {
    const uint8_t* w;
    int K;
    const uint8_t* cur = nullptr;  // the current row
    RowScales(const uint8_t* w_, int K_) : w(w_), K(K_) {}
    void row(int n) { cur = w + size_t(n) * row_bytes(K); }
    template <class Whole>
    __m512 unit(int u, Whole) const {
      const uint8_t* p = cur + size_t(u) * Dec::kBytes;
      if constexpr (Whole::value)
        return Dec::scales4_at(p);
      else
        return Dec::scales_at(p, std::min(4, K / 32 - 4 * u));
    }
  };
};
// Q8B (numerics/q8b.h): sign-magnitude int8 codes, a bf16 scale per 32-block, every row its own
// scales [N, K/32] (read with each unit, as FP4's).
struct DpQ8b {
  using Dec = Q8bDec;
  static constexpr bool kScaled = true;
  static constexpr int kPrefetch = 4096, kGemvRows = 8;
  static size_t row_bytes(int K) { return size_t(K); }
  static __m512 scales(const uint8_t* ws, int K, int n, int u) {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(ws) + size_t(n) * size_t(K / 32);
    return Dec::scales(uint32_t(s[2 * u]) |
                       (2 * u + 1 < K / 32 ? uint32_t(s[2 * u + 1]) << 16 : 0));
  }
  // both blocks there: one 32-bit load
  static __m512 whole_scales(const uint8_t* ws, int K, int n, int u) {
    uint32_t pair;
    std::memcpy(&pair, ws + (size_t(n) * size_t(K / 32) + size_t(2 * u)) * 2, 4);
    return Dec::scales(pair);
  }
  using RowScales = PerRowScales<DpQ8b>;
};
// where a format's scale codes are: the scale tensor, or (kScalesInBlocks) the weight's blocks
template <class F>
const uint8_t* scale_source(const uint8_t* w, const uint8_t* ws) {
  if constexpr (requires { F::kScalesInBlocks; })
    return F::kScalesInBlocks ? w : ws;
  else
    return ws;
}
struct DpBf16 {
  using Dec = Bf16Dec;
  static constexpr bool kScaled = false;
  static constexpr int kPrefetch = 0, kGemvRows = 3;
  static size_t row_bytes(int K) { return size_t(K) * 2; }
  struct RowScales {
    RowScales(const uint8_t*, int) {}
    void row(int) {}
    template <class Whole>
    __m512 unit(int, Whole) const {
      return _mm512_setzero_ps();
    }
  };
};

template <class F>
int units(int K) {
  return (K + F::Dec::kUnit - 1) / F::Dec::kUnit;
}
// bytes of unit u of a row (the last may be short)
template <class F>
int unit_bytes(int K, int u) {
  const size_t rb = F::row_bytes(K);
  return int(std::min<size_t>(F::Dec::kBytes, rb - size_t(u) * F::Dec::kBytes));
}
// a prepared row: units x kUnit bf16 words (zeros past K), as floats
template <class F>
int dp_act_floats(int K) {
  return units<F>(K) * F::Dec::kUnit / 2;
}

// ---- prepare: bf16 activation words in the decoder's order ----

template <class F>
const int* dp_order() {
  static const auto o = [] {
    struct O {
      int e[F::Dec::kUnit];
    } r;
    for (int s = 0; s < F::Dec::kUnit; ++s) r.e[s] = F::Dec::element(s);
    return r;
  }();
  return o.e;
}

// x -> (FP8/FP4: act_quant's q x s) bf16 words, unit by unit in the decoder's order
template <class F, bool kQuant>
void prepare_dp(const float* x, int rows, int K, float* act) {
  constexpr int U = F::Dec::kUnit;
  const int* order = dp_order<F>();
  alignas(64) float v[U];
  alignas(64) uint16_t h[U];
  for (int m = 0; m < rows; ++m) {
    const float* xr = x + size_t(m) * K;
    uint16_t* a = reinterpret_cast<uint16_t*>(act + size_t(m) * dp_act_floats<F>(K));
    for (int u = 0; u < units<F>(K); ++u) {
      for (int b = 0; b < U / 32; ++b) {
        const int k = u * U + b * 32;
        if (k >= K) {
          std::memset(v + b * 32, 0, 32 * sizeof(float));
        } else if (kQuant) {
          act_quant_block(xr + k, nullptr, v + b * 32);
        } else {
          std::memcpy(v + b * 32, xr + k, 32 * sizeof(float));
        }
      }
      for (int b = 0; b < U / 32; ++b) store_bf16(h + b * 32, v + b * 32);
      for (int s = 0; s < U; ++s) a[u * U + s] = h[order[s]];
    }
  }
}

// ---- the decode step: weight rows one after another ----

inline __m512i load_words(const float* act, int word) {
  return _mm512_loadu_si512(reinterpret_cast<const uint16_t*>(act) + word);
}

template <int NA, int M>
inline __m512 sum_accs(const __m512 (&acc)[NA][M], int m) {
  return NA == 2 ? _mm512_add_ps(acc[0][m], acc[NA - 1][m]) : acc[0][m];
}

template <bool kRound>
inline void put_dp(float* out, __m512 acc) {
  const float v = hsum16(acc);
  *out = kRound ? bf16_round(v) : v;
}

// Up to 16 consecutive outputs' accumulators, reduced together when full (hsum16x16: the same
// bits as put_dp's hsum16 of each). A decode step's FP8/FP4 rows end every few units, and their
// scalar reduction tails cost (gemm_bench gemv_l2, 1 thread, Zen 4: FP4 20.9 -> 24.1 GB/s, FP8
// 29.7 -> 30.3).
template <bool kRound>
struct PendingSums {
  alignas(64) __m512 acc[16];
  int n = 0;
  float* out = nullptr;  // where acc[0]'s result goes
  void add(float* dst, __m512 a) {
    if (n == 0) out = dst;
    acc[n++] = a;
    if (n == 16) flush();
  }
  void flush() {
    if (n == 0) return;
    for (int i = n; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    __m512 s = hsum16x16(acc);
    if constexpr (kRound) {  // bf16_round lane by lane
      const __m512i u = _mm512_castps_si512(s);
      const __m512i odd = _mm512_and_si512(_mm512_mask_srli_epi32(u, __mmask16(0xffff), u, 16),
                                           _mm512_set1_epi32(1));
      const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd);
      s = _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(int(0xffff0000u))));
    }
    _mm512_mask_storeu_ps(out, __mmask16((1u << n) - 1), s);
    n = 0;
  }
};

// Unit u of M prepared rows against decoded weight vectors wv: scaled formats fold the unit's
// sum into acc[m] with the block scales s; bf16 adds into acc[m] directly.
template <class F, int M>
inline void unit_dp(const float* act, int lda, int u, const __m512i* wv, __m512 s, __m512* acc) {
  using D = typename F::Dec;
  CEDAR_UNROLL for (int m = 0; m < M; ++m) {
    const float* x = act + size_t(m) * lda;
    if constexpr (F::kScaled) {
      __m512 t = _mm512_setzero_ps();
      CEDAR_UNROLL for (int v = 0; v < D::kVecs; ++v) {
        t = dp(t, wv[v], load_words(x, u * D::kUnit + 32 * v));
      }
      acc[m] = _mm512_fmadd_ps(t, s, acc[m]);
    } else {
      acc[m] = dp(acc[m], wv[0], load_words(x, u * D::kUnit));
    }
  }
}

// Accumulators per output: bf16 units alternate between two (even units, odd units: one
// VDPBF16PS chain would wait on its latency), summed at the end; a scaled format's unit is long
// enough for one.
template <class F>
constexpr int kAccsDp = F::kScaled ? 1 : 2;

// The units of a row of width K through step(u, accumulator set, whole unit?), alternating the
// sets when there are two; the last unit may be short (FP8/FP4 only: a bf16 row is whole units,
// linear() sends K % 32 != 0 to the reference family).
template <class F, class Step, class A>
inline void each_unit(int K, Step&& step, A* acc) {
  const int whole = int(F::row_bytes(K) / F::Dec::kBytes), nu = units<F>(K);
  int u = 0;
  if constexpr (kAccsDp<F> == 2) {
    for (; u + 1 < whole; u += 2) {
      step(u, acc[0], std::true_type{});
      step(u + 1, acc[1], std::true_type{});
    }
  }
  for (; u < whole; ++u) step(u, acc[0], std::true_type{});  // (two sets: at most one left)
  if (u < nu) step(u, acc[0], std::false_type{});
}

// M (1..kGemvRows) activation rows against weight rows [n0, n1), one row at a time.
template <class F, int M, bool kRound>
void gemv_dp(const typename F::Dec& dec, const float* act, int lda, int K, const uint8_t* w,
             const uint8_t* ws, int n0, int n1, float* out, int ldo) {
  using D = typename F::Dec;
  const size_t rb = F::row_bytes(K);
  typename F::RowScales sc(ws, K);
  PendingSums<kRound> pend[M];
  for (int n = n0; n < n1; ++n) {
    const uint8_t* row = w + size_t(n) * rb;
    sc.row(n);
    constexpr int NA = kAccsDp<F>;
    __m512 acc[NA][M];
    CEDAR_UNROLL for (int a = 0; a < NA; ++a) {
      CEDAR_UNROLL for (int m = 0; m < M; ++m) acc[a][m] = _mm512_setzero_ps();
    }
    auto step = [&](int u, __m512* a, auto whole) {
      const uint8_t* p = row + size_t(u) * D::kBytes;
      if constexpr (F::kPrefetch > 0)
        _mm_prefetch(reinterpret_cast<const char*>(p + F::kPrefetch), _MM_HINT_T0);
      __m512i wv[D::kVecs];
      if constexpr (whole)
        dec.decode(p, wv);
      else
        dec.decode_tail(p, unit_bytes<F>(K, u), wv);
      unit_dp<F, M>(act, lda, u, wv, sc.unit(u, whole), a);
    };
    each_unit<F>(K, step, acc);
    CEDAR_UNROLL for (int m = 0; m < M; ++m) {
      float* o = out + size_t(m) * ldo + (n - n0);
      if constexpr (F::kScaled)
        pend[m].add(o, sum_accs<NA>(acc, m));
      else  // (bf16: measured a little slower batched; its rows are long)
        put_dp<kRound>(o, sum_accs<NA>(acc, m));
    }
  }
  for (auto& p : pend) p.flush();
}

// ---- more rows: a decoded panel and register tiles ----

// R weight rows as the register tiles read them: row r's unit u, vector v at
// words + r * row_stride + (u * kVecs + v) * 16 (floats), and (scaled formats) its scale vector
// at scales + (r * units + u) * 16. bf16 rows are their own words: the view points into the
// weight; the other formats are decoded into a per-thread buffer.
struct PanelView {
  const float* words;
  size_t row_stride;
  const float* scales;
  int nu;
  const float* vec(int r, int u, int v, int kVecs) const {
    return words + size_t(r) * row_stride + (size_t(u) * kVecs + v) * 16;
  }
  const float* scale(int r, int u) const { return scales + (size_t(r) * nu + u) * 16; }
};

template <class F>
size_t panel_floats(int K, int R) {
  return size_t(R) * size_t(units<F>(K)) * (F::Dec::kVecs + 1) * 16;
}

template <class F>
PanelView make_panel(const typename F::Dec& dec, int K, const uint8_t* w, const uint8_t* ws, int n,
                     int R, float* buf) {
  using D = typename F::Dec;
  const int nu = units<F>(K);
  if constexpr (!F::kScaled) {
    static_assert(D::kVecs == 1);
    return {reinterpret_cast<const float*>(w + size_t(n) * F::row_bytes(K)), F::row_bytes(K) / 4,
            nullptr, nu};
  } else {
    const PanelView pv{buf, size_t(nu) * D::kVecs * 16, buf + size_t(R) * nu * D::kVecs * 16, nu};
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = w + size_t(n + r) * F::row_bytes(K);
      for (int u = 0; u < nu; ++u) {
        __m512i wv[D::kVecs];
        dec.decode_tail(row + size_t(u) * D::kBytes, unit_bytes<F>(K, u), wv);
        for (int v = 0; v < D::kVecs; ++v)
          _mm512_storeu_si512(const_cast<float*>(pv.vec(r, u, v, D::kVecs)), wv[v]);
        _mm512_storeu_ps(const_cast<float*>(pv.scale(r, u)), F::scales(ws, K, n + r, u));
      }
    }
    return pv;
  }
}

// MR activation rows x R panel rows; the same operations per output as gemv_dp
template <class F, int MR, int R>
inline void tile_unit(const float* act, int lda, const PanelView& pv, int u, __m512 (&acc)[R][MR]) {
  using D = typename F::Dec;
  if constexpr (F::kScaled) {
    __m512 t[R][MR];
    CEDAR_UNROLL for (int r = 0; r < R; ++r) {
      CEDAR_UNROLL for (int i = 0; i < MR; ++i) t[r][i] = _mm512_setzero_ps();
    }
    CEDAR_UNROLL for (int v = 0; v < D::kVecs; ++v) {
      __m512i x[MR];
      CEDAR_UNROLL for (int i = 0; i < MR; ++i) {
        x[i] = load_words(act + size_t(i) * lda, u * D::kUnit + 32 * v);
      }
      CEDAR_UNROLL for (int r = 0; r < R; ++r) {
        const __m512i wv = _mm512_loadu_si512(pv.vec(r, u, v, D::kVecs));
        CEDAR_UNROLL for (int i = 0; i < MR; ++i) t[r][i] = dp(t[r][i], wv, x[i]);
      }
    }
    CEDAR_UNROLL for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_loadu_ps(pv.scale(r, u));
      CEDAR_UNROLL for (int i = 0; i < MR; ++i) acc[r][i] = _mm512_fmadd_ps(t[r][i], s, acc[r][i]);
    }
  } else {
    __m512i x[MR];
    CEDAR_UNROLL for (int i = 0; i < MR; ++i) x[i] = load_words(act + size_t(i) * lda, u * 32);
    CEDAR_UNROLL for (int r = 0; r < R; ++r) {
      const __m512i wv = _mm512_loadu_si512(pv.vec(r, u, 0, 1));
      CEDAR_UNROLL for (int i = 0; i < MR; ++i) acc[r][i] = dp(acc[r][i], wv, x[i]);
    }
  }
}

template <class F, int MR, int R, bool kRound>
void tile_dp(const float* act, int lda, int K, const PanelView& pv, float* out, int ldo) {
  constexpr int NA = kAccsDp<F>;
  __m512 acc[NA][R][MR];
  CEDAR_UNROLL for (int a = 0; a < NA; ++a) {
    CEDAR_UNROLL for (int r = 0; r < R; ++r) {
      CEDAR_UNROLL for (int i = 0; i < MR; ++i) acc[a][r][i] = _mm512_setzero_ps();
    }
  }
  auto step = [&](int u, __m512(&a)[R][MR], auto) { tile_unit<F, MR, R>(act, lda, pv, u, a); };
  each_unit<F>(K, step, acc);
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < R; ++r) {
      __m512 sum = acc[0][r][i];
      if constexpr (NA == 2) sum = _mm512_add_ps(sum, acc[1][r][i]);
      put_dp<kRound>(out + size_t(i) * ldo + r, sum);
    }
}

template <class F, int MR, int R, bool kRound>
void panel_rows_dp(const float* act, int lda, int M, int K, const PanelView& pv, float* out,
                   int ldo) {
  int m = 0;
  for (; m + MR <= M; m += MR)
    tile_dp<F, MR, R, kRound>(act + size_t(m) * lda, lda, K, pv, out + size_t(m) * ldo, ldo);
  if constexpr (MR > 1) {
    if (m < M)
      panel_rows_dp<F, MR - 1, R, kRound>(act + size_t(m) * lda, lda, M - m, K, pv,
                                          out + size_t(m) * ldo, ldo);
  }
}

// Register tiles: MR x R outputs, each an accumulator and (scaled formats) a unit sum, plus MR
// activation vectors and a weight vector within the 32 registers.
constexpr int kTileR = 3, kTileMR = 4;
// Up to this many activation rows a product streams the weight rows (gemv_dp).

template <class F>
const typename F::Dec& decoder() {
  static const typename F::Dec d;
  return d;
}

// gemv_dp for a run-time row count 1..kMax
template <class F, bool kRound, int kMax>
void gemv_rows(const typename F::Dec& dec, const float* act, int lda, int M, int K,
               const uint8_t* w, const uint8_t* ws, int n0, int n1, float* out, int ldo) {
  if (M == kMax)
    gemv_dp<F, kMax, kRound>(dec, act, lda, K, w, ws, n0, n1, out, ldo);
  else if constexpr (kMax > 1)
    gemv_rows<F, kRound, kMax - 1>(dec, act, lda, M, K, w, ws, n0, n1, out, ldo);
}

template <class F, bool kRound>
void gemm_dp(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
             float* out, int ldo) {
  const auto& dec = decoder<F>();
  const int lda = dp_act_floats<F>(K);
  ws = scale_source<F>(w, ws);
  if (M <= F::kGemvRows) {
    gemv_rows<F, kRound, F::kGemvRows>(dec, act, lda, M, K, w, ws, n0, n1, out, ldo);
    return;
  }
  constexpr int R = kTileR;
  float* buf = F::kScaled ? dp_buffer(0, panel_floats<F>(K, R)) : nullptr;
  int n = n0;
  for (; n + R <= n1; n += R) {
    const PanelView pv = make_panel<F>(dec, K, w, ws, n, R, buf);
    panel_rows_dp<F, kTileMR, R, kRound>(act, lda, M, K, pv, out + (n - n0), ldo);
  }
  for (; n < n1; ++n) {
    const PanelView pv = make_panel<F>(dec, K, w, ws, n, 1, buf);
    panel_rows_dp<F, kTileMR, 1, kRound>(act, lda, M, K, pv, out + (n - n0), ldo);
  }
}

GemmKernels fp8_family_dp() {
  return {dp_act_floats<DpFp8>, prepare_dp<DpFp8, true>, gemm_dp<DpFp8, true>, 4};
}
GemmKernels fp4_family_dp() {
  return {dp_act_floats<DpFp4>, prepare_dp<DpFp4, true>, gemm_dp<DpFp4, true>, 4};
}
// DpFp4's activations, DpMxfp4's weights
GemmKernels mxfp4_family_dp() {
  return {dp_act_floats<DpFp4>, prepare_dp<DpFp4, true>, gemm_dp<DpMxfp4, true>, 4};
}
GemmKernels bf16_family_dp() {
  return {dp_act_floats<DpBf16>, prepare_dp<DpBf16, false>, gemm_dp<DpBf16, false>, 4};
}
// Q8B storage (a requantized bf16 weight), plain bf16 activations, fp32 out
GemmKernels q8b_family_dp() {
  return {dp_act_floats<DpQ8b>, prepare_dp<DpQ8b, false>, gemm_dp<DpQ8b, false>, 4};
}
// FP8 storage, plain bf16 activations (no act_quant), fp32 out
GemmKernels fp8w_family_dp() {
  return {dp_act_floats<DpFp8>, prepare_dp<DpFp8, false>, gemm_dp<DpFp8, false>, 4};
}

}  // namespace
}  // namespace cedar::kernels::fast
