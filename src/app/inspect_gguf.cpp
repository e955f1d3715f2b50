#include "app/inspect_gguf.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "base/npy.h"
#include "model/checkpoint.h"
#include "model/gguf.h"
#include "model/gguf_decode.h"
#include "model/gguf_dialect.h"
#include "model/gguf_files.h"

namespace cedar::app {

namespace {

// ds4's native Engram table as the release's [rows, cols] values
std::vector<float> decode_engram_rows(const gguf::Files& files, const gguf::TensorInfo& t,
                                      std::vector<int64_t>* shape) {
  const int64_t rows = int64_t(t.ne[1]), cols = int64_t(t.ne[0]) * 32 / 33;
  if (t.n_dims != 2 || cols + cols / 32 != int64_t(t.ne[0]))
    throw std::runtime_error("tensor '" + std::string(t.name) + "' is not of native Engram rows");
  *shape = {rows, cols};
  std::vector<float> v(size_t(rows * cols));
  const uint8_t* base = files.data(t);
  for (int64_t r = 0; r < rows; ++r)
    gguf::decode_engram_row(base + r * int64_t(t.ne[0]), cols, v.data() + r * cols);
  return v;
}

}  // namespace

int inspect_gguf(const std::string& path, bool as_json, const std::string& tensor,
                 const std::string& out) {
  const gguf::Files files = gguf::open_files(path);
  const gguf::Header& h = files.merged;
  if (!tensor.empty()) {
    if (out.empty()) throw std::runtime_error("--tensor needs --out F.npy");
    int expert = -1;
    const gguf::Dialect dialect = gguf::detect_dialect(h).dialect;
    std::string name = gguf::gguf_tensor_name(tensor, &expert, dialect);
    if (name.empty()) name = tensor;  // a GGUF name
    const gguf::TensorInfo* t = h.tensor(name);
    if (!t) throw std::runtime_error(path + ": no tensor '" + name + "'");
    std::vector<int64_t> shape;
    const std::vector<float> v =
        dialect == gguf::Dialect::kB && t->type == gguf::kI8 && name.ends_with("engram_embd.weight")
            ? decode_engram_rows(files, *t, &shape)
            : gguf::decode_tensor(files.header(*t), files.file(*t), *t, expert, &shape);
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
  Checkpoint::LoadStats load;
  try {
    const auto ck = Checkpoint::open(path);  // the config, every tensor placed and validated
    cfg = ck->config();
    load = ck->load_stats();
  } catch (const std::exception& e) {
    config_error = e.what();
  }
  if (as_json) {
    nlohmann::ordered_json j = {{"file", path},
                                {"dialect", d.name},
                                {"dialect_detail", d.detail},
                                {"alignment", h.alignment},
                                {"keys", h.kv.size()},
                                {"tensors", h.tensors.size()},
                                {"shards", files.files.size()}};
    for (const auto& [type, c] : census)
      j["census"][type] = {{"tensors", c.first}, {"bytes", c.second}};
    if (config_error.empty()) {
      j["config"] = cfg.to_json();
      j["load"] = {{"in_place", load.in_place},
                   {"reencoded", load.reencoded},
                   {"reencoded_bytes", load.reencoded_bytes},
                   {"block_weights", load.blocks},
                   {"block_bytes", load.block_bytes},
                   {"inexact_values", load.inexact_values}};
    } else
      j["config_error"] = config_error;
    std::printf("%s\n", j.dump(2).c_str());
    return config_error.empty() ? 0 : 1;
  }
  std::printf("%s: GGUF v%u, %zu keys, %zu tensors, alignment %llu", path.c_str(), h.version,
              h.kv.size(), h.tensors.size(), (unsigned long long)h.alignment);
  if (files.files.size() > 1) std::printf(", %zu shards", files.files.size());
  std::printf("\n");
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
  std::printf(
      "load: %lld tensors in place, %lld weights computed in place as GGUF blocks (%.3f MB), "
      "%lld re-encoded into the release formats (%.3f MB), %lld values not exactly "
      "representable (%s)\n",
      (long long)load.in_place, (long long)load.blocks, double(load.block_bytes) / 1e6,
      (long long)load.reencoded, double(load.reencoded_bytes) / 1e6, (long long)load.inexact_values,
      load.inexact_values ? "rounded as the release's quantizers round"
                          : "none: every value kept exactly");
  return 0;
}

}  // namespace cedar::app
