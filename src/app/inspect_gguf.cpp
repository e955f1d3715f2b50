#include "app/inspect_gguf.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "base/mapped_file.h"
#include "base/npy.h"
#include "model/gguf.h"
#include "model/gguf_decode.h"
#include "model/gguf_dialect.h"

namespace cedar::app {

namespace {

// One tensor's values (an expert's slice when expert >= 0), fp32, the release shape.
std::vector<float> decode_tensor(const gguf::Header& h, const uint8_t* file,
                                 const gguf::TensorInfo& t, int expert,
                                 std::vector<int64_t>* shape) {
  const gguf::TypeInfo* ti = gguf::type_info(t.type);
  if (!gguf::decodable(t.type))
    throw std::runtime_error("tensor '" + std::string(t.name) + "' is " + ti->name +
                             ", which cedar does not decode yet");
  uint64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
  const uint64_t row_bytes = t.ne[0] / uint64_t(ti->block_elems) * uint64_t(ti->block_bytes);
  const uint8_t* src = file + h.data_start + t.offset;
  if (expert >= 0) {
    if (t.n_dims != 3 || uint64_t(expert) >= t.ne[2])
      throw std::runtime_error("tensor '" + std::string(t.name) + "' has no expert " +
                               std::to_string(expert));
    rows = t.ne[1];
    src += uint64_t(expert) * rows * row_bytes;
    *shape = {int64_t(t.ne[1]), int64_t(t.ne[0])};
  } else {
    shape->clear();
    for (int d = t.n_dims - 1; d >= 0; --d) shape->push_back(int64_t(t.ne[d]));
  }
  std::vector<float> v(size_t(rows * t.ne[0]));
  for (uint64_t r = 0; r < rows; ++r)
    gguf::decode_row(t.type, src + r * row_bytes, int64_t(t.ne[0]), v.data() + r * t.ne[0]);
  return v;
}

}  // namespace

bool is_gguf_path(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) return false;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const bool ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  std::fclose(f);
  return ok;
}

int inspect_gguf(const std::string& path, bool as_json, const std::string& tensor,
                 const std::string& out) {
  const auto file = MappedFile::open(path);
  const gguf::Header h = gguf::parse_header(file->data(), file->size(), path);
  if (!tensor.empty()) {
    if (out.empty()) throw std::runtime_error("--tensor needs --out F.npy");
    int expert = -1;
    std::string name = gguf::gguf_tensor_name(tensor, &expert);
    if (name.empty()) name = tensor;  // a GGUF name
    const gguf::TensorInfo* t = h.tensor(name);
    if (!t) throw std::runtime_error(path + ": no tensor '" + name + "'");
    std::vector<int64_t> shape;
    const std::vector<float> v = decode_tensor(h, file->data(), *t, expert, &shape);
    write_npy_f32(out, v.data(), shape);
    std::printf("wrote %s: %s%s, %s\n", out.c_str(), name.c_str(),
                expert >= 0 ? (" expert " + std::to_string(expert)).c_str() : "",
                gguf::type_info(t->type)->name);
    return 0;
  }
  const gguf::DialectInfo d = gguf::detect_dialect(h);
  std::map<std::string, std::pair<int, uint64_t>> census;  // type -> tensors, bytes
  for (const gguf::TensorInfo& t : h.tensors) {
    auto& c = census[gguf::type_info(t.type)->name];
    ++c.first;
    c.second += t.bytes;
  }
  std::string config_error;
  ModelConfig cfg;
  try {
    cfg = gguf::config_from_gguf(h, path);
  } catch (const std::exception& e) {
    config_error = e.what();
  }
  if (as_json) {
    nlohmann::ordered_json j = {{"file", path},
                                {"dialect", d.name},
                                {"dialect_detail", d.detail},
                                {"alignment", h.alignment},
                                {"keys", h.kv.size()},
                                {"tensors", h.tensors.size()}};
    for (const auto& [type, c] : census)
      j["census"][type] = {{"tensors", c.first}, {"bytes", c.second}};
    if (config_error.empty())
      j["config"] = cfg.to_json();
    else
      j["config_error"] = config_error;
    std::printf("%s\n", j.dump(2).c_str());
    return config_error.empty() ? 0 : 1;
  }
  std::printf("%s: GGUF v%u, %zu keys, %zu tensors, alignment %llu\n", path.c_str(), h.version,
              h.kv.size(), h.tensors.size(), (unsigned long long)h.alignment);
  std::printf("dialect: %s (%s)\n", d.name.empty() ? "unknown" : d.name.c_str(), d.detail.c_str());
  std::printf("tensor types:\n");
  for (const auto& [type, c] : census)
    std::printf("  %-8s %5d tensors %14.3f MB\n", type.c_str(), c.first, double(c.second) / 1e6);
  if (!config_error.empty()) {
    std::printf("not loadable: %s\n", config_error.c_str());
    return 1;
  }
  std::printf(
      "model: %d layers, hidden %d, %d heads x %d, %d of %d routed experts, vocabulary %lld\n",
      cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim,
      cfg.num_experts_per_tok, cfg.n_routed_experts, (long long)cfg.vocab_size);
  return 0;
}

}  // namespace cedar::app
