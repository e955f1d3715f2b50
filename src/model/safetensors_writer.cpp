#include "model/safetensors_writer.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace cedar {

std::string safetensors_header(const std::vector<SafetensorsOutput>& tensors,
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

SafetensorsStreamWriter::SafetensorsStreamWriter(const std::string& path,
                                                 const std::vector<SafetensorsOutput>& tensors,
                                                 const std::map<std::string, std::string>& metadata)
    : path_(path) {
  const std::string header = safetensors_header(tensors, metadata);
  for (const auto& t : tensors) sizes_.push_back(t.nbytes);
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) throw std::runtime_error("cannot create " + path);
  // many tensors are a few hundred bytes: a large buffer keeps the writes large
  std::setvbuf(f_, nullptr, _IOFBF, size_t(4) << 20);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  put(len, 8);
  put(header.data(), header.size());
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (f_) std::fclose(f_);  // not finished (an exception): the partial file is left as it is
}

void SafetensorsStreamWriter::put(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f_) != n) throw std::runtime_error("write failed: " + path_);
}

void SafetensorsStreamWriter::append(const uint8_t* data, size_t nbytes) {
  if (!f_ || next_ >= sizes_.size())
    throw std::runtime_error("safetensors: more tensors appended than declared: " + path_);
  if (nbytes != sizes_[next_])
    throw std::runtime_error("safetensors: tensor " + std::to_string(next_) + " of " + path_ +
                             " has " + std::to_string(nbytes) + " bytes, the header declares " +
                             std::to_string(sizes_[next_]));
  put(data, nbytes);
  ++next_;
}

void SafetensorsStreamWriter::finish() {
  if (!f_) throw std::runtime_error("safetensors: finished twice: " + path_);
  if (next_ != sizes_.size())
    throw std::runtime_error("safetensors: " + std::to_string(sizes_.size() - next_) +
                             " declared tensors not written: " + path_);
  std::FILE* raw = f_;
  f_ = nullptr;
  if (std::fclose(raw) != 0) throw std::runtime_error("write failed (close): " + path_);
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsOutput>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  SafetensorsStreamWriter out(path, tensors, metadata);
  for (const auto& t : tensors) out.append(t.data, t.nbytes);
  out.finish();
}

}  // namespace cedar
