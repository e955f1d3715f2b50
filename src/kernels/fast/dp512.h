// The weight decoders of the avx512bf16 table (AVX-512 F/BW + BF16 + VBMI): one unit of a stored
// weight row becomes bf16 words that VDPBF16PS multiplies with bf16 activations. Every product
// of two such words is exact in fp32 (a bf16 significand has 8 bits, an E4M3 one 4, an E2M1
// one 2), so these kernels differ from the reference only in the order and rounding of their
// fp32 sums -- as the FMA tables do -- at twice the multiply-adds per instruction.
//
// Each decoder writes a unit as vectors of 32 words in the order its cheapest instructions
// give; element(slot) says which element of the unit a word holds, and prepare() stores the
// activation rows in the same order. A vector's dword lane l (the word pair VDPBF16PS adds)
// always belongs to one 32-element block, so one scale vector per unit multiplies whole blocks:
// FP8 lanes 0-7 block 0, 8-15 block 1; FP4 lanes 4j..4j+3 block j.
//
// Included only by src/kernels/avx512bf16/avx512bf16.cpp (compiled with these ISA flags), inside
// an anonymous namespace like every kernels/fast header.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace cedar::kernels::fast {
namespace {

// GCC 12's unmasked forms of these intrinsics pass an undefined vector as the merge source and
// warn about it (-Wmaybe-uninitialized) wherever they inline: the masked forms with every lane
// selected compute the same.
inline __m512i rolv32(__m512i a, __m512i n) { return _mm512_mask_rolv_epi32(a, 0xFFFF, a, n); }
inline __m512i max_u32(__m512i a, __m512i b) { return _mm512_mask_max_epu32(a, 0xFFFF, a, b); }
inline __m512i perm_words(__m512i idx, __m512i table) {
  return _mm512_mask_permutexvar_epi16(idx, 0xFFFFFFFFu, idx, table);
}
template <int kHalf>
inline __m256 half(__m512 v) {
  return _mm512_mask_extractf32x8_ps(_mm256_setzero_ps(), 0xFF, v, kHalf);
}

// UE8M0 scale codes in the bytes of every dword of `codes` -> fp32 2^(c - 127) per lane: the
// rotation `rot` brings the lane's code byte to the exponent field. Codes 1..254 are exact; code
// 0 gives its subnormal 2^-127 (the max with 0x00400000); code 255 (UE8M0's NaN) gives +inf.
inline __m512 ue8m0_lanes(__m512i codes, __m512i rot) {
  const __m512i e = _mm512_and_si512(rolv32(codes, rot), _mm512_set1_epi32(0x7F800000));
  return _mm512_castsi512_ps(max_u32(e, _mm512_set1_epi32(0x00400000)));
}

// Sign-magnitude byte codes -> bf16 words, through two 128-entry byte tables (high and low byte
// of each magnitude's bf16; VPERMI2B ignores the sign bit) and the sign put back into the high
// byte. The tables come from `word(magnitude)`.
struct SignMagDec {
  static constexpr int kUnit = 64, kVecs = 2, kBytes = 64;
  __m512i h0, h1, l0, l1;
  explicit SignMagDec(uint16_t (*word)(int)) {
    alignas(64) uint8_t hi[128], lo[128];
    for (int c = 0; c < 128; ++c) {
      const uint16_t b = word(c);
      hi[c] = uint8_t(b >> 8);
      lo[c] = uint8_t(b);
    }
    h0 = _mm512_load_si512(hi);
    h1 = _mm512_load_si512(hi + 64);
    l0 = _mm512_load_si512(lo);
    l1 = _mm512_load_si512(lo + 64);
  }
  // slot 32v + w of a unit holds element 16(w/8) + 8v + w%8: dword lanes 0-7 of both vectors
  // hold the unit's first 32-block, lanes 8-15 its second
  static int element(int slot) {
    const int v = slot / 32, w = slot % 32;
    return 16 * (w / 8) + 8 * v + w % 8;
  }
  void decode(const uint8_t* p, __m512i* w) const { decode_bytes(_mm512_loadu_si512(p), w); }
  // a unit of `bytes` < 64 (the row's last, half-empty unit): the rest reads as zeros
  void decode_tail(const uint8_t* p, int bytes, __m512i* w) const {
    decode_bytes(_mm512_maskz_loadu_epi8(__mmask64(~0ull >> (64 - bytes)), p), w);
  }
  void decode_bytes(__m512i b, __m512i* w) const {
    __m512i h = _mm512_permutex2var_epi8(h0, b, h1);
    const __m512i l = _mm512_permutex2var_epi8(l0, b, l1);
    h = _mm512_ternarylogic_epi32(h, b, _mm512_set1_epi8(char(0x80)), 0xF8);  // h | (b & 0x80)
    w[0] = _mm512_unpacklo_epi8(l, h);
    w[1] = _mm512_unpackhi_epi8(l, h);
  }
};

// E4M3 magnitude c -> bf16 bits: exponent e = c >> 3, mantissa m = c & 7; bf16 exponent e + 120
// (normal) or the subnormal m x 2^-9 normalised
inline uint16_t e4m3_word(int c) {
  const int e = c >> 3, m = c & 7;
  if (e == 15 && m == 7) return 0x7FC0;  // NaN
  if (e > 0) return uint16_t(((e + 120) << 7) | (m << 4));
  if (m == 0) return 0;
  const int top = m >= 4 ? 2 : m >= 2 ? 1 : 0;  // m = 1.f x 2^top
  return uint16_t(((118 + top) << 7) | (((m << (7 - top)) & 0x7F)));
}

// E4M3 codes, a UE8M0 scale per 32-block.
struct Fp8Dec : SignMagDec {
  Fp8Dec() : SignMagDec(e4m3_word) {}
  // the two blocks' scales: lanes 0-7 code c0, lanes 8-15 code c1
  static __m512 scales(uint8_t c0, uint8_t c1) {
    const __m512i rot =
        _mm512_set_epi32(15, 15, 15, 15, 15, 15, 15, 15, 23, 23, 23, 23, 23, 23, 23, 23);
    return ue8m0_lanes(_mm512_set1_epi16(int16_t(c0 | (c1 << 8))), rot);
  }
};

// integer magnitude c (0..127) -> its bf16 bits (exact: at most 7 significant bits)
constexpr uint16_t int_word(int c) {
  if (c == 0) return 0;
  int e = 0;
  while (c >> (e + 1)) ++e;  // c = 1.f x 2^e
  return uint16_t(((e + 127) << 7) | ((c << (7 - e)) & 0x7F));
}

// Q8B codes (numerics/q8b.h: sign-magnitude int8), a bf16 scale per 32-block.
struct Q8bDec : SignMagDec {
  Q8bDec() : SignMagDec(int_word) {}
  // the two blocks' scales from their bf16 words (s0 | s1 << 16): lanes 0-7 s0, lanes 8-15 s1
  static __m512 scales(uint32_t pair) {
    const __m512i b = _mm512_set1_epi32(int(pair));
    const __m512i up = _mm512_mask_slli_epi32(b, 0x00FF, b, 16);
    return _mm512_castsi512_ps(_mm512_and_si512(up, _mm512_set1_epi32(int(0xFFFF0000u))));
  }
};

// E2M1 nibbles -> bf16 words without unpacking: a 64-byte unit is 32 words of four nibbles, and
// VPERMW looks each word's low nibble up in a 32-word table that repeats every 16 entries (so
// the bit above the nibble needs no masking); shifting the words by 4, 8 and 12 brings the
// other three nibbles down. Four lookups and three shifts per 128 elements (an unpack-based
// decode needed eight byte shuffles, the bottleneck of the FP4 decode step).
struct Fp4Dec {
  static constexpr int kUnit = 128, kVecs = 4, kBytes = 64;
  __m512i table;
  Fp4Dec() {
    static constexpr uint16_t kBf16[16] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040,
                                           0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0,
                                           0xC000, 0xC040, 0xC080, 0xC0C0};
    alignas(64) uint16_t t[32];
    for (int i = 0; i < 32; ++i) t[i] = kBf16[i % 16];
    table = _mm512_load_si512(t);
  }
  // vector v, word w: nibble v of word w, i.e. element 4w + v (block w/8)
  static int element(int slot) { return 4 * (slot % 32) + slot / 32; }
  void decode(const uint8_t* p, __m512i* w) const { decode_bytes(_mm512_loadu_si512(p), w); }
  // a unit of `bytes` < 64 (the row's last unit holds fewer than four blocks): the rest reads as
  // zeros
  void decode_tail(const uint8_t* p, int bytes, __m512i* w) const {
    decode_bytes(_mm512_maskz_loadu_epi8(__mmask64(~0ull >> (64 - bytes)), p), w);
  }
  void decode_bytes(__m512i b, __m512i* w) const {
    w[0] = perm_words(b, table);
    w[1] = perm_words(_mm512_srli_epi16(b, 4), table);
    w[2] = perm_words(_mm512_srli_epi16(b, 8), table);
    w[3] = perm_words(_mm512_srli_epi16(b, 12), table);
  }
  // four blocks' scale codes (c[0..nb), the rest 0) -> lane group j gets block j's scale;
  // kExact: code 0 gives 2^-127 (else 0; scales() callers check the row for code 0 first)
  static __m512 scales(const uint8_t* c, int nb) {
    uint32_t v = 0;
    for (int j = 0; j < nb && j < 4; ++j) v |= uint32_t(c[j]) << (8 * j);
    return scales_of(int32_t(v));
  }
  // a whole unit's four codes (broadcast straight from memory)
  static __m512 scales4(const uint8_t* c) {
    int32_t v;
    std::memcpy(&v, c, 4);
    return scales_of(v);
  }
  static __m512 scales_of(int32_t codes) {
    const __m512i rot =
        _mm512_set_epi32(31, 31, 31, 31, 7, 7, 7, 7, 15, 15, 15, 15, 23, 23, 23, 23);
    return ue8m0_lanes(_mm512_set1_epi32(codes), rot);
  }
};

// ggml MXFP4 blocks (17 bytes: the UE8M0 scale code, then element i < 16 in the low nibble of byte
// i + 1, i + 16 in its high nibble) -> exactly the words Fp4Dec makes of the release's bytes for
// the same codes. A unit is four blocks (68 bytes): one byte permute over them gathers block j's 16
// code bytes into 128-bit lane j; two in-lane byte shuffles put, at each release byte k of a
// block (element 2k low, 2k + 1 high), the byte holding element 2k and the one holding 2k + 1.
// Bytes 0-7 of a block (elements < 16) want those bytes' low nibbles, bytes 8-15 their high ones:
// a shift per qword (0 or 4 bits) and a bitwise select.
struct Mxfp4Dec : Fp4Dec {
  static constexpr int kBytes = 68;
  __m512i gather, even, odd, down, up;
  Mxfp4Dec() {
    alignas(64) uint8_t g[64], e[64], o[64];
    for (int i = 0; i < 64; ++i) {
      g[i] = uint8_t(17 * (i / 16) + 1 + i % 16);
      e[i] = uint8_t((2 * i) % 16);
      o[i] = uint8_t((2 * i + 1) % 16);
    }
    gather = _mm512_load_si512(g);
    even = _mm512_load_si512(e);
    odd = _mm512_load_si512(o);
    down = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);  // high qword of each block: high nibbles
    up = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);    // low qword: the odd element's low nibble up
  }
  void decode(const uint8_t* p, __m512i* w) const {
    int32_t last;  // bytes 64-67 (a masked load there measured slower)
    std::memcpy(&last, p + 64, 4);
    pairs(_mm512_loadu_si512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(last)), w);
  }
  // `bytes` = 17 x blocks (the panel decodes whole units this way too): missing blocks read as 0
  void decode_tail(const uint8_t* p, int bytes, __m512i* w) const {
    const int lo = bytes < 64 ? bytes : 64;
    pairs(_mm512_maskz_loadu_epi8(__mmask64(~0ull >> (64 - lo)), p),
          _mm512_maskz_loadu_epi8(__mmask64((1ull << (bytes - lo)) - 1), p + 64), w);
  }
  void pairs(__m512i b0, __m512i b1, __m512i* w) const {
    const __m512i c = _mm512_permutex2var_epi8(b0, gather, b1);
    const __m512i e = _mm512_shuffle_epi8(c, even), o = _mm512_shuffle_epi8(c, odd);
    const __m512i lo = _mm512_mask_srlv_epi64(e, 0xFF, e, down);
    const __m512i hi = _mm512_mask_sllv_epi64(o, 0xFF, o, up);
    // (lo & 0x0F) | (hi & 0xF0): the select c ? a : b with c = 0x0F
    decode_bytes(_mm512_ternarylogic_epi64(lo, hi, _mm512_set1_epi8(0x0F), 0xE4), w);
  }
  // the scale codes of the unit at p (nb blocks, the rest 0) as Fp4Dec's scale lanes: byte 17j
  // into the low byte of lanes 4j..4j+3, then to the exponent field (code 0: its subnormal
  // 2^-127; 255: +inf -- what ue8m0_lanes gives)
  static __m512 scales_at(const uint8_t* p, int nb) {
    return scales_of_bytes(_mm512_maskz_loadu_epi8(__mmask64(~0ull >> (64 - 17 * nb + 16)), p));
  }
  static __m512 scales4_at(const uint8_t* p) { return scales_of_bytes(_mm512_loadu_si512(p)); }
  static __m512 scales_of_bytes(__m512i b) {
    const __m512i idx =
        _mm512_set_epi32(51, 51, 51, 51, 34, 34, 34, 34, 17, 17, 17, 17, 0, 0, 0, 0);
    const __m512i c = _mm512_maskz_permutexvar_epi8(0x1111111111111111ull, idx, b);
    const __m512i e = _mm512_mask_slli_epi32(c, 0xFFFF, c, 23);
    return _mm512_castsi512_ps(max_u32(e, _mm512_set1_epi32(0x00400000)));
  }
};

// bf16 weights are their own words.
struct Bf16Dec {
  static constexpr int kUnit = 32, kVecs = 1, kBytes = 64;
  static int element(int slot) { return slot; }
  void decode(const uint8_t* p, __m512i* w) const { w[0] = _mm512_loadu_si512(p); }
  void decode_tail(const uint8_t* p, int, __m512i* w) const { decode(p, w); }  // never short
};

// fp32 lanes -> bf16 words, round to nearest even (exact for bf16 values)
inline void store_bf16(uint16_t* dst, const float* src32) {
  const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src32 + 16), _mm512_loadu_ps(src32));
  _mm512_storeu_si512(dst, __m512i(h));
}

// (the activation second: its load folds into the instruction)
inline __m512 dp(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, __m512bh(w), __m512bh(x));
}

// The fixed horizontal sum of both paths: halves, then quarters, then pairs.
inline float hsum16(__m512 v) {
  const __m256 h = _mm256_add_ps(half<0>(v), half<1>(v));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// hsum16 of v[0..15] at once: lane i of the result is hsum16(v[i]) bit for bit. The same pairs
// are added (lanes j and j+8, then j and j+4, j and j+2, j and j+1; fp32 addition commutes), only
// transposed: each step adds two shuffles of two vectors, so 16 rows cost 45 operations instead
// of 16 dependent scalar tails.
// (masked forms with a defined merge source: GCC 12 warns on the unmasked ones' undefined one)
template <int kImm>
inline __m512 shuffle_quarters(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, __mmask16(0xffff), a, b, kImm);
}
inline __m512 hsum16x16(const __m512* v) {
  __m512 t[8], w[4], y[2];
  for (int i = 0; i < 8; ++i)  // [a.lo8 + a.hi8 | b.lo8 + b.hi8]
    t[i] = _mm512_add_ps(shuffle_quarters<_MM_SHUFFLE(1, 0, 1, 0)>(v[2 * i], v[2 * i + 1]),
                         shuffle_quarters<_MM_SHUFFLE(3, 2, 3, 2)>(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // quarter q: row 4i + q's four partial sums
    w[i] = _mm512_add_ps(shuffle_quarters<_MM_SHUFFLE(2, 0, 2, 0)>(t[2 * i], t[2 * i + 1]),
                         shuffle_quarters<_MM_SHUFFLE(3, 1, 3, 1)>(t[2 * i], t[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // quarter q: rows 8i + q and 8i + 4 + q, two partials each
    y[i] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // lane 4q + l: row 4l + q
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i to_rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_mask_permutexvar_ps(r, __mmask16(0xffff), to_rows, r);
}

}  // namespace
}  // namespace cedar::kernels::fast
