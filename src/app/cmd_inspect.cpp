// cedar inspect --model DIR | --config config.json [--json] [--kv-tokens N]
// The layer-role table (spec §2.2), parameter counts from the tensor inventory (§2.4) and the
// global KV bytes per token from the cache layout (§10). With --model the whole checkpoint is
// validated first (Checkpoint::open), so a corrupt model fails here with a named error.
// --kv-tokens N also ALLOCATES a real SequenceState with every source's global rows reserved for
// N tokens and reports the bytes measured from its buffers (capacities), next to the arithmetic.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "app/inspect_gguf.h"
#include "app/load_model.h"
#include "app/plan_advice.h"
#include "base/args.h"
#include "forward/vocab_product.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/param_count.h"
#include "runtime/bench_accounting.h"
#include "runtime/memory_plan.h"
#include "state/sequence_state.h"

namespace cedar::app {

namespace {

using nlohmann::json;

const char* kMethod =
    "parameters are logical weights from the tensor inventory (packed FP4 counts 2 per byte, "
    "UE8M0 block scales count 0). Activated: routed experts counted num_experts_per_tok of "
    "n_routed_experts, embedding lookup excluded. Per generated token = every layer (attention "
    "incl. compressor/indexer, router, selected + shared experts, mHC, norms) + final norm + "
    "head. Per prompt token with CED = layers below the candidate source fully + the candidate "
    "source's global-KV projection (attn_norm, compressor, indexer wk/k_norm); the decoder replay "
    "of the last window and the head run once per prompt. Engram (projections + gathered rows) "
    "is listed separately.";

std::string part_of(const ModelConfig& c, const LayerPlan& p) {
  if (c.candidate_source_layer_id < 0) return "-";
  return p.is_decoder ? "dec" : "enc";
}

std::string extras_of(const ModelConfig& c, const LayerPlan& p) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : ", ") + x; };
  if (p.has_engram) add("Engram #" + std::to_string(p.engram_index));
  if (p.is_candidate_source) add("candidate source (CED projection)");
  if (p.uses_candidates) add("uses candidates");
  for (int t : c.dspark_target_layer_ids)
    if (t == p.layer) add("DSpark tap");
  return s;
}

// 551566180464 -> "551.566B"; small models read in M/K so that they do not print as 0.000B.
std::string billions(int64_t n) {
  char buf[64];
  if (n >= 1000000000)
    std::snprintf(buf, sizeof buf, "%.3fB", double(n) / 1e9);
  else if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.3fM", double(n) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3fK", double(n) / 1e3);
  return buf;
}

std::string with_commas(int64_t n) {
  std::string d = std::to_string(n < 0 ? -n : n), r;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) r += ',';
    r += d[i];
  }
  return (n < 0 ? "-" : "") + r;
}

std::string num(double v) {  // 890 -> "890", 35.5 -> "35.5"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args args(
      "inspect",
      {{"model", "m", true, "model directory (validates the whole checkpoint) or a GGUF file"},
       {"tensor", "", true, "GGUF: write this tensor's decoded values (a release or GGUF name)"},
       {"out", "o", true, "GGUF --tensor: the .npy file to write"},
       {"config", "", true, "a config.json alone (no weights)"},
       {"json", "", false, "machine-readable output"},
       {"kv-tokens", "", true, "also report the cache bytes for N tokens"},
       {"plan", "", false,
        "print the memory plan of serving the model (exit 1 when it is refused)"},
       {"parallel", "np", true, "--plan: sequences held at once (default 1)"},
       {"ctx-size", "c", true, "--plan: tokens per sequence (default: the model's)"},
       {"cache-ram", "", true, "--plan: prefix cache MiB (default 0)"},
       {"mem-budget", "", true, std::string("--plan: ") + kMemBudgetHelp},
       {"kv-ram", "", true, std::string("--plan: ") + kKvRamHelp},
       {"head-type", "", true, std::string("--plan: ") + kHeadTypeHelp},
       {"ram", "", true,
        "--plan: advise `cedar serve` flags for a machine with this much RAM, e.g. 256G "
        "(default: this machine's)",
        "SIZE"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  if (args.has("model") == args.has("config"))
    throw std::runtime_error("give exactly one of --model DIR or --config FILE");
  // (--plan: the memory plan of any model, a GGUF file's included, below)
  if (args.has("model") && gguf::is_gguf_file(args.get("model")) && !args.has("plan"))
    return inspect_gguf(args.get("model"), args.has("json"), args.get("tensor", ""),
                        args.get("out", ""));
  if (args.has("tensor")) throw std::runtime_error("--tensor reads a GGUF file (--model F.gguf)");
  if (!args.positional().empty())
    throw std::runtime_error("unexpected argument '" + args.positional()[0] + "'");
  int64_t kv_tokens = -1;
  if (args.has("kv-tokens")) {
    kv_tokens = args.get_int("kv-tokens", -1);
    if (kv_tokens < 0) throw std::runtime_error("--kv-tokens must be a non-negative integer");
  }

  std::unique_ptr<Checkpoint> ck;
  ModelConfig cfg;
  std::string source;
  if (args.has("model")) {
    source = args.get("model");
    ck = Checkpoint::open(source);
    cfg = ck->config();
  } else {
    source = args.get("config");
    cfg = ModelConfig::from_file(source);  // parses and validates
  }
  if (args.has("plan")) {
    const long long parallel = args.get_int("parallel", 1), ctx = args.get_int("ctx-size", 0);
    const long long cache = args.get_int("cache-ram", 0);
    if (parallel < 1 || parallel > (1 << 20) || ctx < 0 || cache < 0)
      throw UsageError("--parallel, --ctx-size and --cache-ram must be positive integers");
    runtime::MemoryRequest req = memory_request(args, int(parallel), ctx, int64_t(cache) << 20,
                                                runtime::MemoryRequest{}.batch_rows);
    // (run, serve and bench: Engine::load sets it from EngineOptions::head_type)
    req.q8_head = parse_head_type(args.get("head-type", "stored")) == HeadType::kQ8;
    // with --config: the tensors the config implies in the release layout (no weights needed)
    auto plan = [&](const runtime::MemoryRequest& r) {
      return ck ? runtime::plan_memory(*ck, r) : runtime::plan_memory(cfg, r);
    };
    const runtime::MemoryPlan p = plan(req);
    const int64_t ram =
        args.has("ram") ? runtime::parse_size(args.get("ram"), "--ram") : physical_ram();
    runtime::MemoryRequest advised = req;
    advised.budget = 0;
    const std::string model = ck ? source : std::filesystem::path(source).parent_path().string();
    const std::string advice = plan_advice(ram, advised, plan, model.empty() ? "." : model);
    if (args.has("json")) {
      const json pj = {{"budget", p.budget},
                       {"parallel", p.parallel},
                       {"ctx", p.ctx},
                       {"checkpoint", p.checkpoint},
                       {"dense", p.dense},
                       {"head_copy", p.head_copy},
                       {"routed_experts", p.routed_experts},
                       {"engram_tables", p.engram_tables},
                       {"engram_streamed", p.engram_streamed},
                       {"engram_cache", p.engram_cache},
                       {"expert_slot", p.expert_slot},
                       {"min_expert_slots", p.min_expert_slots},
                       {"kv_per_sequence", p.kv_per_sequence},
                       {"kv", p.kv},
                       {"kv_shared", p.kv_shared},
                       {"prefix_cache", p.prefix_cache},
                       {"workspace", p.workspace},
                       {"expert_cache", p.expert_cache},
                       {"streamed", p.streamed},
                       {"resident", p.resident()},
                       {"refusal", p.refusal},
                       {"from_config_only", !ck},
                       {"advice", advice}};
      std::printf("%s\n", pj.dump(2).c_str());
    } else {
      if (!ck)
        std::printf("%s alone: the tensors of the release layout it implies (no weights read)\n",
                    source.c_str());
      // decode reads about this much a token (bench's accounting, counted from the config)
      const bench::DecodeTraffic t = bench::decode_traffic(
          cfg, 4096, ck ? bench::stored_bytes(*ck) : std::map<std::string, int64_t>{});
      const double gb = double(t.weights()) * 1e-9;
      std::printf("%s%s", p.describe().c_str(), advice.c_str());
      std::printf(
          "speed: a decoded token reads %.2f GB of weights%s, so decode runs at about memory "
          "bandwidth / %.2f GB (e.g. %.1f tok/s at 40 GB/s) when they are in RAM; `cedar bench` "
          "measures this machine's rate and ceilings\n",
          gb, p.head_copy > 0 ? " (with the stored head)" : "", gb, 40.0 / gb);
    }
    return p.refusal.empty() ? 0 : 1;
  }
  const auto inventory = expected_tensors(cfg);
  const ParamCounts pc = count_params(cfg, inventory);
  const KvLayout kv = kv_layout(cfg);

  json j;
  j["source"] = source;
  j["checkpoint_validated"] = bool(ck);
  json layers = json::array();
  int n_role[4] = {0, 0, 0, 0};
  for (const auto& p : cfg.layers) {
    n_role[int(p.role)]++;
    json e = {{"layer", p.layer},
              {"part", part_of(cfg, p)},
              {"ratio", p.ratio},
              {"role", layer_role_name(p.role)},
              {"kv_source", p.kv_source >= 0 ? json(p.kv_source) : json(nullptr)},
              {"topk_source", p.index_source >= 0 ? json(p.index_source) : json(nullptr)},
              {"extras", extras_of(cfg, p)}};
    layers.push_back(e);
  }
  j["layers"] = layers;
  j["role_counts"] = {
      {"SWA", n_role[0]}, {"Full", n_role[1]}, {"Reindex", n_role[2]}, {"Reuse", n_role[3]}};
  j["dspark_stages"] = cfg.num_nextn_predict_layers;
  j["params"] = {{"total", pc.total()},
                 {"backbone", pc.backbone},
                 {"embedding", pc.embedding},
                 {"head", pc.head},
                 {"engram_tables", pc.engram_tables},
                 {"engram_projections", pc.engram_projections},
                 {"dspark", pc.dspark},
                 {"vision", pc.vision},
                 {"activated_prompt_token", pc.active_prompt},
                 {"activated_prompt_token_with_head", pc.active_prompt + pc.head},
                 {"activated_generated_token", pc.active_generated},
                 {"activated_generated_token_with_embedding", pc.active_generated + pc.embedding},
                 {"engram_activated_prompt_token", pc.engram_active_prompt},
                 {"engram_activated_generated_token", pc.engram_active_generated},
                 {"method", kMethod}};
  j["inventory"] = {{"tensors", pc.checkpoint_tensors}, {"bytes", pc.checkpoint_bytes}};
  json srcs = json::array();
  for (const auto& s : kv.sources) srcs.push_back({{"layer", s.layer}, {"ratio", s.ratio}});
  j["kv"] = {{"sources", srcs},
             {"main_row_bytes", kv.main_row_bytes},
             {"index_row_bytes", kv.index_row_bytes},
             {"main_bytes_per_token", kv.main_bytes_per_token},
             {"index_bytes_per_token", kv.index_bytes_per_token},
             {"bytes_per_token", kv.bytes_per_token()},
             {"window_row_bytes", kv.window_row_bytes},
             {"window_state_bytes", kv.window_state_bytes},
             {"dspark_window_state_bytes", kv.dspark_window_state_bytes}};
  // the real allocation: a sequence state sized for kv_tokens (pages are reserved, not touched)
  size_t a_global = 0, a_window = 0, a_total = 0;
  if (kv_tokens >= 0) {
    SequenceState st(cfg);
    st.reserve(kv_tokens);
    a_global = st.global_bytes();
    a_window = st.window_bytes();
    a_total = st.bytes();
    j["kv"]["tokens"] = kv_tokens;
    j["kv"]["bytes_for_tokens"] = kv.bytes_for_tokens(kv_tokens);
    j["kv"]["allocated"] = {
        {"global_bytes", a_global},
        {"global_bytes_per_token",
         kv_tokens > 0 ? json(double(a_global) / double(kv_tokens)) : json(nullptr)},
        {"window_bytes", a_window},
        {"other_fixed_bytes", a_total - a_global - a_window},
        {"total_bytes", a_total},
        {"method", "SequenceState(config).reserve(tokens): capacities of the allocated buffers"}};
  }

  if (args.has("json")) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }

  std::printf("%s: DeepSeek-V4.1 text model, %d layers%s\n", source.c_str(), cfg.n_layers(),
              ck ? " (checkpoint validated: every tensor's name, dtype and shape)" : "");
  std::printf("\n%-5s %-4s %-5s %-8s %-9s %-10s %s\n", "layer", "part", "ratio", "role",
              "kv source", "top-k src", "extras");
  for (const auto& p : cfg.layers) {
    std::string kvs = p.kv_source >= 0 ? std::to_string(p.kv_source) : "-";
    std::string tks = p.index_source >= 0 ? std::to_string(p.index_source) : "-";
    std::printf("%-5d %-4s %-5d %-8s %-9s %-10s %s\n", p.layer, part_of(cfg, p).c_str(), p.ratio,
                layer_role_name(p.role), kvs.c_str(), tks.c_str(), extras_of(cfg, p).c_str());
  }
  for (int s = 0; s < cfg.num_nextn_predict_layers; ++s)
    std::printf("%-5s %-4s %-5d %-8s %-9s %-10s %s\n", ("mtp." + std::to_string(s)).c_str(),
                "draft", 0, "SWA", "-", "-", "DSpark stage");
  std::printf("roles: %d SWA, %d Full, %d Reindex, %d Reuse\n", n_role[0], n_role[1], n_role[2],
              n_role[3]);

  std::printf("\nparameters (from the tensor inventory: %s tensors, %s bytes)\n",
              with_commas(pc.checkpoint_tensors).c_str(), with_commas(pc.checkpoint_bytes).c_str());
  std::printf("  backbone (excl. Engram)          %s  (%s)\n", billions(pc.backbone).c_str(),
              with_commas(pc.backbone).c_str());
  std::printf("  Engram tables                    %s  (%s)\n", billions(pc.engram_tables).c_str(),
              with_commas(pc.engram_tables).c_str());
  std::printf("  Engram projections               %s\n", billions(pc.engram_projections).c_str());
  if (cfg.num_nextn_predict_layers > 0)
    std::printf("  DSpark (mtp.*)                   %s\n", billions(pc.dspark).c_str());
  if (cfg.has_vision)
    std::printf("  vision                           %s\n", billions(pc.vision).c_str());
  std::printf("  total                            %s\n", billions(pc.total()).c_str());
  std::printf("  activated per prompt token (CED) %s  (%s with head); Engram +%s\n",
              billions(pc.active_prompt).c_str(), billions(pc.active_prompt + pc.head).c_str(),
              billions(pc.engram_active_prompt).c_str());
  std::printf(
      "  activated per generated token    %s  (%s counting the embedding table); "
      "Engram +%s\n",
      billions(pc.active_generated).c_str(), billions(pc.active_generated + pc.embedding).c_str(),
      billions(pc.engram_active_generated).c_str());
  std::printf("  method: %s\n", kMethod);

  std::printf("\nglobal KV cache (compressed main KV + index keys of the KV sources)\n");
  std::printf("  main row %" PRId64 " B (head_dim/2 FP4 + head_dim/16 E4M3), index key %" PRId64
              " B (index_head_dim/2 FP4 + index_head_dim/32 UE8M0)\n",
              kv.main_row_bytes, kv.index_row_bytes);
  std::string srcs_s;
  for (const auto& s : kv.sources)
    srcs_s += (srcs_s.empty() ? "" : ", ") + std::to_string(s.layer) + " (1/" +
              std::to_string(s.ratio) + ")";
  std::printf("  sources: %s\n", srcs_s.c_str());
  std::printf("  bytes/token: %s (main %s + index %s)\n", num(kv.bytes_per_token()).c_str(),
              num(kv.main_bytes_per_token).c_str(), num(kv.index_bytes_per_token).c_str());
  std::printf("  window rings (fixed per sequence): %d layers x %d x %" PRId64 " B = %s B\n",
              cfg.n_layers(), cfg.sliding_window, kv.window_row_bytes,
              with_commas(kv.window_state_bytes).c_str());
  if (cfg.num_nextn_predict_layers > 0)
    std::printf("  DSpark rings (not included above): %s B\n",
                with_commas(kv.dspark_window_state_bytes).c_str());
  if (kv_tokens >= 0) {
    std::printf("  cache for %s tokens: %s B (complete compressed rows + window rings)\n",
                with_commas(kv_tokens).c_str(),
                with_commas(kv.bytes_for_tokens(kv_tokens)).c_str());
    std::printf("\nallocated sequence state for %s tokens (measured from its buffers)\n",
                with_commas(kv_tokens).c_str());
    std::printf("  global KV: %s B = %s B/token\n", with_commas(int64_t(a_global)).c_str(),
                kv_tokens > 0 ? num(double(a_global) / double(kv_tokens)).c_str() : "-");
    std::printf("  window rings (fixed): %s B\n", with_commas(int64_t(a_window)).c_str());
    std::printf("  compressor tails + Engram history (fixed): %s B\n",
                with_commas(int64_t(a_total - a_global - a_window)).c_str());
    std::printf("  total: %s B\n", with_commas(int64_t(a_total)).c_str());
  }
  return 0;
}

}  // namespace cedar::app
