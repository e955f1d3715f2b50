// GGUF v3 containers (../shared/spec/v41-gguf.md §1 and §8.1): the header, the metadata
// key/value pairs and the tensor table of one file, parsed from memory. Every count, length,
// offset and size is checked against the bytes that are there before it is used, so a hostile
// file is refused with a message naming the file and the key or tensor -- never read out of
// bounds, never allocated for on its own say-so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cedar::gguf {

// GGUFValueType (§1.2)
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value; strings and array elements are views into the parsed bytes.
struct Value {
  ValueType type = ValueType::kU8;
  ValueType elem = ValueType::kU8;     // arrays: the element type (never kArray)
  uint64_t count = 0;                  // arrays: number of elements
  const uint8_t* raw = nullptr;        // scalars: the payload; arrays of scalars: element 0
  std::string_view str;                // kString
  std::vector<std::string_view> strs;  // arrays of strings
};

// The ggml tensor types (§7.1) and their block shapes. Which of them cedar decodes is the weight
// source's business (model/gguf_source); the container only needs the sizes.
struct TypeInfo {
  uint32_t id;
  const char* name;
  int block_elems, block_bytes;
};
// nullptr for an id the table does not know
const TypeInfo* type_info(uint32_t id);
constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ5_0 = 6, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11,
                   kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ2_XXS = 16, kIQ1_S = 19, kIQ1_M = 29,
                   kBF16 = 30, kMXFP4 = 39, kI8 = 24;

struct TensorInfo {
  std::string_view name;
  int n_dims = 0;
  uint64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] varies fastest (the quantised dimension)
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the data section (of the shard that holds it)
  uint64_t bytes = 0;
  int shard = 0;  // a split model's file that holds it (gguf_files.h), 0-based
  uint64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

struct Header {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_start = 0;  // absolute offset of the data section in the file
  std::vector<std::pair<std::string_view, Value>> kv;  // in file order
  std::vector<TensorInfo> tensors;                     // in file order
  const Value* find(std::string_view key) const;
  const TensorInfo* tensor(std::string_view name) const;

  std::map<std::string_view, size_t> kv_index_, tensor_index_;
};

// Limits enforced before anything is allocated (§8.1 rule 3).
constexpr uint64_t kMaxString = uint64_t(1) << 30;
constexpr uint64_t kMaxArray = uint64_t(1) << 32;
constexpr size_t kMaxTensorName = 64;

// Whether `path` is a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

// Parses and validates the header of a GGUF file held in memory (`size` bytes: the whole file, so
// that the tensor data is checked against it). `label` (the path) starts every error. The views in
// the result point into `data`.
Header parse_header(const uint8_t* data, size_t size, const std::string& label);

// Typed reads of one key; each throws naming `label` and the key when it is absent (the first
// form only), has another type or does not fit. Integers accept any integer type (widened; a
// negative value for an unsigned read is refused); floats accept F32 and F64.
uint64_t get_uint(const Header& h, std::string_view key, const std::string& label);
bool has_key(const Header& h, std::string_view key);
int64_t get_int(const Header& h, std::string_view key, const std::string& label);
double get_float(const Header& h, std::string_view key, const std::string& label);
bool get_bool(const Header& h, std::string_view key, const std::string& label);
std::string_view get_string(const Header& h, std::string_view key, const std::string& label);
std::vector<int64_t> get_int_array(const Header& h, std::string_view key, const std::string& label);
std::vector<uint64_t> get_uint_array(const Header& h, std::string_view key,
                                     const std::string& label);
std::vector<double> get_float_array(const Header& h, std::string_view key,
                                    const std::string& label);
const std::vector<std::string_view>& get_string_array(const Header& h, std::string_view key,
                                                      const std::string& label);

}  // namespace cedar::gguf
