#include "model/gguf_decode.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/ggml_blocks.h"
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
    case 16:  // IQ2_XXS
    case 19:  // IQ1_S
    case 29:  // IQ1_M
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
  auto half = [](uint16_t h) { return f16_to_f32(h); };
  // the block types: kernels/ggml_blocks.h (shared with the kernel families)
  if (ggml::with_block_type(
          type, [&](auto T) { ggml::decode_row<decltype(T)::value>(src, n, dst, half); }))
    return;
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
    }
  }
}

bool engram_row_valid(const uint8_t* row, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c)
    if ((row[c] & 0x7f) == 0x7f) return false;
  for (int64_t j = 0; j < cols / 32; ++j)
    if (row[cols + j] == 255) return false;
  return true;
}

void decode_engram_row(const uint8_t* row, int64_t cols, float* dst) {
  for (int64_t c = 0; c < cols; ++c)
    dst[c] = e4m3_to_f32(row[c]) * ue8m0_to_f32(row[cols + c / 32]);
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
