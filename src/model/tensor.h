// A read-only view of one checkpoint tensor: dtype, shape, and bytes in a memory-mapped shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cedar {

// The safetensors dtypes the release uses. F8_E8M0 is the UE8M0 scale format.
enum class DType { BF16, F32, F8_E4M3, F8_E8M0, I8, U8, I32, I64, F16, F64 };

const char* dtype_name(DType d);  // "BF16", "F8_E4M3", ... (safetensors spelling)
size_t dtype_size(DType d);       // bytes per element
bool dtype_from_name(const std::string& s, DType* out);
std::string shape_str(const std::vector<int64_t>& shape);  // "[2, 3]", for messages

struct TensorView {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapped file, dtype_size(dtype) * numel bytes
  size_t nbytes = 0;              // (a strided view: the bytes of its own elements only)
  // Bytes from one row (index of the first dimension) to the next when the rows are not dense:
  // ds4's native Engram rows keep a row's codes and scales together, so the codes and the scales
  // of a table are two strided views of the same bytes. 0: dense.
  size_t row_stride = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  int64_t dim(int i) const { return shape.at(size_t(i)); }
  // bytes from row r to row r + 1
  size_t stride() const {
    return row_stride      ? row_stride
           : shape.empty() ? nbytes
                           : size_t(numel() / shape[0]) * dtype_size(dtype);
  }
  // the first byte of row r
  const uint8_t* row(int64_t r) const { return data + size_t(r) * stride(); }
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data);
  }
};

}  // namespace cedar
