// Checkpoint::open of a directory: config.json (validated), tokenizer.json present, the safetensors
// shards mapped; then, for either source, the tensor inventory compared name by name with
// expected_tensors(cfg) (spec §13). Nothing is loaded that is not exactly the V4.1 layout: the
// errors name the tensor and what differs.
#include "model/checkpoint.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "base/file_reader.h"
#include "base/json_limits.h"
#include "base/mapped_file.h"
#include "model/gguf.h"
#include "model/safetensors.h"

namespace cedar {

namespace fs = std::filesystem;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Describes why `got` is not `want` for one tensor. For an FP8 scale with the V4 128x128 grid, say
// so: that checkpoint would load and run, with every weight scaled wrongly.
std::string tensor_mismatch(const ExpectedTensor& want, const TensorView& got,
                            const std::map<std::string, const ExpectedTensor*>& expected) {
  const std::string& n = want.name;
  if (got.dtype != want.dtype)
    return "tensor '" + n + "': dtype " + dtype_name(got.dtype) + ", expected " +
           dtype_name(want.dtype) + " " + shape_str(want.shape);
  if (got.shape == want.shape) return "";
  std::string msg =
      "tensor '" + n + "': shape " + shape_str(got.shape) + ", expected " + shape_str(want.shape);
  const std::string suffix = ".scale";
  if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
      want.dtype == DType::F8_E8M0 && got.shape.size() == 2) {
    // The weight beside the scale: "X.weight" next to "X.scale" (or "X" itself).
    const std::string base = n.substr(0, n.size() - suffix.size());
    auto it = expected.find(base + ".weight");
    if (it == expected.end()) it = expected.find(base);
    if (it != expected.end() && it->second->shape.size() == 2 &&
        it->second->dtype == DType::F8_E4M3) {
      const auto& w = it->second->shape;
      if (got.shape[0] == ceil_div(w[0], 128) && got.shape[1] == ceil_div(w[1], 128))
        msg +=
            " (looks like a 128x128 block-scale grid; V4.1 uses 32x32 blocks, quantization_"
            "config.weight_block_size [32, 32])";
    }
  }
  return msg;
}

}  // namespace

Checkpoint::~Checkpoint() = default;

void Checkpoint::FreeAligned::operator()(uint8_t* p) const { std::free(p); }

uint8_t* Checkpoint::allocate(size_t n) {
  const size_t rounded = (std::max<size_t>(n, 1) + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (!p) throw std::runtime_error(path_ + ": cannot allocate " + std::to_string(n) + " bytes");
  owned_.emplace_back(p);
  return p;
}

std::string Checkpoint::tokenizer_json() const {
  if (format_ == Format::kGguf) return tokenizer_json_;
  return read_regular_file((fs::path(path_) / "tokenizer.json").string(), kMaxTokenizerJsonBytes,
                           "tokenizer.json");
}

size_t Checkpoint::mapped_bytes() const {
  size_t n = 0;
  for (const auto& f : files_) n += f->size();
  return n;
}

std::optional<Checkpoint::Location> Checkpoint::locate(const uint8_t* p, size_t n) const {
  for (const auto& f : files_) {
    const uint8_t* b = f->data();
    if (b && p >= b && n <= f->size() && size_t(p - b) <= f->size() - n)
      return Location{f->path(), size_t(p - b)};
  }
  return std::nullopt;
}

void Checkpoint::prefetch(const std::function<void(size_t done, size_t total)>& progress) const {
  constexpr size_t kStep = 64u << 20;
  const size_t total = mapped_bytes();
  size_t done = 0;
  for (const auto& f : files_)
    for (size_t off = 0; off < f->size(); off += kStep) {
      f->prefetch(off, kStep);
      done += std::min(kStep, f->size() - off);
      if (progress) progress(done, total);
    }
}

size_t Checkpoint::prefetch_tensors(
    const std::function<bool(const std::string& name)>& want,
    const std::function<void(size_t done, size_t total)>& progress) const {
  struct Range {
    const MappedFile* file;
    size_t offset, bytes;
  };
  std::vector<Range> ranges;
  size_t total = 0;
  auto add = [&](const std::string& name, const uint8_t* p, size_t n) {
    if (n == 0 || !want(name)) return;
    for (const auto& f : files_) {
      const uint8_t* b = f->data();
      if (b && p >= b && n <= f->size() && size_t(p - b) <= f->size() - n) {
        ranges.push_back({f.get(), size_t(p - b), n});
        total += n;
        return;
      }
    }
  };
  for (const auto& [name, t] : tensors_) add(name, t.data, t.nbytes);
  for (const auto& [name, b] : blocks_) add(name, b.data, b.nbytes);
  constexpr size_t kStep = 64u << 20;
  size_t done = 0;
  for (const Range& r : ranges)
    for (size_t off = 0; off < r.bytes; off += kStep) {
      const size_t n = std::min(kStep, r.bytes - off);
      r.file->prefetch(r.offset + off, n);
      done += n;
      if (progress) progress(done, total);
    }
  return total;
}

bool Checkpoint::has(const std::string& name) const { return tensors_.count(name) > 0; }

const TensorView& Checkpoint::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw std::runtime_error(path_ + ": tensor '" + name + "' is not in the checkpoint");
  return it->second;
}

const Checkpoint::BlockWeight* Checkpoint::block_weight(const std::string& name) const {
  auto it = blocks_.find(name);
  return it == blocks_.end() ? nullptr : &it->second;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& path, const OpenOptions& opt) {
  if (fs::is_directory(path)) return open_directory(path);
  if (gguf::is_gguf_file(path)) return open_gguf(path, opt);
  if (!fs::exists(path)) throw std::runtime_error(path + ": no such model directory or file");
  throw std::runtime_error(path + ": not a model directory or a GGUF file");
}

std::unique_ptr<Checkpoint> Checkpoint::open_directory(const std::string& dir) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->path_ = dir;
  const fs::path d(dir);

  const fs::path cfg_path = d / "config.json";
  if (!fs::exists(cfg_path)) throw std::runtime_error(cfg_path.string() + ": missing");
  try {
    ck->config_ = ModelConfig::from_file(cfg_path.string());
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    // from_json's messages start with "config.json: "; give the full path instead.
    if (m.rfind("config.json: ", 0) == 0) m = cfg_path.string() + m.substr(11);
    throw std::runtime_error(m);
  }

  if (!fs::exists(d / "tokenizer.json"))
    throw std::runtime_error((d / "tokenizer.json").string() +
                             ": missing (a model directory carries its tokenizer)");
  open_regular_file((d / "tokenizer.json").string());  // read later: refuse a FIFO etc. now

  // Map the shards.
  const fs::path index_path = d / "model.safetensors.index.json";
  const fs::path single_path = d / "model.safetensors";
  std::map<std::string, std::string> weight_map;  // empty for a single file
  std::vector<std::string> shard_files;
  if (fs::exists(index_path)) {
    weight_map = read_safetensors_index(index_path.string());
    std::set<std::string> files;
    for (const auto& [name, file] : weight_map) files.insert(file);
    shard_files.assign(files.begin(), files.end());
  } else if (fs::exists(single_path)) {
    shard_files.push_back("model.safetensors");
  } else {
    throw std::runtime_error(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& file : shard_files) {
    const std::string path = (d / file).string();
    if (!fs::exists(path))
      throw std::runtime_error(path + ": missing (listed in model.safetensors.index.json)");
    auto st = SafetensorsFile::open(path);
    for (const TensorView& v : st->tensors()) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(v.name);
        if (it == weight_map.end())
          throw std::runtime_error(path + ": tensor '" + v.name +
                                   "' is not listed in model.safetensors.index.json");
        if (it->second != file)
          throw std::runtime_error(path + ": tensor '" + v.name +
                                   "' is in this shard but the "
                                   "index maps it to '" +
                                   it->second + "'");
      }
      if (!ck->tensors_.emplace(v.name, v).second)
        throw std::runtime_error(path + ": tensor '" + v.name + "' appears in two shards");
    }
    ck->files_.push_back(st->take_mapping());
  }
  for (const auto& [name, file] : weight_map)
    if (!ck->tensors_.count(name))
      throw std::runtime_error((d / file).string() + ": tensor '" + name +
                               "' is listed in model.safetensors.index.json but not in the shard");

  ck->validate();
  return ck;
}

bool Checkpoint::block_covers(const ExpectedTensor& e) const {
  const auto ends = [&e](const std::string& suffix) { return e.name.ends_with(suffix); };
  if (ends(".scale")) return blocks_.count(e.name.substr(0, e.name.size() - 6) + ".weight") > 0;
  const BlockWeight* b = block_weight(e.name);
  if (!b || e.shape.size() != 2) return false;
  const int64_t in = e.dtype == DType::I8 ? e.shape[1] * 2 : e.shape[1];  // FP4 pairs
  return (e.dtype == DType::F8_E4M3 || e.dtype == DType::I8) && b->out == e.shape[0] && b->in == in;
}

std::vector<ExpectedTensor> Checkpoint::inventory(size_t capacity) const {
  // Slack, so that a checkpoint short of some tensors is still reported tensor by tensor (the
  // list costs what the file's own tensor table costs, times a small factor).
  const size_t limit = 2 * capacity + 4096;
  try {
    return expected_tensors(config_, limit);
  } catch (const std::length_error&) {
    const ModelConfig& c = config_;
    throw std::runtime_error(
        path_ + ": " + (format_ == Format::kGguf ? "its metadata" : "config.json") +
        " describes more than " + std::to_string(limit) + " tensors, far more than the " +
        std::to_string(capacity) + " the checkpoint can hold: num_hidden_layers " +
        std::to_string(c.num_hidden_layers) + " x n_routed_experts " +
        std::to_string(c.n_routed_experts) + " (6 tensors per expert), num_nextn_predict_layers " +
        std::to_string(c.num_nextn_predict_layers) +
        (c.has_vision
             ? ", vision_config.num_hidden_layers " + std::to_string(c.vision.num_hidden_layers)
             : std::string()));
  }
}

void Checkpoint::validate() const {
  // Compare with the inventory the config implies. Collect every problem (a corrupt checkpoint
  // often has several) and report the first few, each naming its tensor. A block weight stands
  // for a weight and its scale.
  const std::vector<ExpectedTensor> expected = inventory(tensors_.size() + 2 * blocks_.size());
  std::map<std::string, const ExpectedTensor*> by_name;
  for (const auto& e : expected) by_name[e.name] = &e;
  std::vector<std::string> problems;
  for (const auto& e : expected) {
    auto it = tensors_.find(e.name);
    if (it == tensors_.end() && block_covers(e)) continue;
    if (it == tensors_.end()) {
      problems.push_back("tensor '" + e.name + "' is missing (expected " + dtype_name(e.dtype) +
                         " " + shape_str(e.shape) + ")");
      continue;
    }
    std::string m = tensor_mismatch(e, it->second, by_name);
    if (!m.empty()) problems.push_back(m);
  }
  for (const auto& [name, v] : tensors_)
    if (!by_name.count(name))
      problems.push_back("tensor '" + name + "' (" + dtype_name(v.dtype) + " " +
                         shape_str(v.shape) +
                         ") is not part of the V4.1 inventory for this config (extra tensor)");
  if (!problems.empty()) {
    std::string msg = path_ + ": checkpoint does not match " +
                      (format_ == Format::kGguf ? "its metadata" : "config.json") + ": " +
                      problems[0];
    const size_t shown = std::min<size_t>(problems.size(), 8);
    for (size_t i = 1; i < shown; ++i) msg += "\n  " + problems[i];
    if (problems.size() > shown)
      msg += "\n  ... and " + std::to_string(problems.size() - shown) + " more problems";
    throw std::runtime_error(msg);
  }
}

}  // namespace cedar
