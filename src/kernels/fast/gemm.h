// The fast GEMM families (kernel_table.h GemmKernels) over a vector layer V (V8 or V16), for the
// four weight formats.
//
// Every output (m, n) is a dot product with its lanes along K: acc = fma(x[k..k+N), w[k..k+N),
// acc) over the K vectors in order -- vector t into accumulator t % kAccs (one, or two for FP4),
// added in order at the end -- then V::hsum's fixed tree. Decode steps (up to kGemvRowsMax rows)
// decode each weight unit into registers as they stream; more rows share a panel of weight rows
// decoded once into fp32 and run register tiles of MR rows x R columns over it. Both do the same
// FMAs in the same order on the same values, so a row's result does not depend on how many rows
// share the call (or on the thread split): batch invariance.
//
// Weight values are decoded exactly (E4M3 bit patterns x 2^120 x scale, or the scale moved onto
// the activations; E2M1 x scale from scaled bf16 tables; bf16; fp32) in the decoders' lane
// order; activation rows are stored in that order by prepare(), which for the FP8/FP4 families
// is the bit-exact act_quant followed by the dequantized values q * s (exact). So the fast tables
// differ from the reference only in the order and rounding of the sums.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/fast/quant.h"
#include "kernels/kernel_table.h"

// Register tiles are arrays indexed by constant loops: they stay in registers only when the
// loops are unrolled completely.
#define CEDAR_UNROLL _Pragma("GCC unroll 16")
// A block decoder's helpers are called once per block in the hottest loops: GCC's inliner gives up
// on them inside the large unrolled row loops, and a call there costs more than the helper.
#define CEDAR_ALWAYS_INLINE inline __attribute__((always_inline))

namespace cedar::kernels::fast {
namespace {

// UE8M0 code -> 2^(c - 127), a compile-time table (the decoders broadcast from it: no scalar work)
struct E8m0Table {
  float v[256];
  constexpr E8m0Table() : v() {
    for (int c = 0; c < 256; ++c)
      v[c] = __builtin_bit_cast(float, c == 0 ? 0x00400000u : uint32_t(c) << 23);
  }
};
constexpr E8m0Table kE8m0{};
inline float e8m0(uint8_t c) { return kE8m0.v[c]; }
// UE8M0 code -> 2^(c - 127) x 2^120, for codes up to kMaxCode (past it the product is no fp32:
// +inf, which fails every range check that multiplies by it)
struct E8m0x120Table {
  static constexpr int kMaxCode = 134;
  float v[256];
  constexpr E8m0x120Table() : v() {
    for (int c = 0; c < 256; ++c)
      v[c] = c == 0          ? 0x1p-7f
             : c <= kMaxCode ? __builtin_bit_cast(float, uint32_t(c + 120) << 23)
                             : __builtin_bit_cast(float, 0x7f800000u);
  }
};
constexpr E8m0x120Table kE8m0x120{};

// Per UE8M0 scale code: the bf16 of each E2M1 code's value times the scale (exact: at most two
// significant bits), as 16 high bytes then 16 low bytes -- the tables of V::dec_e2m1_pair
struct E2m1ScaledTable {
  uint8_t t[256][32];
  constexpr E2m1ScaledTable() : t() {
    constexpr float kValue[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    for (int c = 0; c < 256; ++c)
      for (int i = 0; i < 16; ++i) {
        // in double (no overflow to trap the constant evaluation); code 255 is UE8M0's NaN
        const double v = c == 255 ? 0.0 : double(kValue[i]) * double(kE8m0.v[c]);
        const uint32_t b = c == 255 ? 0x7fc00000u
                           : v > 0x1.fffffep127 || v < -0x1.fffffep127
                               ? (v < 0 ? 0xff800000u : 0x7f800000u)
                               : __builtin_bit_cast(uint32_t, float(v));
        t[c][i] = uint8_t(b >> 24);
        t[c][16 + i] = uint8_t(b >> 16);
      }
  }
};
constexpr E2m1ScaledTable kE2m1{};

inline float bf16_round(float f) {  // round to nearest even bf16 (inputs are finite)
  uint32_t u = f32_bits(f);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return bits_f32(u);
}

// The weight formats. Each decodes one unit (kUnit elements along K of weight row n: 32, or
// two blocks for FP4) into exact, scaled fp32 values in V's lane order (unit()), and knows how
// its prepared activation rows are laid out: act_floats(K) floats per row, the first
// panel_len(K) of them the values in the decoders' order (padded with zeros to whole units).
// kAccs: accumulators per output, vector t of a row going to accumulator t % kAccs (summed in
// order at the end) -- the same in the decode step and the panel path. kGemvRows: weight rows
// per decode-step tile. FP4 takes two of each: its decode is long enough that one chain per
// row leaves the decode step waiting on FMA latency.
template <class V>
struct Fp8Rows {
  static constexpr int kUnit = 32, kAccs = 1, kGemvRows = 4;
  // the values, then each block's max |x| (the GEMV's range check, gemv_fp8_tile)
  static int act_floats(int K) { return K + K / 32; }
  static int panel_len(int K) { return K; }
  static void unit(const uint8_t* w, const uint8_t* ws, int K, int n, int u, typename V::F* out) {
    V::dec_e4m3_bits(w + size_t(n) * size_t(K) + size_t(u) * 32, out);  // value x 2^-120
    // x the UE8M0 block scale (per 32 rows x 32 columns) and 2^120: one exact multiply while
    // 2^(c - 7) is an fp32, two past it
    const uint8_t c = ws[size_t(n / 32) * size_t(K / 32) + size_t(u)];
    const typename V::F s = V::set1(kE8m0x120.v[c]);
    CEDAR_UNROLL for (int j = 0; j < V::kBlockVecs; ++j) {
      out[j] = c <= E8m0x120Table::kMaxCode
                   ? V::mul(out[j], s)
                   : V::mul(V::mul(out[j], V::set1(0x1p120f)), V::set1(e8m0(c)));
    }
  }
};
// kMx: the weight is ggml MXFP4 blocks (WeightFormat::kMXFP4: 17 bytes per 32-block, the scale
// code first, element i < 16 in the low nibble of byte i + 1, i + 16 in its high nibble), turned
// into the release's pair bytes per unit before the same decode: the same values in the same
// lanes, so the same bits as the release's layout.
template <class V, bool kMx = false>
struct Fp4Rows {
  static constexpr int kUnit = 64, kAccs = 2, kGemvRows = 2;
  static int act_floats(int K) { return (K + 63) / 64 * 64; }
  static int panel_len(int K) { return act_floats(K); }
  // where unit u of row n starts (the decode step prefetches ahead by it)
  static size_t unit_offset(int K, int n, int u) {
    return kMx ? (size_t(n) * size_t(K / 32) + size_t(2 * u)) * 17
               : (size_t(n) * size_t(K) + size_t(u) * 64) / 2;
  }
  static void unit(const uint8_t* w, const uint8_t* ws, int K, int n, int u, typename V::F* out) {
    const Src c(w, ws, K, n, u);
    V::dec_e2m1_pair(c.p, c.pair, c.t0, c.t1, out);
  }
  // acc[0..1] + unit u of row n . x[0, 64), the even vectors to acc[0], the odd to acc[1]
  static void fma_unit(const uint8_t* w, const uint8_t* ws, int K, int n, int u, const float* x,
                       typename V::F* acc) {
    const Src c(w, ws, K, n, u);
    V::fma_e2m1_pair(c.p, c.pair, c.t0, c.t1, x, acc);
  }

 private:
  // unit u of row n: its bytes, whether its second block exists, the blocks' scaled tables
  struct Src {
    alignas(32) uint8_t pairs[kMx ? 32 : 1];  // kMx: the unit as the release's pair bytes
    const uint8_t *p, *t0, *t1;
    bool pair;
    Src(const uint8_t* w, const uint8_t* ws, int K, int n, int u) {
      const int nb = K / 32, b = 2 * u;
      pair = b + 1 < nb;
      if constexpr (kMx) {
        const uint8_t* blk = w + unit_offset(K, n, u);
        mx_pairs(blk, pair, pairs);
        p = pairs;
        t0 = kE2m1.t[blk[0]];
        t1 = kE2m1.t[pair ? blk[17] : 0];
      } else {
        const uint8_t* sc = ws + size_t(n) * size_t(nb) + size_t(b);
        p = w + unit_offset(K, n, u);
        t0 = kE2m1.t[sc[0]];
        t1 = kE2m1.t[pair ? sc[1] : 0];
      }
    }
    Src(const Src&) = delete;  // p may point into the object itself
  };
  // One or two MXFP4 blocks -> the release's 16 pair bytes each (byte j: element 2j in the low
  // nibble, 2j + 1 in the high one): the nibbles of each half as bytes, pairs joined by a
  // multiply-add (lo + 16 hi), the halves packed back to bytes. AVX2 (every fast table has it).
  static void mx_pairs(const uint8_t* blk, bool pair, uint8_t* out) {
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 1));
    const __m128i b1 =
        pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18)) : _mm_setzero_si128();
    const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(b0), b1, 1);
    const __m256i nib = _mm256_set1_epi8(0x0F), join = _mm256_set1_epi16(0x1001);
    const __m256i first = _mm256_maddubs_epi16(_mm256_and_si256(q, nib), join);  // elements 0-15
    const __m256i second =
        _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), nib), join);  // 16-31
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm256_packus_epi16(first, second));
  }
};
template <class R>
constexpr bool kIsFp4Rows = false;
template <class V, bool kMx>
constexpr bool kIsFp4Rows<Fp4Rows<V, kMx>> = true;

// kFP8W: FP8 storage in a bf16-weight product (no act_quant): Fp8Rows' exact decode, plain
// activation rows. (Exact w * s equals the reference's bf16 copy for any scale above 2^-124.)
template <class V>
struct Fp8WRows {
  static constexpr int kUnit = 32, kAccs = 1, kGemvRows = 4, kElemBytes = 1;
  static int act_floats(int K) { return K; }
  static int panel_len(int K) { return K; }
  static void unit(const uint8_t* w, const uint8_t* ws, int K, int n, int u, typename V::F* out) {
    Fp8Rows<V>::unit(w, ws, K, n, u, out);
  }
};
template <class V>
struct Bf16Rows {
  // (AVX-512: one row at a time -- its unit is two FMAs -- since row-sequential streams read the
  // head's 2 KiB rows from DRAM almost twice as fast as four interleaved ones on Zen 4; AVX2's
  // unit is a chain of four FMAs, which four rows' chains hide)
  static constexpr int kUnit = 32, kAccs = 1, kGemvRows = V::N == 16 ? 1 : 4, kElemBytes = 2;
  static int act_floats(int K) { return K; }
  static int panel_len(int K) { return K; }
  static void unit(const uint8_t* w, const uint8_t*, int K, int n, int u, typename V::F* out) {
    V::dec_bf16(reinterpret_cast<const uint16_t*>(w) + size_t(n) * size_t(K) + size_t(u) * 32, out);
  }
};

// kQ8B: a requantized bf16 weight (numerics/q8b.h), decoded in element order to q x s (exact),
// in the bf16-weight product (plain activation rows, fp32 out); row by row as Bf16Rows.
template <class V>
struct Q8bRows {
  static constexpr int kUnit = 32, kAccs = 1, kGemvRows = Bf16Rows<V>::kGemvRows, kElemBytes = 1;
  static int act_floats(int K) { return K; }
  static int panel_len(int K) { return K; }
  static void unit(const uint8_t* w, const uint8_t* ws, int K, int n, int u, typename V::F* out) {
    uint16_t s;
    std::memcpy(&s, ws + (size_t(n) * size_t(K / 32) + size_t(u)) * 2, 2);
    V::dec_q8b(w + size_t(n) * size_t(K) + size_t(u) * 32,
               __builtin_bit_cast(float, uint32_t(s) << 16), out);
  }
};

// The decoders' lane order: order[i] = which element of a unit lands in slot i of the decoded
// vectors, found by decoding synthetic units whose elements all decode differently.
template <class V>
struct BlockOrder {
  int fp8[32] = {}, fp4[64] = {}, bf16[32] = {};
  BlockOrder() {
    alignas(64) float out[64];
    typename V::F vec[64 / V::N];
    auto spill = [&](int n) {
      for (int j = 0; j < n / V::N; ++j) V::store(out + j * V::N, vec[j]);
    };
    // E4M3 codes 0x38 + e decode to (1 + e/8) x 2^-120 (e < 8), then the next binades:
    // distinct, and their bit patterns are the codes shifted
    uint8_t c8[32];
    for (int e = 0; e < 32; ++e) c8[e] = uint8_t(0x38 + e);
    V::dec_e4m3_bits(c8, vec);
    spill(32);
    for (int i = 0; i < 32; ++i)
      for (int e = 0; e < 32; ++e)
        if (f32_bits(out[i]) == uint32_t(0x38 + e) << 20) fp8[i] = e;
    // E2M1 has 8 magnitudes: one unit with code e % 8, one with code e / 8 (e < 64)
    static const float kMag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    auto code_of = [&](float v) {
      for (int c = 0; c < 8; ++c)
        if (kMag[c] == v) return c;
      return -1;
    };
    uint8_t lo[32], hi[32];
    for (int j = 0; j < 32; ++j) {
      lo[j] = uint8_t(((2 * j) % 8) | (((2 * j + 1) % 8) << 4));
      hi[j] = uint8_t(((2 * j) / 8) | (((2 * j + 1) / 8) << 4));
    }
    int low[64];
    V::dec_e2m1_pair(lo, true, kE2m1.t[127], kE2m1.t[127], vec);
    spill(64);
    for (int i = 0; i < 64; ++i) low[i] = code_of(out[i]);
    V::dec_e2m1_pair(hi, true, kE2m1.t[127], kE2m1.t[127], vec);
    spill(64);
    for (int i = 0; i < 64; ++i) fp4[i] = code_of(out[i]) * 8 + low[i];
    // bf16: element e holds the value e (exact)
    uint16_t b16[32];
    for (int e = 0; e < 32; ++e) b16[e] = uint16_t(f32_bits(float(e)) >> 16);
    V::dec_bf16(b16, vec);
    spill(32);
    for (int i = 0; i < 32; ++i) bf16[i] = int(out[i]);
  }
};
template <class V>
const BlockOrder<V>& block_order() {
  static const BlockOrder<V> o;
  return o;
}

// ---- prepare: activation rows in the decoders' order ----

int act_floats_same(int K) { return K; }

// x -> act_quant (bit-exact) -> q * s, each unit of U elements permuted by `order` (a unit past
// K reads zeros); with `xmax`, each 32-block's max |q * s| after the row's panel_len values
inline void prepare_quant_rows(const float* x, int rows, int K, int U, int stride, float* act,
                               const int* order, bool xmax) {
  alignas(64) float deq[64];
  const int nb = K / 32, len = (K + U - 1) / U * U;
  for (int m = 0; m < rows; ++m) {
    const float* xr = x + size_t(m) * K;
    float* a = act + size_t(m) * stride;
    for (int u = 0; u < len / U; ++u) {
      for (int h = 0; h < U / 32; ++h) {
        const int b = u * (U / 32) + h;
        if (b >= nb) {
          std::memset(deq + 32 * h, 0, 32 * sizeof(float));
          continue;
        }
        act_quant_block(xr + size_t(b) * 32, nullptr, deq + 32 * h);
        if (xmax) {
          float mx = 0.0f;
          for (int i = 0; i < 32; ++i) mx = std::max(mx, std::fabs(deq[32 * h + i]));
          a[len + b] = mx;
        }
      }
      for (int i = 0; i < U; ++i) a[u * U + i] = deq[order[i]];
    }
  }
}
inline void permute_rows(const float* x, int rows, int K, float* act, const int* order) {
  for (int m = 0; m < rows; ++m)
    for (int b = 0; b < K / 32; ++b) {
      const float* s = x + size_t(m) * K + size_t(b) * 32;
      float* a = act + size_t(m) * K + size_t(b) * 32;
      for (int i = 0; i < 32; ++i) a[i] = s[order[i]];
    }
}

template <class V>
void prepare_fp8(const float* x, int rows, int K, float* act) {
  prepare_quant_rows(x, rows, K, 32, Fp8Rows<V>::act_floats(K), act, block_order<V>().fp8, true);
}
template <class V>
void prepare_fp4(const float* x, int rows, int K, float* act) {
  prepare_quant_rows(x, rows, K, 64, Fp4Rows<V>::act_floats(K), act, block_order<V>().fp4, false);
}
template <class V>
void prepare_bf16(const float* x, int rows, int K, float* act) {
  permute_rows(x, rows, K, act, block_order<V>().bf16);
}
template <class V>
void prepare_fp8w(const float* x, int rows, int K, float* act) {
  permute_rows(x, rows, K, act, block_order<V>().fp8);
}
void prepare_f32(const float* x, int rows, int K, float* act) {
  std::memcpy(act, x, sizeof(float) * size_t(rows) * size_t(K));
}

// ---- the product ----

// A per-thread buffer for the decoded panel (grows, never shrinks; freed at thread exit).
struct PanelBuffer {
  float* p = nullptr;
  size_t n = 0;
  ~PanelBuffer() { std::free(p); }
  float* get(size_t floats) {
    if (floats > n) {
      std::free(p);
      p = static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64));
      if (!p) std::abort();
      n = floats;
    }
    return p;
  }
};
inline float* panel_buffer(size_t floats) {
  static thread_local PanelBuffer b;
  return b.get(floats);
}

template <bool kRound>
inline void put(float* out, float v) {
  *out = kRound ? bf16_round(v) : v;
}

// A decode step streams each weight row once, in short rows (1-4 KiB) that the hardware
// prefetcher barely ramps up on: each tile asks for the next tile's bytes (R rows further on)
// while it computes. Past the end of the tensor the hint is harmless (prefetches never fault).
inline void prefetch_next_tile(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// The decode steps over ggml blocks (gemm_blocks_dp.h, gemm_blocks_fused.h): one prefetch per
// 64-byte line up to `end` (the current block's end, 2 KiB ahead), `ahead` the next line not yet
// asked for. Blocks are not whole lines (Q4_K 144 bytes, Q6_K 210): one prefetch per block left
// every other line of a Q4_K row to the hardware prefetcher (gemm_bench q4_k/t1/gemv, dot-product
// table: 32 -> 52-57 GFLOP/s from DRAM per line).
constexpr int kBlockPrefetch = 2048;
inline void prefetch_lines(const uint8_t*& ahead, const uint8_t* end) {
  for (; ahead < end; ahead += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
}

// One activation row against R weight rows, decoding each unit into registers as it streams.
template <class V, class Rows, int R, bool kRound>
void gemv_tile(const float* x, int K, const uint8_t* w, const uint8_t* ws, int n, float* out) {
  using F = typename V::F;
  constexpr int NV = Rows::kUnit / V::N, NA = Rows::kAccs;
  F acc[R][NA];
  CEDAR_UNROLL for (int r = 0; r < R; ++r) {
    CEDAR_UNROLL for (int a = 0; a < NA; ++a) acc[r][a] = V::zero();
  }
  for (int u = 0; u < Rows::panel_len(K) / Rows::kUnit; ++u) {
    const float* xu = x + u * Rows::kUnit;
    CEDAR_UNROLL for (int r = 0; r < R; ++r) {
      if constexpr (kIsFp4Rows<Rows>) {
        static_assert(NA == 2);
        // (the empty asm hides that every row reads the same x: hoisted into registers, the
        // eight x vectors push the accumulators out to the stack)
        const float* xr = xu;
        asm("" : "+r"(xr));
        // (four tiles ahead: a two-row FP4 tile is only 0.5-1 KiB, less than a DRAM latency)
        prefetch_next_tile(w + Rows::unit_offset(K, n + r + 4 * R, u));
        Rows::fma_unit(w, ws, K, n + r, u, xr, acc[r]);
      } else {
        static_assert((std::is_same_v<Rows, Bf16Rows<V>> || std::is_same_v<Rows, Fp8WRows<V>> ||
                       std::is_same_v<Rows, Q8bRows<V>>)&&NA == 1,
                      "FP8 decode steps run gemv_fp8_tile");
        F wv[NV];
        // two tiles ahead (measured slightly faster on the head's 2 KiB rows, gemm_bench
        // gemv_head)
        prefetch_next_tile(w +
                           (size_t(n + r + 2 * R) * size_t(K) + size_t(u) * 32) * Rows::kElemBytes);
        Rows::unit(w, ws, K, n + r, u, wv);
        CEDAR_UNROLL for (int j = 0; j < NV; ++j) {
          acc[r][0] = V::fma(V::load(xu + j * V::N), wv[j], acc[r][0]);
        }
      }
    }
  }
  CEDAR_UNROLL for (int r = 0; r < R; ++r) {
    F sum = acc[r][0];
    CEDAR_UNROLL for (int a = 1; a < NA; ++a) sum = V::add(sum, acc[r][a]);
    put<kRound>(out + r, V::hsum(sum));
  }
}

// The FP8 decode step: R rows of one 32-row scale group share each block's scale, so it goes
// onto the activations instead of every weight vector, together with the decoder's 2^120
// (dec_e4m3_bits). x * (s * 2^120) is exact -- act_quant's values are far above fp32's
// subnormals -- unless it would overflow, which the block's max |x| rules out; the rare block
// that fails the check scales the weights instead (fp8 unit()). Either way the FMA multiplies
// the same exact product as the panel path: the sums are identical.
template <class V, int R, bool kRound>
void gemv_fp8_tile(const float* x, int K, const uint8_t* w, const uint8_t* ws, int n, float* out) {
  using F = typename V::F;
  constexpr int NV = V::kBlockVecs;
  const float* xmax = x + K;
  const uint8_t* sc = ws + size_t(n / 32) * size_t(K / 32);
  F acc[R];
  CEDAR_UNROLL for (int r = 0; r < R; ++r) acc[r] = V::zero();
  for (int kb = 0; kb < K / 32; ++kb) {
    const uint8_t c = sc[kb];
    const float xs = kE8m0x120.v[c];
    F xv[NV], wv[NV];
    CEDAR_UNROLL for (int j = 0; j < NV; ++j) xv[j] = V::load(x + kb * 32 + j * V::N);
    if (xmax[kb] * xs < 0x1p126f) {
      const F s = V::set1(xs);
      CEDAR_UNROLL for (int j = 0; j < NV; ++j) xv[j] = V::mul(xv[j], s);
      CEDAR_UNROLL for (int r = 0; r < R; ++r) {
        const uint8_t* p = w + size_t(n + r) * size_t(K) + size_t(kb) * 32;
        if (kb % 2 == 0) prefetch_next_tile(p + size_t(R) * size_t(K));
        V::dec_e4m3_bits(p, wv);
        CEDAR_UNROLL for (int j = 0; j < NV; ++j) acc[r] = V::fma(xv[j], wv[j], acc[r]);
      }
    } else {
      CEDAR_UNROLL for (int r = 0; r < R; ++r) {
        Fp8Rows<V>::unit(w, ws, K, n + r, kb, wv);
        CEDAR_UNROLL for (int j = 0; j < NV; ++j) acc[r] = V::fma(xv[j], wv[j], acc[r]);
      }
    }
  }
  CEDAR_UNROLL for (int r = 0; r < R; ++r) put<kRound>(out + r, V::hsum(acc[r]));
}

// MR activation rows (stride lda) against R decoded weight rows of a panel (row stride K), NA
// accumulators per output (vector t to accumulator t % NA, as the decode step does).
template <class V, int MR, int R, int NA, bool kRound>
void panel_tile(const float* act, int lda, int K, const float* panel, float* out, int ldo) {
  using F = typename V::F;
  F acc[NA][MR][R];
  CEDAR_UNROLL for (int a = 0; a < NA; ++a) {
    CEDAR_UNROLL for (int i = 0; i < MR; ++i) {
      CEDAR_UNROLL for (int r = 0; r < R; ++r) acc[a][i][r] = V::zero();
    }
  }
  for (int k = 0; k < K; k += NA * V::N) {
    CEDAR_UNROLL for (int a = 0; a < NA; ++a) {
      F x[MR];
      CEDAR_UNROLL for (int i = 0; i < MR; ++i) {
        x[i] = V::load(act + size_t(i) * lda + k + a * V::N);
      }
      CEDAR_UNROLL for (int r = 0; r < R; ++r) {
        const F wv = V::load(panel + size_t(r) * K + k + a * V::N);
        CEDAR_UNROLL for (int i = 0; i < MR; ++i) acc[a][i][r] = V::fma(x[i], wv, acc[a][i][r]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < R; ++r) {
      F sum = acc[0][i][r];
      for (int a = 1; a < NA; ++a) sum = V::add(sum, acc[a][i][r]);
      put<kRound>(out + size_t(i) * ldo + r, V::hsum(sum));
    }
}

template <class V, int MR, int R, int NA, bool kRound>
void panel_rows(const float* act, int lda, int M, int K, const float* panel, float* out, int ldo) {
  int m = 0;
  for (; m + MR <= M; m += MR)
    panel_tile<V, MR, R, NA, kRound>(act + size_t(m) * lda, lda, K, panel, out + size_t(m) * ldo,
                                     ldo);
  if constexpr (MR > 1) {
    if (m < M)
      panel_rows<V, MR - 1, R, NA, kRound>(act + size_t(m) * lda, lda, M - m, K, panel,
                                           out + size_t(m) * ldo, ldo);
  }
}

// Register tile sizes: NA x MR x R accumulators, MR activation vectors and one weight vector
// must fit the register file (16 on AVX2, 32 on AVX-512). With two accumulators on AVX2, 2 x 3
// leaves a register spare; 3 x 2 (all 16) made GCC fold the activation loads into every FMA.
template <class V, int NA>
struct Tile {
  static constexpr int R = V::N == 8 && NA == 2 ? 3 : 4;
  static constexpr int MR = V::N == 8 && NA == 2 ? 2 : V::N == 8 || NA == 2 ? 3 : 5;
};

// Decode-step tiles of kGemvRows weight rows, row by row over the activations. A few rows (a
// batched decode step's share of a routed expert) take this path too: a tile's weight rows come
// from DRAM for the first and from L1 for the others, cheaper than decoding them into a panel.
// Same FMAs either way.
template <class V, class Rows, bool kRound>
void gemv_cols(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
               float* out, int ldo) {
  constexpr int R = Rows::kGemvRows;
  const int lda = Rows::act_floats(K);
  for (int m = 0; m < M; ++m) {
    const float* x = act + size_t(m) * lda;
    float* o = out + size_t(m) * ldo;
    int n = n0;
    if constexpr (std::is_same_v<Rows, Fp8Rows<V>>) {
      for (; n + R <= n1; n += R) {
        if (n / 32 == (n + R - 1) / 32) {
          gemv_fp8_tile<V, R, kRound>(x, K, w, ws, n, o + (n - n0));
        } else {
          for (int r = 0; r < R; ++r)
            gemv_fp8_tile<V, 1, kRound>(x, K, w, ws, n + r, o + (n - n0) + r);
        }
      }
      for (; n < n1; ++n) gemv_fp8_tile<V, 1, kRound>(x, K, w, ws, n, o + (n - n0));
    } else {
      for (; n + R <= n1; n += R) gemv_tile<V, Rows, R, kRound>(x, K, w, ws, n, o + (n - n0));
      for (; n < n1; ++n) gemv_tile<V, Rows, 1, kRound>(x, K, w, ws, n, o + (n - n0));
    }
  }
}

// R weight rows decoded once into a panel, then register tiles of rows over it.
template <class V, class Rows, int R, bool kRound>
void panel_cols(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n,
                float* out, int ldo) {
  using F = typename V::F;
  const int len = Rows::panel_len(K), NV = Rows::kUnit / V::N;
  float* panel = panel_buffer(size_t(R) * size_t(len));
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < len / Rows::kUnit; ++u) {
      F v[Rows::kUnit / V::N];
      Rows::unit(w, ws, K, n + r, u, v);
      for (int j = 0; j < NV; ++j)
        V::store(panel + size_t(r) * len + u * Rows::kUnit + j * V::N, v[j]);
    }
  panel_rows<V, Tile<V, Rows::kAccs>::MR, R, Rows::kAccs, kRound>(act, Rows::act_floats(K), M, len,
                                                                  panel, out, ldo);
}

// Up to this many rows a product runs the decode-step kernel row by row: measured (gemm_bench
// gemv_rows2/4, FP8 and FP4) faster than the panel at two rows, slower at four.
constexpr int kGemvRowsMax = 3;

template <class V, class Rows, bool kRound>
void gemm(const float* act, int M, int K, const uint8_t* w, const uint8_t* ws, int n0, int n1,
          float* out, int ldo) {
  if (M <= kGemvRowsMax) {
    gemv_cols<V, Rows, kRound>(act, M, K, w, ws, n0, n1, out, ldo);
    return;
  }
  constexpr int R = Tile<V, Rows::kAccs>::R;
  int n = n0;
  for (; n + R <= n1; n += R)
    panel_cols<V, Rows, R, kRound>(act, M, K, w, ws, n, out + (n - n0), ldo);
  for (; n < n1; ++n) panel_cols<V, Rows, 1, kRound>(act, M, K, w, ws, n, out + (n - n0), ldo);
}

// The families of one vector layer (kernel_table.h GemmKernels).
template <class V>
GemmKernels fp8_family() {
  return {Fp8Rows<V>::act_floats, prepare_fp8<V>, gemm<V, Fp8Rows<V>, true>, 4};
}
template <class V>
GemmKernels fp4_family() {
  return {Fp4Rows<V>::act_floats, prepare_fp4<V>, gemm<V, Fp4Rows<V>, true>, 4};
}
// FP4 weights stored as ggml MXFP4 blocks: the FP4 family's activations and arithmetic
template <class V>
GemmKernels mxfp4_family() {
  return {Fp4Rows<V>::act_floats, prepare_fp4<V>, gemm<V, Fp4Rows<V, true>, true>, 4};
}
template <class V>
GemmKernels bf16_family() {
  return {Bf16Rows<V>::act_floats, prepare_bf16<V>, gemm<V, Bf16Rows<V>, false>, 4};
}
// The fp32-weight family is mHC's hc_fn x stream product (24 outputs per row): tiny next to the
// other GEMMs, and the one whose rounding the model is most sensitive to (canonical-arithmetic
// rule 1: a one-ulp change of a mix moves the logits). So it keeps the reference's arithmetic --
// exact products (fp32 x fp32 fits a double) summed in double lanes, rounded once -- with four
// double lanes on AVX2 in every table.
inline float dot_f32_exact(const float* x, const float* w, int K) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int k = 0;
  for (; k + 8 <= K; k += 8) {
    a0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k)), _mm256_cvtps_pd(_mm_loadu_ps(w + k)),
                         a0);
    a1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k + 4)),
                         _mm256_cvtps_pd(_mm_loadu_ps(w + k + 4)), a1);
  }
  const __m256d a = _mm256_add_pd(a0, a1);
  const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  for (; k < K; ++k) sum += double(x[k]) * double(w[k]);
  const float r = float(sum);
  return r == 0.0f ? 0.0f : r;  // a zero sum is +0.0 (NUMERICS §R)
}
void gemm_f32_exact(const float* act, int M, int K, const uint8_t* wb, const uint8_t*, int n0,
                    int n1, float* out, int ldo) {
  const float* w = reinterpret_cast<const float*>(wb);
  for (int m = 0; m < M; ++m)
    for (int n = n0; n < n1; ++n)
      out[size_t(m) * ldo + (n - n0)] = dot_f32_exact(act + size_t(m) * K, w + size_t(n) * K, K);
}
template <class V>
GemmKernels fp8w_family() {
  return {Fp8WRows<V>::act_floats, prepare_fp8w<V>, gemm<V, Fp8WRows<V>, false>, 4};
}
template <class V>
GemmKernels q8b_family() {
  return {Q8bRows<V>::act_floats, prepare_f32, gemm<V, Q8bRows<V>, false>, 4};
}
GemmKernels f32_family() { return {act_floats_same, prepare_f32, gemm_f32_exact, 4}; }

}  // namespace
}  // namespace cedar::kernels::fast
