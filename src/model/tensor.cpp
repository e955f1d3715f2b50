// dtype names and sizes in the safetensors spelling (the release uses F8_E4M3, F8_E8M0, I8, BF16,
// F32; the rest are accepted so that a foreign checkpoint gets a "wrong dtype" error naming the
// tensor rather than a parse error).
#include "model/tensor.h"

namespace cedar {

namespace {
struct DTypeInfo {
  DType d;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::BF16, "BF16", 2},       {DType::F32, "F32", 4}, {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::F8_E8M0, "F8_E8M0", 1}, {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
    {DType::I32, "I32", 4},         {DType::I64, "I64", 8}, {DType::F16, "F16", 2},
    {DType::F64, "F64", 8},
};
}  // namespace

const char* dtype_name(DType d) {
  for (const auto& i : kDTypes)
    if (i.d == d) return i.name;
  return "?";
}

size_t dtype_size(DType d) {
  for (const auto& i : kDTypes)
    if (i.d == d) return i.size;
  return 0;
}

bool dtype_from_name(const std::string& s, DType* out) {
  for (const auto& i : kDTypes) {
    if (s == i.name) {
      if (out) *out = i.d;
      return true;
    }
  }
  return false;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace cedar
