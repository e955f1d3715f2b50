#include "runtime/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "numerics/q8b.h"

namespace cedar::runtime {

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;
// the row cache of streamed Engram tables (a token reads ~50 rows of a few hundred bytes)
constexpr int64_t kEngramRowCache = 64 * kMiB;

// Under a budget: the Engram tables go to storage first, then the routed experts get what is
// left (all mapped when they fit, else an expert cache); refused below the least a pass needs.
void fit_budget(MemoryPlan& p) {
  int64_t fixed = p.dense + p.head_copy + p.kv + p.prefix_cache + p.workspace;
  if (p.budget - fixed >= p.routed_experts + p.engram_tables) return;
  if (p.engram_tables > 0) {
    p.engram_streamed = true;
    p.engram_cache = std::min(p.engram_tables, kEngramRowCache);
    fixed += p.engram_cache;
  }
  const int64_t left = p.budget - fixed;
  const int64_t least = int64_t(p.min_expert_slots) * p.expert_slot;
  if (left >= p.routed_experts) return;
  if (p.routed_experts > 0 && left >= least) {
    p.streamed = true;
    p.expert_cache = left;
    return;
  }
  p.expert_cache = std::max<int64_t>(0, left);
  const std::string kv = p.kv_shared ? "KV pool " + format_bytes(p.kv)
                                     : "KV for " + std::to_string(p.parallel) + " x " +
                                           std::to_string(p.ctx) + " tokens " + format_bytes(p.kv);
  p.refusal =
      "memory: the plan needs " + format_bytes(fixed + least) + " (dense weights " +
      format_bytes(p.dense) +
      (p.head_copy > 0 ? ", head copy (--head-type q8) " + format_bytes(p.head_copy) : "") + ", " +
      kv + ", prefix cache " + format_bytes(p.prefix_cache) + ", workspace " +
      format_bytes(p.workspace) +
      (p.engram_streamed ? ", Engram row cache " + format_bytes(p.engram_cache) : "") +
      ", at least " + std::to_string(p.min_expert_slots) + " routed experts " +
      format_bytes(least) + ") but --mem-budget is " + format_bytes(p.budget) +
      ": raise --mem-budget, or lower -c / --parallel / --cache-ram" +
      (p.parallel > 1 ? ", or share a smaller KV pool between the slots with --kv-ram" : "");
}

}  // namespace

MemoryPlan plan_memory(const Checkpoint& ck, const MemoryRequest& r) {
  std::vector<PlannedTensor> ts;
  // Streaming reads a tensor's bytes from its file: one that a GGUF load re-encoded into memory
  // (F16/BF16/F32 Engram tables, experts of a type without a kernel family, --gguf-requant) stays
  // resident with the dense weights.
  for (const auto& [name, t] : ck.tensors())
    ts.push_back({name, int64_t(t.nbytes), ck.locate(t.data, t.nbytes).has_value()});
  for (const auto& [name, b] : ck.block_weights())  // GGUF blocks: always in the file
    ts.push_back({name, int64_t(b.nbytes), true});
  int64_t head_copy = 0;  // (VocabProduct requantizes a bf16 head of whole 32-value blocks)
  if (auto h = ck.tensors().find("head.weight");
      h != ck.tensors().end() && h->second.dtype == DType::BF16 && h->second.shape.size() == 2 &&
      h->second.shape[1] % kQ8bBlock == 0)
    head_copy = q8b_bytes(h->second.shape[0], h->second.shape[1]);
  return plan_memory(ck.config(), ts, head_copy, r);
}

MemoryPlan plan_memory(const ModelConfig& cfg, const MemoryRequest& r) {
  std::vector<PlannedTensor> ts;
  int64_t head_copy = 0;
  for (const ExpectedTensor& t : expected_tensors(cfg)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    ts.push_back({t.name, n * int64_t(dtype_size(t.dtype)), true});
    if (t.name == "head.weight" && t.dtype == DType::BF16 && t.shape.size() == 2 &&
        t.shape[1] % kQ8bBlock == 0)
      head_copy = q8b_bytes(t.shape[0], t.shape[1]);
  }
  return plan_memory(cfg, ts, head_copy, r);
}

MemoryPlan plan_memory(const ModelConfig& cfg, const std::vector<PlannedTensor>& tensors,
                       int64_t q8_head_bytes, const MemoryRequest& r) {
  MemoryPlan p;
  p.budget = r.budget;
  p.parallel = std::max(1, r.parallel);
  p.ctx = r.ctx > 0 ? r.ctx : cfg.max_position_embeddings;
  // bytes per routed expert: a slot places each run at its page residue (+4 KiB per tensor)
  std::map<std::string, int64_t> experts;
  for (const PlannedTensor& t : tensors) {
    p.checkpoint += t.bytes;
    if (!t.in_file) continue;
    if (is_engram_table(t.name)) p.engram_tables += t.bytes;
    const std::string e = routed_expert_of(t.name);
    if (e.empty()) continue;
    p.routed_experts += t.bytes;
    experts[e] += t.bytes + 4096;
  }
  p.dense = p.checkpoint - p.routed_experts - p.engram_tables;
  if (r.q8_head) p.head_copy = q8_head_bytes;
  for (const auto& [name, b] : experts) p.expert_slot = std::max(p.expert_slot, b);
  for (int l = 0; l < cfg.num_hidden_layers + cfg.num_nextn_predict_layers; ++l)
    p.min_expert_slots = std::max(p.min_expert_slots, cfg.experts_per_tok_of(l));

  p.kv_per_sequence = sequence_kv_bytes(kv_layout(cfg), p.ctx);
  p.kv = int64_t(p.parallel) * p.kv_per_sequence;
  if (r.kv_pool > 0 && r.kv_pool < p.kv) {
    p.kv = r.kv_pool;
    p.kv_shared = true;
  }
  p.prefix_cache = std::max<int64_t>(0, r.prefix_cache);
  // activations of a pass (the mHC streams and a few projections' outputs per row) and the
  // logits rows of every slot's verify pass, plus the allocator's slack
  const int64_t rows_logits = int64_t(p.parallel) * (cfg.dspark_block_size + 2) + 1;
  p.workspace = int64_t(std::max(1, r.batch_rows)) * cfg.hidden_size * cfg.hc_mult * 4 * 16 +
                rows_logits * cfg.vocab_size * 4 + 16 * kMiB;
  p.expert_cache = p.routed_experts;
  p.engram_cache = p.engram_tables;

  if (p.kv < p.kv_per_sequence) {
    p.refusal = "memory: --kv-ram " + format_bytes(p.kv) + " cannot hold one sequence of " +
                std::to_string(p.ctx) + " tokens (" + format_bytes(p.kv_per_sequence) +
                "): raise --kv-ram, or lower -c";
    return p;
  }
  if (p.budget > 0) fit_budget(p);
  return p;
}

std::string routed_expert_of(const std::string& name) {
  const size_t at = name.find(".ffn.experts.");
  if (at == std::string::npos) return {};
  const size_t id = at + 13, dot = name.find('.', id);
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

bool is_engram_table(const std::string& name) {
  return name.find(".engram.embed.") != std::string::npos;
}

int64_t sequence_kv_bytes(const KvLayout& kv, int64_t tokens) {
  return kv.bytes_for_tokens(std::max<int64_t>(0, tokens)) + kv.dspark_window_state_bytes + kMiB;
}

std::string MemoryPlan::describe() const {
  std::string s;
  auto line = [&](const char* what, int64_t b, const std::string& note = {}) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-16s %12s%s%s\n", what, format_bytes(b).c_str(),
                  note.empty() ? "" : "  ", note.c_str());
    s += buf;
  };
  s += "memory plan (" + std::to_string(parallel) + " x " + std::to_string(ctx) + " tokens, " +
       (budget > 0 ? "--mem-budget " + format_bytes(budget) : std::string("no --mem-budget")) +
       "):\n";
  line("checkpoint", checkpoint);
  line("dense weights", dense, "mapped");
  line("routed experts", routed_experts, streamed ? "streamed from storage" : "mapped");
  if (engram_tables > 0)
    line("Engram tables", engram_tables,
         engram_streamed ? "read by row through a " + format_bytes(engram_cache) + " row cache"
                         : "mapped");
  if (streamed)
    line("expert cache", expert_cache,
         std::to_string(expert_slot > 0 ? expert_cache / expert_slot : 0) + " slots of " +
             format_bytes(expert_slot));
  line("KV state", kv,
       format_bytes(kv_per_sequence) + " per sequence" +
           (kv_shared ? ", a pool shared by the slots (requests admitted while their KV fits)"
                      : ""));
  line("prefix cache", prefix_cache);
  if (head_copy > 0) line("head copy", head_copy, "--head-type q8");
  line("workspace", workspace, "estimate");
  line("resident", resident());
  if (!refusal.empty()) s += "  refused: " + refusal + "\n";
  return s;
}

int64_t parse_size(const std::string& s, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = s.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  int shift = -1;
  if (unit.empty())
    shift = 0;
  else if (unit.size() == 1) {
    const char c = char(std::toupper(static_cast<unsigned char>(unit[0])));
    shift = c == 'K' ? 10 : c == 'M' ? 20 : c == 'G' ? 30 : c == 'T' ? 40 : -1;
  }
  if (used == 0 || shift < 0 || !std::isfinite(v) || v <= 0 || v * std::ldexp(1.0, shift) > 9e18)
    throw std::runtime_error(what + " must be a size such as 512M, 16G or 1.5T, got '" + s + "'");
  return int64_t(v * std::ldexp(1.0, shift));
}

std::string format_bytes(int64_t b) {
  char buf[32];
  const double v = double(b);
  if (b >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / double(int64_t(1) << 30));
  else if (b > 0 && b < kMiB)
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / double(kMiB));
  return buf;
}

}  // namespace cedar::runtime
