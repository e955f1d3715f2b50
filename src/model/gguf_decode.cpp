#include "model/gguf_decode.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "model/gguf.h"
#include "numerics/bf16.h"
#include "numerics/fp16.h"
#include "numerics/fp8.h"

namespace cedar::gguf {

namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// ref: ggml-common.h block_q8_0 {d; qs[32]}
void q8_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int i = 0; i < 32; ++i) y[i] = d * float(int8_t(b[2 + i]));
}

// block_q4_0 {d; qs[16]}: element j low nibble of qs[j], j + 16 its high nibble, minus 8
void q4_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int(b[2 + j] & 15) - 8);
    y[j + 16] = d * float(int(b[2 + j] >> 4) - 8);
  }
}

// block_q5_0 {d; qh[4]; qs[16]}: nibbles as Q4_0, bit 4 of element j in bit j of qh, minus 16
void q5_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int((b[6 + j] & 15) | ((qh >> j) & 1) << 4) - 16);
    y[j + 16] = d * float(int((b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16);
  }
}

// block_mxfp4 {e; qs[16]}: the doubled E2M1 value times 2^(e - 128) (= the OCP value times
// 2^(e - 127)); element j low nibble of qs[j], j + 16 its high nibble. e = 255 (NaN) gives NaN.
void mxfp4(const uint8_t* b, float* y) {
  static constexpr float kDoubled[16] = {0,     1,  2,  3,  4,  6,  8,  12,
                                         -0.0f, -1, -2, -3, -4, -6, -8, -12};
  const float s = b[0] == 255 ? __builtin_nanf("") : ue8m0_to_f32(b[0]) * 0.5f;
  for (int j = 0; j < 16; ++j) {
    y[j] = kDoubled[b[1 + j] & 15] * s;
    y[j + 16] = kDoubled[b[1 + j] >> 4] * s;
  }
}

// block_q2_K {scales[16]; qs[64]; d; dmin}: two halves of 128, four 2-bit passes each
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = qs + 32 * h;
    for (int p = 0; p < 4; ++p)
      for (int half = 0; half < 2; ++half) {
        const uint8_t s = sc[8 * h + 2 * p + half];
        const float dl = d * float(s & 15), ml = dmin * float(s >> 4);
        for (int l = 0; l < 16; ++l)
          y[128 * h + 32 * p + 16 * half + l] = dl * float((q[16 * half + l] >> (2 * p)) & 3) - ml;
      }
  }
}

// block_q3_K {hmask[32]; qs[64]; scales[12]; d}: sixteen 6-bit signed scales, 2 low bits from
// qs and the high bit from hmask (set: 0, clear: -4)
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* s = b + 96;
  const float d = f16_at(b + 108);
  int scale[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (s[i] & 15) : (s[i - 8] >> 4);
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    scale[i] = (low | (high << 4)) - 32;
  }
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = qs + 32 * h;
    for (int p = 0; p < 4; ++p) {
      const int t = 4 * h + p;
      for (int half = 0; half < 2; ++half) {
        const float dl = d * float(scale[8 * h + 2 * p + half]);
        for (int l = 0; l < 16; ++l) {
          const int k = 16 * half + l;
          const int q2 = (q[k] >> (2 * p)) & 3;
          const int hi = (hmask[k] >> t) & 1;
          y[128 * h + 32 * p + k] = dl * float(q2 - (hi ? 0 : 4));
        }
      }
    }
  }
}

// the 12-byte 6-bit scale/min packing of Q4_K and Q5_K
void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
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
void q45_k(const uint8_t* b, bool five, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (five ? 48 : 16);
  for (int c = 0; c < 4; ++c)
    for (int half = 0; half < 2; ++half) {
      int sc, m;
      k_scale_min(s, 2 * c + half, &sc, &m);
      const float dl = d * float(sc), ml = dmin * float(m);
      for (int l = 0; l < 32; ++l) {
        int q = half ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 15;
        if (five) q += ((qh[l] >> (2 * c + half)) & 1) << 4;
        y[64 * c + 32 * half + l] = dl * float(q) - ml;
      }
    }
}

// block_q6_K {ql[128]; qh[64]; scales[16] (int8); d}
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
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

}  // namespace

bool decodable(uint32_t type) {
  switch (type) {
    case 0:   // F32
    case 1:   // F16
    case 2:   // Q4_0
    case 6:   // Q5_0
    case 8:   // Q8_0
    case 10:  // Q2_K
    case 11:  // Q3_K
    case 12:  // Q4_K
    case 13:  // Q5_K
    case 14:  // Q6_K
    case 24:  // I8
    case 30:  // BF16
    case 39:  // MXFP4
      return true;
    default:
      return false;
  }
}

void decode_row(uint32_t type, const uint8_t* src, int64_t n, float* dst) {
  const TypeInfo* t = type_info(type);
  if (!t || !decodable(type))
    throw std::invalid_argument("GGUF type " + std::string(t ? t->name : "?") + " (" +
                                std::to_string(type) + ") is not decodable");
  if (n % t->block_elems != 0)
    throw std::invalid_argument(std::string(t->name) + ": a row of " + std::to_string(n) +
                                " elements is not whole blocks");
  const int64_t blocks = n / t->block_elems;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * t->block_bytes;
    float* y = dst + i * t->block_elems;
    switch (type) {
      case 0:
        std::memcpy(y, b, 4);
        break;
      case 1:
        *y = f16_at(b);
        break;
      case 30: {
        uint16_t v;
        std::memcpy(&v, b, 2);
        *y = bf16_to_f32(v);
        break;
      }
      case 24:
        *y = float(int8_t(*b));
        break;
      case 8:
        q8_0(b, y);
        break;
      case 2:
        q4_0(b, y);
        break;
      case 6:
        q5_0(b, y);
        break;
      case 39:
        mxfp4(b, y);
        break;
      case 10:
        q2_k(b, y);
        break;
      case 11:
        q3_k(b, y);
        break;
      case 12:
        q45_k(b, false, y);
        break;
      case 13:
        q45_k(b, true, y);
        break;
      case 14:
        q6_k(b, y);
        break;
    }
  }
}

namespace {

// row 0 of the tensor (or of expert `expert`'s slice) and the rows it has
const uint8_t* first_row(const Header& h, const uint8_t* file, const TensorInfo& t, int expert,
                         uint64_t* rows) {
  const TypeInfo* ti = type_info(t.type);
  if (!decodable(t.type))
    throw std::runtime_error("tensor '" + std::string(t.name) + "' is " + ti->name +
                             ", which cedar does not decode yet");
  *rows = t.ne[1] * t.ne[2] * t.ne[3];
  const uint8_t* src = file + h.data_start + t.offset;
  if (expert < 0) return src;
  if (t.n_dims != 3 || uint64_t(expert) >= t.ne[2])
    throw std::runtime_error("tensor '" + std::string(t.name) + "' has no expert " +
                             std::to_string(expert));
  *rows = t.ne[1];
  return src + uint64_t(expert) * t.ne[1] * row_bytes(t);
}

}  // namespace

uint64_t row_bytes(uint32_t type, int64_t n) {
  const TypeInfo* ti = type_info(type);
  if (!ti) throw std::invalid_argument("GGUF type " + std::to_string(type) + " is unknown");
  return uint64_t(n) / uint64_t(ti->block_elems) * uint64_t(ti->block_bytes);
}

uint64_t row_bytes(const TensorInfo& t) { return row_bytes(t.type, int64_t(t.ne[0])); }

void decode_rows(const Header& h, const uint8_t* file, const TensorInfo& t, int expert, int64_t r0,
                 int64_t n, float* dst) {
  uint64_t rows = 0;
  const uint8_t* src = first_row(h, file, t, expert, &rows);
  if (r0 < 0 || n < 0 || uint64_t(r0 + n) > rows)
    throw std::out_of_range("tensor '" + std::string(t.name) + "': rows " + std::to_string(r0) +
                            " + " + std::to_string(n) + " of " + std::to_string(rows));
  const uint64_t rb = row_bytes(t);
  for (int64_t r = 0; r < n; ++r)
    decode_row(t.type, src + uint64_t(r0 + r) * rb, int64_t(t.ne[0]), dst + r * int64_t(t.ne[0]));
}

std::vector<float> decode_tensor(const Header& h, const uint8_t* file, const TensorInfo& t,
                                 int expert, std::vector<int64_t>* shape) {
  uint64_t rows = 0;
  first_row(h, file, t, expert, &rows);
  if (expert >= 0) {
    *shape = {int64_t(t.ne[1]), int64_t(t.ne[0])};
  } else {
    shape->clear();
    for (int d = t.n_dims - 1; d >= 0; --d) shape->push_back(int64_t(t.ne[d]));
  }
  std::vector<float> v(size_t(rows * t.ne[0]));
  decode_rows(h, file, t, expert, 0, int64_t(rows), v.data());
  return v;
}

}  // namespace cedar::gguf
