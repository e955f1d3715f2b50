#include "model/safetensors_writer.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace cedar {

std::string safetensors_header(const std::vector<SafetensorsEntry>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw std::runtime_error("safetensors: invalid tensor name '" + t.name + "'");
    if (!seen.insert(t.name).second)
      throw std::runtime_error("safetensors: duplicate tensor name '" + t.name + "'");
    uint64_t numel = 1;
    for (auto d : t.shape) {
      if (d < 0) throw std::runtime_error("safetensors: negative dimension in '" + t.name + "'");
      numel *= uint64_t(d);
    }
    if (numel * dtype_size(t.dtype) != t.nbytes)
      throw std::runtime_error("safetensors: tensor '" + t.name + "' has " +
                               std::to_string(t.nbytes) + " bytes, its dtype and shape need " +
                               std::to_string(numel * dtype_size(t.dtype)));
    h[t.name] = {{"dtype", dtype_name(t.dtype)},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string s = h.dump();
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = safetensors_header(tensors, metadata);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw std::runtime_error("cannot create " + path);
  auto put = [&](const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f.get()) != n) throw std::runtime_error("write failed: " + path);
  };
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  put(len, 8);
  put(header.data(), header.size());
  for (const auto& t : tensors) put(t.data, t.nbytes);
  FILE* raw = f.release();
  if (std::fclose(raw) != 0) throw std::runtime_error("write failed (close): " + path);
}

}  // namespace cedar
