#include "model/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "base/file_reader.h"

namespace cedar::gguf {

namespace {

constexpr TypeInfo kTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210},
    {16, "IQ2_XXS", 256, 66}, {19, "IQ1_S", 256, 50}, {24, "I8", 1, 1},
    {25, "I16", 1, 2},        {26, "I32", 1, 4},      {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {39, "MXFP4", 32, 17},  {41, "Q1_0", 128, 18},
};

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw std::runtime_error(label + ": " + what);
}

// A bounds-checked cursor over the header bytes.
struct Reader {
  const uint8_t* p;
  size_t size, pos = 0;
  const std::string& label;

  void need(uint64_t n, const char* what) {
    if (n > size - pos)
      fail(label, std::string("truncated: ") + what + " needs " + std::to_string(n) +
                      " bytes at offset " + std::to_string(pos) + ", the file has " +
                      std::to_string(size - pos) + " more");
  }
  template <class T>
  T scalar(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string_view string(const char* what) {
    const uint64_t n = scalar<uint64_t>(what);
    if (n > kMaxString)
      fail(label, std::string(what) + ": a string of " + std::to_string(n) + " bytes (limit " +
                      std::to_string(kMaxString) + ")");
    need(n, what);
    std::string_view s(reinterpret_cast<const char*>(p + pos), size_t(n));
    pos += size_t(n);
    return s;
  }
};

int scalar_bytes(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
      return 8;
    default:
      return 0;
  }
}

bool known_type(uint32_t t) { return t <= uint32_t(ValueType::kF64); }

Value read_value(Reader& r, ValueType t, std::string_view key) {
  const std::string what = "value of '" + std::string(key) + "'";
  Value v;
  v.type = t;
  if (t == ValueType::kString) {
    v.str = r.string(what.c_str());
  } else if (t == ValueType::kArray) {
    const uint32_t et = r.scalar<uint32_t>(what.c_str());
    if (!known_type(et) || ValueType(et) == ValueType::kArray)
      fail(r.label, "key '" + std::string(key) + "': array of unsupported element type " +
                        std::to_string(et));
    v.elem = ValueType(et);
    v.count = r.scalar<uint64_t>(what.c_str());
    if (v.count > kMaxArray)
      fail(r.label, "key '" + std::string(key) + "': an array of " + std::to_string(v.count) +
                        " elements (limit " + std::to_string(kMaxArray) + ")");
    if (v.elem == ValueType::kString) {
      // every string needs at least its 8-byte length: bound the count before reserving
      r.need(v.count * 8, what.c_str());
      v.strs.reserve(size_t(v.count));
      for (uint64_t i = 0; i < v.count; ++i) v.strs.push_back(r.string(what.c_str()));
    } else {
      const uint64_t bytes = v.count * uint64_t(scalar_bytes(v.elem));
      r.need(bytes, what.c_str());
      v.raw = r.p + r.pos;
      r.pos += size_t(bytes);
    }
  } else {
    r.need(uint64_t(scalar_bytes(t)), what.c_str());
    v.raw = r.p + r.pos;
    r.pos += size_t(scalar_bytes(t));
  }
  return v;
}

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& label, std::string_view name) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a)
    fail(label, "tensor '" + std::string(name) + "': size overflows 64 bits");
  return a * b;
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

// an integer element: its value as int64 when it fits (`big` set for a U64 above INT64_MAX)
int64_t int_at(ValueType t, const uint8_t* p, bool* big) {
  *big = false;
  switch (t) {
    case ValueType::kU8:
      return load<uint8_t>(p);
    case ValueType::kI8:
      return load<int8_t>(p);
    case ValueType::kU16:
      return load<uint16_t>(p);
    case ValueType::kI16:
      return load<int16_t>(p);
    case ValueType::kU32:
      return load<uint32_t>(p);
    case ValueType::kI32:
      return load<int32_t>(p);
    case ValueType::kI64:
      return load<int64_t>(p);
    default: {  // kU64
      const uint64_t u = load<uint64_t>(p);
      *big = u > uint64_t(std::numeric_limits<int64_t>::max());
      return int64_t(u & uint64_t(std::numeric_limits<int64_t>::max()));
    }
  }
}

const Value& must_find(const Header& h, std::string_view key, const std::string& label) {
  const Value* v = h.find(key);
  if (!v) fail(label, "key not found: " + std::string(key));
  return *v;
}

[[noreturn]] void wrong_type(std::string_view key, const Value& v, const char* want,
                             const std::string& label) {
  fail(label, "key '" + std::string(key) + "' is " + value_type_name(v.type) +
                  (v.type == ValueType::kArray ? std::string(" of ") + value_type_name(v.elem)
                                               : std::string()) +
                  ", expected " + want);
}

}  // namespace

const char* value_type_name(ValueType t) {
  static const char* n[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                            "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  return uint32_t(t) <= uint32_t(ValueType::kF64) ? n[uint32_t(t)] : "unknown";
}

const TypeInfo* type_info(uint32_t id) {
  for (const TypeInfo& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

const Value* Header::find(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv[it->second].second;
}

const TensorInfo* Header::tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

Header parse_header(const uint8_t* data, size_t size, const std::string& label) {
  Reader r{data, size, 0, label};
  Header h;
  r.need(4, "magic");
  if (std::memcmp(data, "GGUF", 4) != 0) fail(label, "not a GGUF file (no 'GGUF' magic)");
  r.pos = 4;
  h.version = r.scalar<uint32_t>("version");
  if (h.version == 0x03000000u || h.version == 0x02000000u)
    fail(label, "a big-endian GGUF file (cedar reads little-endian files only)");
  if (h.version != 3) fail(label, "GGUF version " + std::to_string(h.version) + " (expected 3)");
  const uint64_t n_tensors = r.scalar<uint64_t>("tensor count");
  const uint64_t n_kv = r.scalar<uint64_t>("key/value count");
  // a key/value pair needs at least 8 + 4 bytes, a tensor entry 8 + 4 + 8 + 4 + 8
  if (n_kv > (size - r.pos) / 12)
    fail(label, "key/value count " + std::to_string(n_kv) + " does not fit in the file");
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string_view key = r.string("key");
    const uint32_t t = r.scalar<uint32_t>("value type");
    if (!known_type(t))
      fail(label, "key '" + std::string(key) + "': unknown value type " + std::to_string(t));
    if (!h.kv_index_.emplace(key, h.kv.size()).second)
      fail(label, "duplicate key '" + std::string(key) + "'");
    h.kv.emplace_back(key, read_value(r, ValueType(t), key));
  }
  if (const Value* a = h.find("general.alignment")) {
    if (a->type != ValueType::kU32) fail(label, "general.alignment must be UINT32");
    h.alignment = load<uint32_t>(a->raw);
    if (h.alignment == 0 || h.alignment % 8 != 0)
      fail(label, "general.alignment " + std::to_string(h.alignment) +
                      " (must be a non-zero multiple of 8)");
  }
  if (n_tensors > (size - r.pos) / 32)
    fail(label, "tensor count " + std::to_string(n_tensors) + " does not fit in the file");
  h.tensors.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = r.string("tensor name");
    if (t.name.empty() || t.name.size() > kMaxTensorName)
      fail(label, "tensor " + std::to_string(i) + ": name of " + std::to_string(t.name.size()) +
                      " bytes (1.." + std::to_string(kMaxTensorName) + ")");
    const std::string name(t.name);
    t.n_dims = int(r.scalar<uint32_t>("tensor dimension count"));
    if (t.n_dims < 1 || t.n_dims > 4)
      fail(label, "tensor '" + name + "': " + std::to_string(t.n_dims) + " dimensions (1..4)");
    for (int d = 0; d < t.n_dims; ++d) {
      t.ne[d] = r.scalar<uint64_t>("tensor shape");
      if (t.ne[d] == 0) fail(label, "tensor '" + name + "': a zero dimension");
    }
    t.type = r.scalar<uint32_t>("tensor type");
    t.offset = r.scalar<uint64_t>("tensor offset");
    const TypeInfo* ti = type_info(t.type);
    if (!ti) fail(label, "tensor '" + name + "': unknown ggml type id " + std::to_string(t.type));
    if (t.ne[0] % uint64_t(ti->block_elems) != 0)
      fail(label, "tensor '" + name + "': ne0 = " + std::to_string(t.ne[0]) +
                      " is not a multiple of " + ti->name + "'s block of " +
                      std::to_string(ti->block_elems));
    uint64_t rows = 1;
    for (int d = 1; d < 4; ++d) rows = checked_mul(rows, t.ne[d], label, t.name);
    t.bytes = checked_mul(
        checked_mul(t.ne[0] / uint64_t(ti->block_elems), uint64_t(ti->block_bytes), label, t.name),
        rows, label, t.name);
    if (t.offset % h.alignment != 0)
      fail(label, "tensor '" + name + "': offset " + std::to_string(t.offset) +
                      " is not a multiple of the alignment " + std::to_string(h.alignment));
    if (!h.tensor_index_.emplace(t.name, h.tensors.size()).second)
      fail(label, "duplicate tensor '" + name + "'");
    h.tensors.push_back(t);
  }
  h.data_start = (uint64_t(r.pos) + h.alignment - 1) / h.alignment * h.alignment;
  const uint64_t data_size = h.data_start <= size ? size - h.data_start : 0;
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : h.tensors) {
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      fail(label, "tensor '" + std::string(t.name) + "': bytes [" + std::to_string(t.offset) +
                      ", " + std::to_string(t.offset + t.bytes) +
                      ") of the data section run past the end of the file (" +
                      std::to_string(data_size) + " data bytes)");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail(label, "tensors '" + std::string(by_offset[i - 1]->name) + "' and '" +
                      std::string(by_offset[i]->name) + "' overlap");
  return h;
}

bool has_key(const Header& h, std::string_view key) { return h.find(key) != nullptr; }

int64_t get_int(const Header& h, std::string_view key, const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (!is_integer(v.type)) wrong_type(key, v, "an integer", label);
  bool big = false;
  const int64_t x = int_at(v.type, v.raw, &big);
  if (big) fail(label, "key '" + std::string(key) + "': value does not fit in 63 bits");
  return x;
}

uint64_t get_uint(const Header& h, std::string_view key, const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (!is_integer(v.type)) wrong_type(key, v, "an integer", label);
  if (v.type == ValueType::kU64) return load<uint64_t>(v.raw);
  bool big = false;  // (only a U64 can be)
  const int64_t x = int_at(v.type, v.raw, &big);
  if (x < 0) fail(label, "key '" + std::string(key) + "': negative value " + std::to_string(x));
  return uint64_t(x);
}

double get_float(const Header& h, std::string_view key, const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (v.type == ValueType::kF32) return load<float>(v.raw);
  if (v.type == ValueType::kF64) return load<double>(v.raw);
  wrong_type(key, v, "FLOAT32 or FLOAT64", label);
}

bool get_bool(const Header& h, std::string_view key, const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (v.type != ValueType::kBool) wrong_type(key, v, "BOOL", label);
  const uint8_t b = *v.raw;
  if (b > 1) fail(label, "key '" + std::string(key) + "': BOOL holds " + std::to_string(b));
  return b != 0;
}

std::string_view get_string(const Header& h, std::string_view key, const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (v.type != ValueType::kString) wrong_type(key, v, "STRING", label);
  return v.str;
}

std::vector<int64_t> get_int_array(const Header& h, std::string_view key,
                                   const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (v.type != ValueType::kArray || !is_integer(v.elem))
    wrong_type(key, v, "an array of integers", label);
  std::vector<int64_t> out(size_t(v.count));
  const int w = scalar_bytes(v.elem);
  for (uint64_t i = 0; i < v.count; ++i) {
    bool big = false;
    out[size_t(i)] = int_at(v.elem, v.raw + i * uint64_t(w), &big);
    if (big)
      fail(label, "key '" + std::string(key) + "': element " + std::to_string(i) +
                      " does not fit in 63 bits");
  }
  return out;
}

std::vector<uint64_t> get_uint_array(const Header& h, std::string_view key,
                                     const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (v.type != ValueType::kArray || !is_integer(v.elem))
    wrong_type(key, v, "an array of integers", label);
  std::vector<uint64_t> out(size_t(v.count));
  const int w = scalar_bytes(v.elem);
  for (uint64_t i = 0; i < v.count; ++i) {
    const uint8_t* p = v.raw + i * uint64_t(w);
    if (v.elem == ValueType::kU64) {
      out[size_t(i)] = load<uint64_t>(p);
      continue;
    }
    bool big = false;
    const int64_t x = int_at(v.elem, p, &big);
    if (x < 0)
      fail(label, "key '" + std::string(key) + "': element " + std::to_string(i) +
                      " is negative (" + std::to_string(x) + ")");
    out[size_t(i)] = uint64_t(x);
  }
  return out;
}

std::vector<double> get_float_array(const Header& h, std::string_view key,
                                    const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (v.type != ValueType::kArray || (v.elem != ValueType::kF32 && v.elem != ValueType::kF64))
    wrong_type(key, v, "an array of floats", label);
  std::vector<double> out(size_t(v.count));
  for (uint64_t i = 0; i < v.count; ++i)
    out[size_t(i)] = v.elem == ValueType::kF32 ? double(load<float>(v.raw + 4 * i))
                                               : load<double>(v.raw + 8 * i);
  return out;
}

const std::vector<std::string_view>& get_string_array(const Header& h, std::string_view key,
                                                      const std::string& label) {
  const Value& v = must_find(h, key, label);
  if (v.type != ValueType::kArray || v.elem != ValueType::kString)
    wrong_type(key, v, "an array of strings", label);
  return v.strs;
}

bool is_gguf_file(const std::string& path) {
  try {
    uint64_t size = 0;
    UniqueFd fd = open_regular_file(path, &size);
    if (size < 4) return false;
    uint8_t magic[4];
    FileReader::adopt(std::move(fd), size, path)->read(0, 4, magic);
    return std::memcmp(magic, "GGUF", 4) == 0;
  } catch (const std::runtime_error&) {
    return false;  // absent, unreadable or not a regular file
  }
}

}  // namespace cedar::gguf
