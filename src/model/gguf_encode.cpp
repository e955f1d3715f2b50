#include "model/gguf_encode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "ggml_iq_tables.h"
#include "model/gguf.h"
#include "numerics/fp16.h"

namespace cedar::gguf {

// ref: ggml-quants.c quantize_row_q8_0_ref (the format's own quantizer)
void encode_q8_0_row(const float* x, int64_t n, uint8_t* dst) {
  if (n % 32) throw std::invalid_argument("Q8_0 rows are whole blocks of 32");
  for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += 34) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(dst, &h, 2);
    for (int i = 0; i < 32; ++i) dst[2 + i] = uint8_t(int8_t(std::round(x[i] * id)));
  }
}

namespace {

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void put_f16(uint8_t* p, float v) { put_u16(p, f32_to_f16(v)); }

// The value an fp16 field actually holds (what the decoder multiplies by).
float f16_rounded(float v) { return f16_to_f32(f32_to_f16(v)); }

int round_clamp(float v, int lo, int hi) { return std::clamp(int(std::nearbyint(v)), lo, hi); }

// The element of the largest magnitude, with its sign (the first one on ties).
float signed_extreme(const float* x, int n) {
  float e = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(e)) e = x[i];
  return e;
}

// A symmetric 32-value block d · (q − bias), q in [0, 2·bias): the element of the largest
// magnitude maps to q = 0 (the value −bias · d), so no value is clipped.
float symmetric_block(const float* x, int bias, int* q) {
  const float d = f16_rounded(signed_extreme(x, 32) / float(-bias));
  for (int i = 0; i < 32; ++i)
    q[i] = d != 0.0f ? round_clamp(x[i] / d, -bias, bias - 1) + bias : bias;
  return d;
}

// Scale and min of an asymmetric sub-block, value = scale · q − min with q in [0, qmax]: the range
// [min(0, lo), hi] spread over the levels (min >= 0, so zero is inside the range).
void range_of(const float* x, int n, int qmax, float* scale, float* min) {
  float lo = 0.0f, hi = -INFINITY;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  *min = -lo;
  *scale = std::max(0.0f, hi - lo) / float(qmax);
}

// Quants of an asymmetric sub-block once its stored scale (d · sc) and min (dmin · m) are fixed.
void asymmetric_quants(const float* x, int n, float step, float offset, int qmax, uint8_t* q) {
  for (int i = 0; i < n; ++i)
    q[i] = uint8_t(step > 0.0f ? round_clamp((x[i] + offset) / step, 0, qmax) : 0);
}

// Super-block scales of K-quants: the 6- (or 4-) bit sub-block codes of `v` over their maximum.
float super_scale(const float* v, int n, int levels, int* codes) {
  float mx = 0.0f;
  for (int j = 0; j < n; ++j) mx = std::max(mx, v[j]);
  const float d = f16_rounded(mx / float(levels));
  for (int j = 0; j < n; ++j) codes[j] = d > 0.0f ? round_clamp(v[j] / d, 0, levels) : 0;
  return d;
}

// Q4_K's and Q5_K's 12 bytes of eight 6-bit scales and mins, as ggml::k_scale_min reads them
void pack_k_scales(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = uint8_t(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = uint8_t((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

// ref: ggml-common.h block_q4_0 {d; qs[16]}
void q4_0_block(const float* x, uint8_t* b) {
  int q[32];
  put_f16(b, symmetric_block(x, 8, q));
  for (int j = 0; j < 16; ++j) b[2 + j] = uint8_t(q[j] | q[j + 16] << 4);
}

// ref: ggml-common.h block_q5_0 {d; qh[4]; qs[16]}: bit 4 of element j in bit j of qh
void q5_0_block(const float* x, uint8_t* b) {
  int q[32];
  put_f16(b, symmetric_block(x, 16, q));
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= uint32_t(q[j] >> 4) << j;
  std::memcpy(b + 2, &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = uint8_t((q[j] & 15) | (q[j + 16] & 15) << 4);
}

// ref: ggml-common.h block_q2_K {scales[16]; qs[64]; d; dmin}; sixteen 16-value sub-blocks
void q2_k_block(const float* x, uint8_t* b) {
  float scale[16], min[16];
  for (int j = 0; j < 16; ++j) range_of(x + 16 * j, 16, 3, &scale[j], &min[j]);
  int sc[16], m[16];
  const float d = super_scale(scale, 16, 15, sc), dmin = super_scale(min, 16, 15, m);
  uint8_t q[256];
  for (int j = 0; j < 16; ++j) {
    asymmetric_quants(x + 16 * j, 16, d * float(sc[j]), dmin * float(m[j]), 3, q + 16 * j);
    b[j] = uint8_t(sc[j] | m[j] << 4);
  }
  // value 128h + 32p + 16half + l sits in bit pair p of qs[32h + 16half + l]
  std::memset(b + 16, 0, 64);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, p = i % 128 / 32, k = i % 32;
    b[16 + 32 * h + k] |= uint8_t(q[i] << (2 * p));
  }
  put_f16(b + 80, d);
  put_f16(b + 82, dmin);
}

// ref: ggml-common.h block_q3_K {hmask[32]; qs[64]; scales[12]; d}: sixteen 16-value
// sub-blocks with signed 6-bit scales and quants in [-4, 3]
void q3_k_block(const float* x, uint8_t* b) {
  float scale[16];
  float big = 0.0f;  // the sub-block scale of the largest magnitude, signed
  for (int j = 0; j < 16; ++j) {
    scale[j] = signed_extreme(x + 16 * j, 16) / -4.0f;  // the extreme maps to q = -4
    if (std::fabs(scale[j]) > std::fabs(big)) big = scale[j];
  }
  const float d = f16_rounded(big / -32.0f);  // that scale's code is -32
  std::memset(b, 0, 110);
  for (int j = 0; j < 16; ++j) {
    const int sc = d != 0.0f ? round_clamp(scale[j] / d, -32, 31) : 0;
    const int u = sc + 32;
    b[96 + j % 8] |= uint8_t((u & 15) << (j < 8 ? 0 : 4));
    b[96 + 8 + j % 4] |= uint8_t((u >> 4) << (2 * (j / 4)));
    const float step = d * float(sc);
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * j + l;  // sub-block j = 8h + 2p + half covers 128h + 32p + 16half + l
      const int q = step != 0.0f ? round_clamp(x[i] / step, -4, 3) : 0;
      const int h = i / 128, p = i % 128 / 32, k = i % 32, u3 = q + 4;
      b[32 + 32 * h + k] |= uint8_t((u3 & 3) << (2 * p));
      b[k] |= uint8_t((u3 >> 2) << (4 * h + p));
    }
  }
  put_f16(b + 108, d);
}

// Q4_K's and Q5_K's head {d; dmin; scales[12]} for eight 32-value sub-blocks of qmax + 1 levels,
// and the sub-blocks' quants
void k_scales_and_quants(const float* x, int qmax, uint8_t* b, uint8_t* q) {
  float scale[8], min[8];
  for (int j = 0; j < 8; ++j) range_of(x + 32 * j, 32, qmax, &scale[j], &min[j]);
  int sc[8], m[8];
  const float d = super_scale(scale, 8, 63, sc), dmin = super_scale(min, 8, 63, m);
  put_f16(b, d);
  put_f16(b + 2, dmin);
  pack_k_scales(sc, m, b + 4);
  for (int j = 0; j < 8; ++j)
    asymmetric_quants(x + 32 * j, 32, d * float(sc[j]), dmin * float(m[j]), qmax, q + 32 * j);
}

// ref: ggml-common.h block_q4_K {d; dmin; scales[12]; qs[128]}: eight 32-value sub-blocks with
// 6-bit scales and mins packed as k_scale_min reads them
void q4_k_block(const float* x, uint8_t* b) {
  uint8_t q[256];
  k_scales_and_quants(x, 15, b, q);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b[16 + 32 * c + l] = uint8_t(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

// ref: ggml-common.h block_q5_K {d; dmin; scales[12]; qh[32]; qs[128]}: Q4_K's sub-blocks and
// scale packing with 5-bit quants, the fifth bit of value 64c + 32half + l in bit 2c + half of
// qh[l]
void q5_k_block(const float* x, uint8_t* b) {
  uint8_t q[256];
  k_scales_and_quants(x, 31, b, q);
  std::memset(b + 16, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      b[48 + 32 * c + l] = uint8_t((lo & 15) | (hi & 15) << 4);
      b[16 + l] |= uint8_t((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
    }
}

// ref: ggml-common.h block_q6_K {ql[128]; qh[64]; scales[16] (int8); d}: sixteen 16-value
// sub-blocks, value d·sc·(q − 32); each sub-block's extreme maps to q = 0 (−32 steps) as Q3_K's
// does, the largest sub-block scale to code −128
void q6_k_block(const float* x, uint8_t* b) {
  float scale[16], big = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scale[j] = signed_extreme(x + 16 * j, 16) / -32.0f;
    if (std::fabs(scale[j]) > std::fabs(big)) big = scale[j];
  }
  const float d = f16_rounded(big / -128.0f);
  std::memset(b, 0, 210);
  for (int j = 0; j < 16; ++j) {
    const int sc = d != 0.0f ? round_clamp(scale[j] / d, -128, 127) : 0;
    b[192 + j] = uint8_t(int8_t(sc));
    const float step = d * float(sc);
    for (int l = 0; l < 16; ++l) {
      // value 128h + 32k + l' (l' < 32) with sub-block 8h + l'/16 + 2k
      const int i = 16 * j + l, h = i / 128, k = i % 128 / 32, lp = i % 32;
      const int q = (step != 0.0f ? round_clamp(x[i] / step, -32, 31) : 0) + 32;
      b[64 * h + lp + 32 * (k % 2)] |= uint8_t((q & 15) << (4 * (k / 2)));
      b[128 + 32 * h + lp] |= uint8_t((q >> 4) << (2 * k));
    }
  }
  put_f16(b + 208, d);
}

// IQ2_XXS (spec §7.9): each 8-value run takes the signs of its values (an odd count of minus
// signs flips the smallest magnitude's, the format implying the eighth sign from parity) and the
// grid entry nearest to its signed magnitudes; each 32-value group the 4-bit scale (of three
// candidates around its largest magnitude over the grid's 43) with the least squared error; the
// block's fp16 d maps the largest group to scale 15.
struct Iq2Run {
  uint8_t grid = 0, signs = 0;  // grid index, 7-bit sign index
  float err = 0.0f;
};
// Each grid entry as eight level codes (0, 1, 2 for the magnitudes 8, 25, 43), so a run's error
// against an entry is eight lookups of per-element, per-level errors computed once.
struct Iq2Levels {
  uint8_t code[256][8];
  Iq2Levels() {
    for (int g = 0; g < 256; ++g)
      for (int j = 0; j < 8; ++j) {
        const int m = int((ggml::tables::kIq2xxsGrid[g] >> (8 * j)) & 255);
        code[g][j] = uint8_t(m == 8 ? 0 : m == 25 ? 1 : 2);
      }
  }
};
constexpr float kIq2Magnitudes[3] = {8.0f, 25.0f, 43.0f};

Iq2Run iq2_xxs_run(const float* x, float dg) {
  static const Iq2Levels levels;
  Iq2Run r;
  int pattern = 0, smallest = 0;
  for (int j = 0; j < 8; ++j) {
    if (x[j] < 0) pattern |= 1 << j;
    if (std::fabs(x[j]) < std::fabs(x[smallest])) smallest = j;
  }
  if (__builtin_popcount(unsigned(pattern)) % 2) pattern ^= 1 << smallest;
  r.signs = uint8_t(pattern & 127);
  float err[8][3];  // against the magnitudes (negative targets where the sign was overridden)
  for (int j = 0; j < 8; ++j) {
    const float t = pattern >> j & 1 ? -x[j] : x[j];
    for (int l = 0; l < 3; ++l) {
      const float diff = dg * kIq2Magnitudes[l] - t;
      err[j][l] = diff * diff;
    }
  }
  r.err = INFINITY;
  for (int g = 0; g < 256; ++g) {
    float e = 0.0f;
    for (int j = 0; j < 8; ++j) e += err[j][levels.code[g][j]];
    if (e < r.err) r.err = e, r.grid = uint8_t(g);
  }
  return r;
}

void iq2_xxs_block(const float* x, uint8_t* b) {
  float gmax[8], top = 0.0f;
  for (int g = 0; g < 8; ++g) {
    gmax[g] = 0.0f;
    for (int i = 0; i < 32; ++i) gmax[g] = std::max(gmax[g], std::fabs(x[32 * g + i]));
    top = std::max(top, gmax[g]);
  }
  const float d = f16_rounded(top / 43.0f / (15.5f * 0.25f));
  put_f16(b, d);
  for (int g = 0; g < 8; ++g) {
    uint32_t idx = 0, aux = 0;
    if (d > 0.0f) {
      const int s0 = round_clamp(gmax[g] / 43.0f / (d * 0.25f) - 0.5f, 0, 15);
      float best = INFINITY;
      for (int s = std::max(0, s0 - 1); s <= std::min(15, s0 + 1); ++s) {
        const float dg = d * (0.5f + float(s)) * 0.25f;
        uint32_t i = 0, a = uint32_t(s) << 28;
        float err = 0.0f;
        for (int run = 0; run < 4; ++run) {
          const Iq2Run r = iq2_xxs_run(x + 32 * g + 8 * run, dg);
          i |= uint32_t(r.grid) << (8 * run);
          a |= uint32_t(r.signs) << (7 * run);
          err += r.err;
        }
        if (err < best) best = err, idx = i, aux = a;
      }
    }
    std::memcpy(b + 2 + 8 * g, &idx, 4);
    std::memcpy(b + 6 + 8 * g, &aux, 4);
  }
}

// IQ1_S and IQ1_M: a run of eight values is dl·(g_j + delta) with g one of the 2048 grid entries
// in {-1, 0, 1}^8 and delta = ±1/8. A run's values, divided by dl less delta and rounded to the
// nearest level, give a pattern of 3^8; the run takes, of the grid entries nearest to that pattern
// (fewest level steps away, listed once per pattern), the one of least squared error.
struct Iq1Neighbours {
  std::vector<std::vector<uint16_t>> of;  // pattern (base 3, element j the j-th trit) -> entries
  Iq1Neighbours() : of(6561) {
    int8_t level[2048][8];
    for (int g = 0; g < 2048; ++g)
      for (int j = 0; j < 8; ++j) level[g][j] = int8_t(ggml::tables::kIq1sGrid[g] >> (8 * j));
    for (int p = 0; p < 6561; ++p) {
      int t[8];
      for (int j = 0, v = p; j < 8; ++j, v /= 3) t[j] = v % 3 - 1;
      int best = 1 << 30;
      for (int g = 0; g < 2048; ++g) {
        int dist = 0;
        for (int j = 0; j < 8; ++j) dist += std::abs(t[j] - level[g][j]);
        if (dist < best) best = dist, of[size_t(p)].clear();
        if (dist == best) of[size_t(p)].push_back(uint16_t(g));
      }
    }
  }
};

struct Iq1Run {
  uint16_t grid = 0;
  float err = INFINITY;
};

Iq1Run iq1_run(const float* x, float dl, float delta) {
  static const Iq1Neighbours nb;
  int pattern = 0;
  for (int j = 7; j >= 0; --j)
    pattern = 3 * pattern + (dl > 0.0f ? round_clamp(x[j] / dl - delta, -1, 1) : 0) + 1;
  Iq1Run r;
  for (uint16_t g : nb.of[size_t(pattern)]) {
    float e = 0.0f;
    for (int j = 0; j < 8; ++j) {
      const float diff = dl * (float(int8_t(ggml::tables::kIq1sGrid[g] >> (8 * j))) + delta) - x[j];
      e += diff * diff;
    }
    if (e < r.err) r.err = e, r.grid = g;
  }
  return r;
}

// The block's fp16 d for odd group scales 1 .. 15: the largest magnitude at 15·d
float iq1_d(const float* x) {
  float top = 0.0f;
  for (int i = 0; i < 256; ++i) top = std::max(top, std::fabs(x[i]));
  return f16_rounded(top / 15.0f);
}

// ref: ggml-common.h block_iq1_s {d; qs[32]; qh[8]}: per 32-value group the 3-bit scale s
// (dl = d·(2s + 1)) and delta sign of least squared error, every candidate tried
void iq1_s_block(const float* x, uint8_t* b) {
  const float d = iq1_d(x);
  put_f16(b, d);
  for (int g = 0; g < 8; ++g) {
    float best = INFINITY;
    uint16_t grid[4] = {}, qh = 0;
    for (int s = 0; s < 8 && d > 0.0f; ++s)
      for (int minus = 0; minus < 2; ++minus) {
        const float dl = d * float(2 * s + 1), delta = minus ? -0.125f : 0.125f;
        Iq1Run r[4];
        float err = 0.0f;
        for (int k = 0; k < 4; ++k) err += (r[k] = iq1_run(x + 32 * g + 8 * k, dl, delta)).err;
        if (err >= best) continue;
        best = err;
        qh = uint16_t(s << 12 | minus << 15);
        for (int k = 0; k < 4; ++k) grid[k] = r[k].grid;
      }
    for (int k = 0; k < 4; ++k) {
      b[2 + 4 * g + k] = uint8_t(grid[k] & 255);
      qh = uint16_t(qh | (grid[k] >> 8) << (3 * k));
    }
    put_u16(b + 34 + 2 * g, qh);
  }
}

// ref: ggml-common.h block_iq1_m {qs[32]; qh[16]; scales[8]}: per 16-value half group the 3-bit
// scale of least squared error, per run its own delta sign; d's fp16 bits in the top nibbles of
// the four scale words
void iq1_m_block(const float* x, uint8_t* b) {
  const float d = iq1_d(x);
  const uint16_t dh = f32_to_f16(d);
  uint16_t sc[4] = {};
  std::memset(b + 32, 0, 16);
  for (int half = 0; half < 16; ++half) {  // runs 2·half, 2·half + 1
    const int g = half / 2;
    float best = INFINITY;
    int best_s = 0;
    Iq1Run pick[2];
    bool minus[2] = {};
    for (int s = 0; s < 8 && d > 0.0f; ++s) {
      const float dl = d * float(2 * s + 1);
      Iq1Run r[2];
      bool m[2];
      for (int k = 0; k < 2; ++k) {
        const float* run = x + 16 * half + 8 * k;
        const Iq1Run plus = iq1_run(run, dl, 0.125f), neg = iq1_run(run, dl, -0.125f);
        m[k] = neg.err < plus.err;
        r[k] = m[k] ? neg : plus;
      }
      if (r[0].err + r[1].err >= best) continue;
      best = r[0].err + r[1].err, best_s = s;
      pick[0] = r[0], pick[1] = r[1], minus[0] = m[0], minus[1] = m[1];
    }
    sc[g / 2] = uint16_t(sc[g / 2] | best_s << (6 * (g % 2) + 3 * (half % 2)));
    for (int k = 0; k < 2; ++k) {
      const int run = 4 * g + 2 * (half % 2) + k;  // runs 4g .. 4g + 3
      b[run] = uint8_t(pick[k].grid & 255);
      const int nib = (pick[k].grid >> 8) | (minus[k] ? 8 : 0);
      b[32 + 2 * g + (run % 4) / 2] |= uint8_t(nib << (4 * (run % 2)));
    }
  }
  for (int i = 0; i < 4; ++i)
    put_u16(b + 48 + 2 * i, uint16_t(sc[i] | ((dh >> (4 * i)) & 15) << 12));
}

}  // namespace

bool encodable(uint32_t type) {
  for (uint32_t t :
       {kQ8_0, kQ4_0, kQ5_0, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ2_XXS, kIQ1_S, kIQ1_M})
    if (type == t) return true;
  return false;
}

void encode_row(uint32_t type, const float* x, int64_t n, uint8_t* dst) {
  const TypeInfo* t = type_info(type);
  if (!t || !encodable(type))
    throw std::invalid_argument("GGUF type " + std::to_string(type) + " has no encoder here");
  if (n % t->block_elems)
    throw std::invalid_argument(std::string(t->name) + ": a row of " + std::to_string(n) +
                                " elements is not whole blocks");
  if (type == kQ8_0) return encode_q8_0_row(x, n, dst);
  for (int64_t i = 0; i < n / t->block_elems; ++i) {
    const float* v = x + i * t->block_elems;
    uint8_t* b = dst + i * t->block_bytes;
    switch (type) {
      case kQ4_0:
        q4_0_block(v, b);
        break;
      case kQ5_0:
        q5_0_block(v, b);
        break;
      case kQ2_K:
        q2_k_block(v, b);
        break;
      case kQ3_K:
        q3_k_block(v, b);
        break;
      case kQ4_K:
        q4_k_block(v, b);
        break;
      case kQ5_K:
        q5_k_block(v, b);
        break;
      case kQ6_K:
        q6_k_block(v, b);
        break;
      case kIQ2_XXS:
        iq2_xxs_block(v, b);
        break;
      case kIQ1_S:
        iq1_s_block(v, b);
        break;
      case kIQ1_M:
        iq1_m_block(v, b);
        break;
    }
  }
}

void mxfp4_block_from_pairs(const uint8_t* pairs, uint8_t scale, uint8_t* block) {
  auto code = [pairs](int e) { return e % 2 ? pairs[e / 2] >> 4 : pairs[e / 2] & 15; };
  block[0] = scale;
  for (int j = 0; j < 16; ++j) block[1 + j] = uint8_t(code(j) | code(j + 16) << 4);
}

void mxfp4_block_to_pairs(const uint8_t* block, uint8_t* pairs, uint8_t* scale) {
  auto code = [block](int e) { return e < 16 ? block[1 + e] & 15 : block[1 + e - 16] >> 4; };
  *scale = block[0];
  for (int k = 0; k < 16; ++k) pairs[k] = uint8_t(code(2 * k) | code(2 * k + 1) << 4);
}

}  // namespace cedar::gguf
