#include "model/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "base/file_reader.h"
#include "base/json_limits.h"
#include "base/mapped_file.h"

namespace cedar {

using nlohmann::json;

namespace {

// A header larger than this is not a real checkpoint header (the release's largest is ~2 MB);
// the safetensors format itself caps it at 100 MB.
constexpr uint64_t kMaxHeaderLen = 100ull << 20;

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw std::runtime_error(label + ": " + what);
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size,
                                           const std::string& label) {
  SafetensorsHeader h;
  if (size < 8)
    fail(label, "truncated safetensors file (" + std::to_string(size) +
                    " bytes, shorter than the 8-byte header length)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];  // little-endian u64
  if (n > size - 8)
    fail(label, "safetensors header length " + std::to_string(n) + " runs past the end of the " +
                    "file (" + std::to_string(size) +
                    " bytes): truncated or not a safetensors "
                    "file");
  if (n > kMaxHeaderLen)
    fail(label, "safetensors header length " + std::to_string(n) + " is implausibly large");
  h.header_len = n;
  h.data_start = 8 + n;
  const uint64_t data_size = size - h.data_start;

  json j;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data + 8), size_t(n));
    if (json_nesting_depth(text) > kMaxJsonDepth)
      fail(label, "safetensors header JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                      " levels");
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(label, std::string("invalid safetensors header JSON: ") + e.what());
  }
  if (!j.is_object()) fail(label, "safetensors header is not a JSON object");

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const std::string tl = label + ": tensor '" + name + "'";
    const json& e = it.value();
    if (!e.is_object()) fail(tl, "header entry is not an object");
    SafetensorsEntry t;
    t.name = name;
    if (!e.contains("dtype") || !e["dtype"].is_string()) fail(tl, "missing or non-string dtype");
    if (!dtype_from_name(e["dtype"].get<std::string>(), &t.dtype))
      fail(tl, "unknown dtype '" + e["dtype"].get<std::string>() + "'");
    if (!e.contains("shape") || !e["shape"].is_array()) fail(tl, "missing or non-list shape");
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail(tl, "shape entries must be non-negative integers");
      uint64_t v = uint64_t(d.get<int64_t>());
      if (v != 0 && numel > (uint64_t(1) << 62) / v) fail(tl, "shape is too large");
      numel *= v;
      t.shape.push_back(int64_t(v));
    }
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2 || !e["data_offsets"][0].is_number_unsigned() ||
        !e["data_offsets"][1].is_number_unsigned())
      fail(tl, "data_offsets must be a list of two non-negative integers");
    t.begin = e["data_offsets"][0].get<uint64_t>();
    t.end = e["data_offsets"][1].get<uint64_t>();
    if (t.begin > t.end)
      fail(tl, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                   "] are reversed");
    if (t.end > data_size)
      fail(tl, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                   "] run past the end of the file (data section is " + std::to_string(data_size) +
                   " bytes): truncated file?");
    const uint64_t want = numel * dtype_size(t.dtype);
    if (t.end - t.begin != want)
      fail(tl, "holds " + std::to_string(t.end - t.begin) + " bytes but " + dtype_name(t.dtype) +
                   " " + shape_str(t.shape) + " needs " + std::to_string(want));
    h.tensors.push_back(std::move(t));
  }

  // No two tensors may share bytes.
  std::vector<const SafetensorsEntry*> by_off;
  for (const auto& t : h.tensors)
    if (t.end > t.begin) by_off.push_back(&t);
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_off.size(); ++i)
    if (by_off[i]->begin < by_off[i - 1]->end)
      fail(label, "tensors '" + by_off[i - 1]->name + "' and '" + by_off[i]->name +
                      "' have overlapping data_offsets");
  return h;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->file_ = MappedFile::open(path);
  f->make_views(f->file_->data(), f->file_->size());
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_memory(std::vector<uint8_t> bytes,
                                                              const std::string& label) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = label;
  f->bytes_ = std::move(bytes);
  f->make_views(f->bytes_.data(), f->bytes_.size());
  return f;
}

void SafetensorsFile::make_views(const uint8_t* data, size_t size) {
  SafetensorsHeader h = parse_safetensors_header(data, size, path_);
  const uint8_t* base = data + h.data_start;
  views_.reserve(h.tensors.size());
  for (auto& t : h.tensors) {
    TensorView v;
    v.name = std::move(t.name);
    v.dtype = t.dtype;
    v.shape = std::move(t.shape);
    v.data = base + t.begin;
    v.nbytes = size_t(t.end - t.begin);
    views_.push_back(std::move(v));
  }
}

SafetensorsFile::~SafetensorsFile() = default;
const std::string& SafetensorsFile::path() const { return path_; }
std::unique_ptr<MappedFile> SafetensorsFile::take_mapping() { return std::move(file_); }

std::map<std::string, std::string> read_safetensors_index(const std::string& path) {
  // the release's index is 8 MiB (96,085 names); the header limit bounds it generously
  const std::string text = read_regular_file(path, kMaxHeaderLen, "safetensors index");
  json j;
  try {
    if (json_nesting_depth(text) > kMaxJsonDepth)
      fail(path, "JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(path, "no \"weight_map\" object (expected {\"weight_map\": {tensor: shard file}})");
  std::map<std::string, std::string> m;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) fail(path, "weight_map['" + it.key() + "'] is not a file name");
    std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      fail(path, "weight_map['" + it.key() + "'] = '" + file +
                     "' is not a plain file name in the model directory");
    m[it.key()] = file;
  }
  return m;
}

}  // namespace cedar
