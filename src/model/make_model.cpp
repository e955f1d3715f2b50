#include "model/make_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "base/thread_pool.h"
#include "model/presets.h"
#include "model/safetensors_writer.h"
#include "model/weight_quant.h"
#include "numerics/bf16.h"

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
  // n normals ~ N(mean, std^2) by Marsaglia's polar form of Box-Muller (no trigonometry): an
  // attempt draws u, v uniform in (-1, 1] and is kept when s = u^2 + v^2 is in (0, 1) (~79%);
  // a kept attempt gives the pair u*f, v*f with f = sqrt(-2 ln(s) / s), in that order, the second
  // held as a spare for the next value.
  // Every attempt consumes two uniforms, kept or not, so a batch of attempts is drawn first and
  // the kept pairs transformed after: no branch on the random outcome and the log/div/sqrt of
  // different pairs overlap (1.6x less CPU time per value than one attempt at a time). A batch
  // never has more attempts than pairs still needed, so the values and the stream's state
  // afterwards are exactly those of drawing one value at a time.
  void fill_normals(float* out, size_t n, double mean, double std) {
    size_t i = 0;
    if (n > 0 && has_spare_) {
      out[i++] = float(mean + std * spare_);
      has_spare_ = false;
    }
    constexpr size_t kBatch = 256;
    double u[kBatch], v[kBatch], s[kBatch];
    while (i < n) {
      const size_t attempts = std::min(kBatch, (n - i + 1) / 2);
      size_t kept = 0;
      for (size_t a = 0; a < attempts; ++a) {
        u[kept] = 2.0 * uniform() - 1.0;
        v[kept] = 2.0 * uniform() - 1.0;
        s[kept] = u[kept] * u[kept] + v[kept] * v[kept];
        kept += size_t(s[kept] < 1.0 && s[kept] != 0.0);
      }
      for (size_t k = 0; k < kept; ++k) {
        const double f = std::sqrt(-2.0 * std::log(s[k]) / s[k]);
        out[i++] = float(mean + std * (u[k] * f));
        if (i < n)
          out[i++] = float(mean + std * (v[k] * f));
        else {
          spare_ = v[k] * f;
          has_spare_ = true;
        }
      }
    }
  }

 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// ---- quantizers for the synthetic weights ---------------------------------------------------

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
  rng.fill_normals(v.data(), n, mean, std);
  return v;
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

// ---- jobs: one random stream each ----------------------------------------------------------

bool is_quantized(const ExpectedTensor& t) {
  return t.dtype == DType::F8_E4M3 || t.dtype == DType::I8;  // FP8 (incl. Engram tables), FP4
}

// The tensors one (seed, name) stream fills: a tensor, or a quantized "X.weight" together with
// its "X.scale" (the scale follows from the same draws).
struct Job {
  const ExpectedTensor* tensor = nullptr;
  const ExpectedTensor* scale = nullptr;  // quantized tensors only
};

// Every tensor of `inv` belongs to exactly one job; throws naming a quantized tensor without a
// scale or a scale without its weight.
std::vector<Job> plan_jobs(const std::vector<ExpectedTensor>& inv) {
  std::map<std::string, const ExpectedTensor*> by_name;
  for (const auto& t : inv) by_name[t.name] = &t;
  std::vector<Job> jobs;
  std::set<const ExpectedTensor*> paired;
  for (const auto& t : inv) {
    if (t.dtype == DType::F8_E8M0) continue;  // written together with its weight
    Job j{&t, nullptr};
    if (is_quantized(t)) {
      // Quantized tensors are "X.weight" + "X.scale" (Linear modules and the Engram tables).
      const std::string scale_name =
          (ends_with(t.name, ".weight") ? t.name.substr(0, t.name.size() - 7) : t.name) + ".scale";
      auto it = by_name.find(scale_name);
      if (it == by_name.end())
        throw std::runtime_error("make-model: quantized tensor without scale " + scale_name);
      j.scale = it->second;
      paired.insert(j.scale);
    }
    jobs.push_back(j);
  }
  for (const auto& t : inv)
    if (t.dtype == DType::F8_E8M0 && !paired.count(&t))
      throw std::runtime_error("make-model: tensor not generated: " + t.name);
  return jobs;
}

uint64_t nbytes(const ExpectedTensor& t) { return uint64_t(numel(t.shape)) * dtype_size(t.dtype); }

GeneratedTensor zeroed(const ExpectedTensor& t) {
  GeneratedTensor g;
  g.spec = t;
  g.data.assign(size_t(nbytes(t)), 0);
  return g;
}

// The job's tensor (and scale, second) from its own stream: independent of every other job.
std::vector<GeneratedTensor> run_job(const Job& job, uint64_t seed) {
  const ExpectedTensor& t = *job.tensor;
  Rng rng(seed, t.name);
  const size_t n = size_t(numel(t.shape));
  std::vector<GeneratedTensor> out;
  out.push_back(zeroed(t));
  if (job.scale) out.push_back(zeroed(*job.scale));
  uint8_t* w = out[0].data.data();
  uint8_t* sc = job.scale ? out[1].data.data() : nullptr;
  if (ends_with(t.name, "engram.embed.weight")) {
    // Engram table rows ~ N(0, 1), quantized per (row, 32 channels).
    quantize_fp8_rows(normals(rng, n, 0.0, 1.0).data(), t.shape[0], t.shape[1], w, sc);
  } else if (t.dtype == DType::F8_E4M3) {
    // Dense FP8 projection: W ~ N(0, 1/in), per 32x32 block UE8M0 scale.
    quantize_fp8_blocks(normals(rng, n, 0.0, 1.0 / std::sqrt(double(t.shape[1]))).data(),
                        t.shape[0], t.shape[1], w, sc);
  } else if (t.dtype == DType::I8) {
    // Routed expert, MXFP4: logical [out, in] = [shape0, 2*shape1].
    const int64_t o = t.shape[0], i = 2 * t.shape[1];
    quantize_fp4(normals(rng, size_t(o * i), 0.0, 1.0 / std::sqrt(double(i))).data(), o, i, w, sc);
  } else if (t.dtype == DType::BF16 || t.dtype == DType::F32) {
    const auto v = draw(rng, dist_for(t), n);
    for (size_t k = 0; k < n; ++k) {
      if (t.dtype == DType::BF16)
        put_bf16(&w[2 * k], v[k]);
      else
        put_f32(&w[4 * k], v[k]);
    }
  } else {
    throw std::runtime_error(std::string("make-model: no rule for dtype ") + dtype_name(t.dtype) +
                             " of tensor " + t.name);
  }
  return out;
}

// Runs jobs[i] for every i of `which` on every core (jobs differ in size by 10^5: each thread takes
// the next job when it finishes one) and returns their tensors. Every job has its own stream, so
// the bytes never depend on the thread count or the order.
std::vector<GeneratedTensor> run_jobs(const std::vector<Job>& jobs,
                                      const std::vector<size_t>& which, uint64_t seed,
                                      ThreadPool& pool) {
  std::vector<std::vector<GeneratedTensor>> parts(which.size());
  std::atomic<size_t> next{0};
  pool.parallel_for(pool.size(), [&](int64_t, int64_t) {
    for (size_t k; (k = next.fetch_add(1)) < which.size();)
      parts[k] = run_job(jobs[which[k]], seed);
  });
  std::vector<GeneratedTensor> out;
  for (auto& p : parts)
    for (auto& g : p) out.push_back(std::move(g));
  return out;
}

// Hands out the tensors of a checkpoint in the order they are written (sorted by name), generating
// them a batch of ~kBatchBytes at a time across the cores, so a multi-GB checkpoint needs only a
// batch in memory.
class TensorStream {
 public:
  static constexpr uint64_t kBatchBytes = uint64_t(256) << 20;

  TensorStream(const std::vector<Job>& jobs, const std::vector<const ExpectedTensor*>& order,
               uint64_t seed)
      : jobs_(jobs), order_(order), seed_(seed), done_(jobs.size(), false) {
    for (size_t j = 0; j < jobs.size(); ++j) {
      job_of_[jobs[j].tensor->name] = j;
      if (jobs[j].scale) job_of_[jobs[j].scale->name] = j;
    }
  }

  // The bytes of order[i]; i increases by one per call.
  GeneratedTensor take(size_t i) {
    const std::string& name = order_[i]->name;
    if (!ready_.count(name)) generate_from(i);
    auto it = ready_.find(name);
    GeneratedTensor g = std::move(it->second);
    ready_.erase(it);
    return g;
  }

 private:
  void generate_from(size_t i) {
    std::vector<size_t> which;
    uint64_t bytes = 0;
    for (size_t k = i; k < order_.size() && (which.empty() || bytes < kBatchBytes); ++k) {
      const size_t j = job_of_.at(order_[k]->name);
      if (done_[j]) continue;
      done_[j] = true;
      which.push_back(j);
      for (const ExpectedTensor* t : {jobs_[j].tensor, jobs_[j].scale})
        if (t) bytes += nbytes(*t);
    }
    for (auto& g : run_jobs(jobs_, which, seed_, pool_)) ready_[g.spec.name] = std::move(g);
  }

  const std::vector<Job>& jobs_;
  const std::vector<const ExpectedTensor*>& order_;
  uint64_t seed_;
  std::vector<bool> done_;
  std::map<std::string, size_t> job_of_;
  std::map<std::string, GeneratedTensor> ready_;
  ThreadPool pool_;
};

}  // namespace

std::vector<GeneratedTensor> generate_weights(const ModelConfig& cfg, uint64_t seed) {
  const auto inv = expected_tensors(cfg);
  const auto jobs = plan_jobs(inv);
  std::vector<size_t> all(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) all[j] = j;
  ThreadPool pool;
  std::map<std::string, GeneratedTensor> out;
  for (auto& g : run_jobs(jobs, all, seed, pool)) out[g.spec.name] = std::move(g);
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

// One safetensors file holding order[first, last), streamed from `src`.
void write_shard(const fs::path& path, const std::vector<const ExpectedTensor*>& order,
                 size_t first, size_t last, TensorStream& src,
                 const std::map<std::string, std::string>& meta) {
  std::vector<SafetensorsOutput> entries;
  for (size_t k = first; k < last; ++k)
    entries.push_back(
        {order[k]->name, order[k]->dtype, order[k]->shape, nullptr, nbytes(*order[k])});
  SafetensorsStreamWriter out(path.string(), entries, meta);
  for (size_t k = first; k < last; ++k) {
    const GeneratedTensor g = src.take(k);
    out.append(g.data.data(), g.data.size());
  }
  out.finish();
}

}  // namespace

void write_checkpoint(const ModelConfig& cfg, uint64_t seed, const std::string& dir, int shards,
                      const std::string& preset_name) {
  const auto inv = expected_tensors(cfg);
  const auto jobs = plan_jobs(inv);
  std::vector<const ExpectedTensor*> order;  // the file order: sorted by name
  for (const auto& t : inv) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const ExpectedTensor* a, const ExpectedTensor* b) { return a->name < b->name; });
  if (shards < 1) throw std::runtime_error("--shards must be >= 1");
  if (size_t(shards) > order.size())
    throw std::runtime_error("--shards " + std::to_string(shards) + " exceeds the tensor count " +
                             std::to_string(order.size()));
  std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (!preset_name.empty()) {
    meta["cedar_preset"] = preset_name;
    meta["cedar_seed"] = std::to_string(seed);
  }
  const fs::path root(dir);
  write_text(root / "config.json", config_json(cfg).dump(2) + "\n");
  TensorStream src(jobs, order, seed);
  if (shards == 1) {
    write_shard(root / "model.safetensors", order, 0, order.size(), src, meta);
    return;
  }
  // K shards of contiguous runs of the sorted names, balanced by bytes; every shard non-empty.
  uint64_t total = 0;
  for (const ExpectedTensor* t : order) total += nbytes(*t);
  nlohmann::json weight_map = nlohmann::json::object();
  size_t next = 0;
  uint64_t done = 0;
  for (int k = 0; k < shards; ++k) {
    char fname[64];
    std::snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", k + 1, shards);
    const uint64_t target = total * uint64_t(k + 1) / uint64_t(shards);
    const size_t must_leave = size_t(shards - k - 1);  // one tensor for each later shard
    const size_t first = next;
    do {
      done += nbytes(*order[next]);
      weight_map[order[next]->name] = fname;
      ++next;
    } while (next < order.size() - must_leave && (done < target || k == shards - 1));
    write_shard(root / fname, order, first, next, src, meta);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_text(root / "model.safetensors.index.json", index.dump(2) + "\n");
}

void make_model(const MakeModelOptions& opt) {
  // every preset but the release's own shape (a 552B-parameter checkpoint of random weights)
  std::string known;
  bool found = false;
  for (const std::string& name : preset_names()) {
    if (name == "released") continue;
    known += (known.empty() ? "" : ", ") + name;
    found = found || name == opt.preset;
  }
  if (!found)
    throw std::runtime_error("--preset must be one of " + known + " (got '" + opt.preset + "')");
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
