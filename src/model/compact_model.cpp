#include "model/compact_model.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/gzip_file.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/safetensors_writer.h"

namespace cedar {

namespace fs = std::filesystem;

namespace {

// The most a compact.safetensors.gz may inflate to: far above any compact model (the default is
// 26 MB), far below what would exhaust memory.
constexpr size_t kMaxCompactBytes = size_t(4) << 30;

const TensorView* lookup(const SafetensorsFile& f, const std::string& name) {
  for (const TensorView& v : f.tensors())
    if (v.name == name) return &v;
  return nullptr;
}

const TensorView& find(const SafetensorsFile& f, const std::string& name, DType dt,
                       const std::vector<int64_t>& shape) {
  const TensorView* v = lookup(f, name);
  if (!v) throw std::runtime_error(f.path() + ": missing tensor " + name);
  if (v->dtype != dt || v->shape != shape)
    throw std::runtime_error(f.path() + ": tensor " + name + " has the wrong dtype or shape");
  return *v;
}

// rows [n+1, D] -> [V, D]: row ids[i] <- rows[i], every other row <- rows[n].
std::vector<uint8_t> expand_rows(const TensorView& rows, const std::vector<int32_t>& ids,
                                 int64_t vocab) {
  const size_t row_bytes = size_t(rows.dim(1)) * 2;
  const uint8_t* other = rows.data + ids.size() * row_bytes;
  std::vector<uint8_t> out(size_t(vocab) * row_bytes);
  for (int64_t v = 0; v < vocab; ++v) std::memcpy(&out[size_t(v) * row_bytes], other, row_bytes);
  for (size_t i = 0; i < ids.size(); ++i)
    std::memcpy(&out[size_t(ids[i]) * row_bytes], rows.data + i * row_bytes, row_bytes);
  return out;
}

std::vector<int32_t> read_used_ids(const SafetensorsFile& f, int64_t vocab) {
  const TensorView* t = lookup(f, "compact.used_ids");
  if (!t || t->dtype != DType::I32 || t->shape.size() != 1)
    throw std::runtime_error(f.path() + ": missing compact.used_ids (I32 [n])");
  std::vector<int32_t> ids(size_t(t->numel()));
  std::memcpy(ids.data(), t->data, ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab || (i && ids[i] <= ids[i - 1]))
      throw std::runtime_error(f.path() +
                               ": compact.used_ids must be strictly increasing ids in "
                               "[0, vocab_size)");
  if (ids.empty() || int64_t(ids.size()) >= vocab)
    throw std::runtime_error(f.path() + ": compact.used_ids must leave at least one id unused");
  return ids;
}

// compact.safetensors, or compact.safetensors.gz inflated in memory (not both: one would be stale)
std::unique_ptr<SafetensorsFile> open_compact(const fs::path& dir) {
  const fs::path plain = dir / "compact.safetensors", gz = dir / "compact.safetensors.gz";
  const bool has_plain = fs::exists(plain), has_gz = fs::exists(gz);
  if (has_plain && has_gz)
    throw std::runtime_error(dir.string() +
                             ": holds both compact.safetensors and compact.safetensors.gz");
  if (!has_gz) return SafetensorsFile::open(plain.string());
  return SafetensorsFile::from_memory(read_gzip_file(gz.string(), kMaxCompactBytes), gz.string());
}

}  // namespace

void expand_compact_model(const std::string& compact_dir, const std::string& tokenizer_json,
                          const std::string& out_dir) {
  const fs::path src(compact_dir);
  const ModelConfig cfg = ModelConfig::from_file((src / "config.json").string());
  const auto file = open_compact(src);
  const int64_t V = cfg.vocab_size, D = cfg.hidden_size;
  const std::vector<int32_t> ids = read_used_ids(*file, V);
  const int64_t n = int64_t(ids.size());
  const TensorView& emb = find(*file, "compact.embed_rows", DType::BF16, {n + 1, D});
  const TensorView& head = find(*file, "compact.head_rows", DType::BF16, {n + 1, D});
  // (full name, its compact rows): the vocabulary-sized tables, each stored as used + other rows
  std::vector<std::pair<std::string, const TensorView*>> tables = {{"embed.weight", &emb},
                                                                   {"head.weight", &head}};
  if (cfg.num_nextn_predict_layers > 0) {
    // a trained drafter's Markov tables (mtp.{last}.markov_head.*) are compact too, when present
    const std::string last = "mtp." + std::to_string(cfg.num_nextn_predict_layers - 1) + ".";
    const int64_t r = cfg.dspark_markov_rank;
    for (const auto& [full, rows] : {std::pair{"embed", "compact.markov_embed_rows"},
                                     std::pair{"head", "compact.markov_head_rows"}})
      if (lookup(*file, rows))
        tables.push_back({last + "markov_head." + full + ".weight",
                          &find(*file, rows, DType::BF16, {n + 1, r})});
  }
  std::vector<std::vector<uint8_t>> expanded;
  expanded.reserve(tables.size());
  std::vector<SafetensorsOutput> out;
  for (const auto& [name, rows] : tables) {
    expanded.push_back(expand_rows(*rows, ids, V));
    out.push_back(
        {name, DType::BF16, {V, rows->dim(1)}, expanded.back().data(), expanded.back().size()});
  }
  for (const TensorView& v : file->tensors()) {
    if (v.name.rfind("compact.", 0) == 0) continue;
    for (const auto& t : tables)
      if (v.name == t.first)
        throw std::runtime_error(file->path() + ": holds " + v.name +
                                 " in full and as compact rows (" + t.second->name + ")");
    out.push_back({v.name, v.dtype, v.shape, v.data, v.nbytes});
  }

  const fs::path dst(out_dir);
  const fs::path tmp = dst.string() + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    write_safetensors((tmp / "model.safetensors").string(), out);
    fs::copy_file(src / "config.json", tmp / "config.json");
    const fs::path tok(tokenizer_json);
    if (!fs::exists(tok)) throw std::runtime_error("tokenizer file not found: " + tokenizer_json);
    fs::copy_file(tok, tmp / "tokenizer.json");
    if (fs::exists(tok.parent_path() / "tokenizer_config.json"))
      fs::copy_file(tok.parent_path() / "tokenizer_config.json", tmp / "tokenizer_config.json");
    Checkpoint::open(tmp.string());  // the full inventory check before the model appears
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::remove_all(dst);
  fs::rename(tmp, dst);
}

}  // namespace cedar
