#include "model/make_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model/presets.h"
#include "model/safetensors_writer.h"
#include "numerics/bf16.h"
#include "numerics/fp4.h"
#include "numerics/fp8.h"

namespace cedar {

namespace fs = std::filesystem;

namespace {

// ---- deterministic random numbers ------------------------------------------------------------

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// One independent stream per (seed, tensor name): splitmix64 uniforms, normals by the polar
// Box-Muller method in double (both outputs of a pair are used).
class Rng {
 public:
  Rng(uint64_t seed, const std::string& name) {
    state_ = seed;
    uint64_t a = splitmix64(state_);
    state_ = a ^ fnv1a64(name);
    splitmix64(state_);
  }
  double uniform() {  // (0, 1]
    return double((splitmix64(state_) >> 11) + 1) * 0x1.0p-53;
  }
  // Marsaglia's polar form of Box-Muller (no trigonometry; ~21% of pairs rejected).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2.0 * uniform() - 1.0;
      v = 2.0 * uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
  }

 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// ---- quantizers for the synthetic weights ---------------------------------------------------

// The smallest power of two s with amax / s <= limit, as an exponent k (s = 2^k): the release's
// "scale rounded up to a power of two" (UE8M0). amax 0 (cannot happen with normals) -> s = 1.
int pow2_scale_exponent(double amax, double limit) {
  if (!(amax > 0.0)) return 0;
  int e;
  double m = std::frexp(amax / limit, &e);  // amax/limit = m * 2^e, m in [0.5, 1)
  int k = m == 0.5 ? e - 1 : e;
  return std::clamp(k, -127, 127);
}

void put_bf16(uint8_t* dst, float v) {
  uint16_t b = f32_to_bf16_bits(v);
  dst[0] = uint8_t(b);
  dst[1] = uint8_t(b >> 8);
}

void put_f32(uint8_t* dst, float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  for (int i = 0; i < 4; ++i) dst[i] = uint8_t(b >> (8 * i));
}

std::vector<float> normals(Rng& rng, size_t n, double mean, double std) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(mean + std * rng.normal());
  return v;
}

// FP8 E4M3 weight [o, i] with a UE8M0 scale per 32x32 block (ceil on both axes).
void quantize_fp8_blocks(const std::vector<float>& w, int64_t o, int64_t i, uint8_t* codes,
                         uint8_t* scales) {
  const int64_t sb_cols = (i + 31) / 32;
  for (int64_t br = 0; br < (o + 31) / 32; ++br)
    for (int64_t bc = 0; bc < sb_cols; ++bc) {
      const int64_t r1 = std::min(o, br * 32 + 32), c1 = std::min(i, bc * 32 + 32);
      double amax = 0.0;
      for (int64_t r = br * 32; r < r1; ++r)
        for (int64_t c = bc * 32; c < c1; ++c)
          amax = std::max(amax, double(std::fabs(w[size_t(r * i + c)])));
      const int k = pow2_scale_exponent(amax, kE4M3Max);
      scales[br * sb_cols + bc] = uint8_t(k + 127);
      for (int64_t r = br * 32; r < r1; ++r)
        for (int64_t c = bc * 32; c < c1; ++c)
          codes[r * i + c] = f32_to_e4m3(std::ldexp(w[size_t(r * i + c)], -k));
    }
}

// FP8 E4M3 rows [rows, d] with a UE8M0 scale per (row, 32 channels): the Engram tables.
void quantize_fp8_rows(const std::vector<float>& w, int64_t rows, int64_t d, uint8_t* codes,
                       uint8_t* scales) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < d / 32; ++b) {
      const float* x = &w[size_t(r * d + b * 32)];
      double amax = 0.0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, double(std::fabs(x[j])));
      const int k = pow2_scale_exponent(amax, kE4M3Max);
      scales[r * (d / 32) + b] = uint8_t(k + 127);
      for (int j = 0; j < 32; ++j) codes[r * d + b * 32 + j] = f32_to_e4m3(std::ldexp(x[j], -k));
    }
}

// FP4 E2M1 weight [o, i] packed two per byte (even element in the low nibble) with a UE8M0
// scale per (row, 32 input channels).
void quantize_fp4(const std::vector<float>& w, int64_t o, int64_t i, uint8_t* packed,
                  uint8_t* scales) {
  for (int64_t r = 0; r < o; ++r)
    for (int64_t b = 0; b < i / 32; ++b) {
      const float* x = &w[size_t(r * i + b * 32)];
      double amax = 0.0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, double(std::fabs(x[j])));
      const int k = pow2_scale_exponent(amax, kE2M1Max);
      scales[r * (i / 32) + b] = uint8_t(k + 127);
      for (int j = 0; j < 32; j += 2) {
        auto q = [&](float v) {
          return f32_to_e2m1(std::clamp(std::ldexp(v, -k), -kE2M1Max, kE2M1Max));
        };
        packed[r * (i / 2) + b * 16 + j / 2] = fp4_pack(q(x[j]), q(x[j + 1]));
      }
    }
}

// ---- which distribution each tensor gets ----------------------------------------------------

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The last dotted component before ".weight" ("attn_norm" for "layers.0.attn_norm.weight").
std::string module_name(const std::string& name) {
  std::string s = ends_with(name, ".weight") ? name.substr(0, name.size() - 7) : name;
  auto dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);
}

struct Dist {
  enum Kind { Normal, Uniform } kind = Normal;
  double a = 0.0, b = 1.0;  // Normal: mean, std; Uniform: low, high
};

// Magnitudes chosen so a random model's forward pass stays in a healthy range: projections keep
// unit-variance activations (std 1/sqrt(fan_in)), norm weights near 1, mHC mixes near the middle
// of their sigmoids (pre/post/comb neither saturated nor constant), router logits ~N(0, 1).
Dist dist_for(const ExpectedTensor& t) {
  const std::string& n = t.name;
  const std::string mod = module_name(n);
  auto fan_in = [&]() {
    if (t.shape.size() != 2) throw std::runtime_error("make-model: no rule for tensor " + n);
    return Dist{Dist::Normal, 0.0, 1.0 / std::sqrt(double(t.shape[1]))};
  };
  if (n == "embed.weight" || ends_with(n, "markov_head.embed.weight")) return {Dist::Normal, 0, 1};
  if (n == "image_start" || n == "image_end" || n == "image_newline") return {Dist::Normal, 0, 1};
  if (ends_with(n, ".attn_sink")) return {Dist::Normal, 0.0, 1.0};
  if (ends_with(n, "_fn") && mod.rfind("hc_", 0) == 0) return fan_in();  // N(0, 1/(hc*D))
  if (ends_with(n, "_scale") && mod.rfind("hc_", 0) == 0) return {Dist::Uniform, 0.5, 1.0};
  if (ends_with(n, "_base") && mod.rfind("hc_", 0) == 0) return {Dist::Normal, 0.0, 0.5};
  if (ends_with(n, "gate.bias") || ends_with(n, "gate.bias_vl")) return {Dist::Normal, 0.0, 0.1};
  if (ends_with(n, "engram.q_weight") || ends_with(n, "engram.k_weight"))
    return {Dist::Normal, 1.0, 0.1};
  if (ends_with(n, ".weight") && mod.find("norm") != std::string::npos && t.shape.size() == 1)
    return {Dist::Normal, 1.0, 0.05};
  if (ends_with(n, ".bias") && t.shape.size() == 1) return {Dist::Normal, 0.0, 0.02};
  return fan_in();  // head, router, compressor, indexer, DSpark heads, vision/aligner weights
}

std::vector<float> draw(Rng& rng, const Dist& d, size_t n) {
  if (d.kind == Dist::Normal) return normals(rng, n, d.a, d.b);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d.a + (d.b - d.a) * rng.uniform());
  return v;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

}  // namespace

std::vector<GeneratedTensor> generate_weights(const ModelConfig& cfg, uint64_t seed) {
  auto inv = expected_tensors(cfg);
  std::map<std::string, GeneratedTensor> out;
  std::map<std::string, const ExpectedTensor*> by_name;
  for (const auto& t : inv) by_name[t.name] = &t;
  auto alloc = [&](const ExpectedTensor& t) -> GeneratedTensor& {
    auto& g = out[t.name];
    g.spec = t;
    g.data.assign(size_t(numel(t.shape)) * dtype_size(t.dtype), 0);
    return g;
  };
  auto partner = [&](const std::string& scale_name) -> const ExpectedTensor& {
    auto it = by_name.find(scale_name);
    if (it == by_name.end())
      throw std::runtime_error("make-model: quantized tensor without scale " + scale_name);
    return *it->second;
  };
  for (const auto& t : inv) {
    if (t.dtype == DType::F8_E8M0) continue;  // written together with its weight
    Rng rng(seed, t.name);
    const size_t n = size_t(numel(t.shape));
    // Quantized tensors are "X.weight" + "X.scale" (Linear modules and the Engram tables).
    const std::string scale_name =
        (ends_with(t.name, ".weight") ? t.name.substr(0, t.name.size() - 7) : t.name) + ".scale";
    if (ends_with(t.name, "engram.embed.weight")) {
      // Engram table rows ~ N(0, 1), quantized per (row, 32 channels).
      auto& w = alloc(t);
      auto& s = alloc(partner(scale_name));
      quantize_fp8_rows(normals(rng, n, 0.0, 1.0), t.shape[0], t.shape[1], w.data.data(),
                        s.data.data());
    } else if (t.dtype == DType::F8_E4M3) {
      // Dense FP8 projection: W ~ N(0, 1/in), per 32x32 block UE8M0 scale.
      auto& w = alloc(t);
      auto& s = alloc(partner(scale_name));
      quantize_fp8_blocks(normals(rng, n, 0.0, 1.0 / std::sqrt(double(t.shape[1]))), t.shape[0],
                          t.shape[1], w.data.data(), s.data.data());
    } else if (t.dtype == DType::I8) {
      // Routed expert, MXFP4: logical [out, in] = [shape0, 2*shape1].
      const int64_t o = t.shape[0], i = 2 * t.shape[1];
      auto& w = alloc(t);
      auto& s = alloc(partner(scale_name));
      quantize_fp4(normals(rng, size_t(o * i), 0.0, 1.0 / std::sqrt(double(i))), o, i,
                   w.data.data(), s.data.data());
    } else if (t.dtype == DType::BF16 || t.dtype == DType::F32) {
      auto v = draw(rng, dist_for(t), n);
      auto& w = alloc(t);
      for (size_t k = 0; k < n; ++k) {
        if (t.dtype == DType::BF16)
          put_bf16(&w.data[2 * k], v[k]);
        else
          put_f32(&w.data[4 * k], v[k]);
      }
    } else {
      throw std::runtime_error(std::string("make-model: no rule for dtype ") + dtype_name(t.dtype) +
                               " of tensor " + t.name);
    }
  }
  for (const auto& t : inv)
    if (!out.count(t.name)) throw std::runtime_error("make-model: tensor not generated: " + t.name);
  std::vector<GeneratedTensor> sorted;
  sorted.reserve(out.size());
  for (auto& [name, g] : out) sorted.push_back(std::move(g));  // std::map: sorted by name
  return sorted;
}

namespace {

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
  f.close();
  if (!f) throw std::runtime_error("write failed: " + p.string());
}

nlohmann::json config_json(const ModelConfig& cfg) {
  nlohmann::json j = cfg.to_json();
  // The release's top-level identity keys (added when to_json leaves them out).
  if (!j.contains("architectures")) j["architectures"] = {"DeepseekV41ForCausalLM"};
  if (!j.contains("model_type")) j["model_type"] = "deepseek_v41";
  return j;
}

}  // namespace

void write_checkpoint(const ModelConfig& cfg, uint64_t seed, const std::string& dir, int shards,
                      const std::string& preset_name) {
  auto tensors = generate_weights(cfg, seed);
  if (shards < 1) throw std::runtime_error("--shards must be >= 1");
  if (size_t(shards) > tensors.size())
    throw std::runtime_error("--shards " + std::to_string(shards) + " exceeds the tensor count " +
                             std::to_string(tensors.size()));
  std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (!preset_name.empty()) {
    meta["cedar_preset"] = preset_name;
    meta["cedar_seed"] = std::to_string(seed);
  }
  auto entry = [](const GeneratedTensor& g) {
    return SafetensorsEntry{g.spec.name, g.spec.dtype, g.spec.shape, g.data.data(), g.data.size()};
  };
  const fs::path root(dir);
  write_text(root / "config.json", config_json(cfg).dump(2) + "\n");
  if (shards == 1) {
    std::vector<SafetensorsEntry> all;
    for (const auto& g : tensors) all.push_back(entry(g));
    write_safetensors((root / "model.safetensors").string(), all, meta);
    return;
  }
  // K shards of contiguous runs of the sorted names, balanced by bytes; every shard non-empty.
  uint64_t total = 0;
  for (const auto& g : tensors) total += g.data.size();
  nlohmann::json weight_map = nlohmann::json::object();
  size_t next = 0;
  uint64_t done = 0;
  for (int k = 0; k < shards; ++k) {
    char fname[64];
    std::snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", k + 1, shards);
    const uint64_t target = total * uint64_t(k + 1) / uint64_t(shards);
    const size_t must_leave = size_t(shards - k - 1);  // one tensor for each later shard
    std::vector<SafetensorsEntry> part;
    do {
      part.push_back(entry(tensors[next]));
      done += tensors[next].data.size();
      weight_map[tensors[next].spec.name] = fname;
      ++next;
    } while (next < tensors.size() - must_leave && (done < target || k == shards - 1));
    write_safetensors((root / fname).string(), part, meta);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_text(root / "model.safetensors.index.json", index.dump(2) + "\n");
}

void make_model(const MakeModelOptions& opt) {
  if (opt.preset != "tiny" && opt.preset != "small")
    throw std::runtime_error("--preset must be tiny or small (got '" + opt.preset + "')");
  if (opt.out_dir.empty()) throw std::runtime_error("--out is required");
  if (opt.tokenizer.empty()) throw std::runtime_error("--tokenizer is required");
  if (opt.shards < 1) throw std::runtime_error("--shards must be >= 1");
  const fs::path tok(opt.tokenizer);
  if (!fs::is_regular_file(tok))
    throw std::runtime_error("tokenizer file not found: " + opt.tokenizer);
  ModelConfig cfg = preset_config(opt.preset);
  {
    ModelConfig check = cfg;
    check.validate();  // never write a checkpoint the engine would refuse
  }
  const fs::path out(opt.out_dir);
  std::error_code ec;
  if (fs::exists(out)) {
    if (!fs::is_directory(out))
      throw std::runtime_error("--out " + opt.out_dir + " exists and is not a directory");
    if (!fs::is_empty(out) && !opt.force)
      throw std::runtime_error("--out " + opt.out_dir +
                               " is not empty (pass --force to overwrite)");
    // --force: drop the weight files an earlier make-model may have left (a different --shards
    // would otherwise leave a stale single file or shards beside the new ones).
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string n = e.path().filename().string();
      const bool ours = n == "model.safetensors" || n == "model.safetensors.index.json" ||
                        (n.rfind("model-", 0) == 0 && ends_with(n, ".safetensors"));
      if (ours && e.is_regular_file()) fs::remove(e.path());
    }
  } else if (!fs::create_directories(out, ec) || ec) {
    throw std::runtime_error("cannot create --out " + opt.out_dir + ": " + ec.message());
  }
  write_checkpoint(cfg, opt.seed, opt.out_dir, opt.shards, opt.preset);
  fs::copy_file(tok, out / "tokenizer.json", fs::copy_options::overwrite_existing);
  const fs::path tok_cfg = tok.parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(tok_cfg))
    fs::copy_file(tok_cfg, out / "tokenizer_config.json", fs::copy_options::overwrite_existing);
}

}  // namespace cedar
