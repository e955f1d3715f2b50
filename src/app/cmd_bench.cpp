// `cedar bench -m DIR [--prompt N,...] [--gen N] [--reps K] [-t T] [--json]`: speed of prefill
// (CED and exact) and decode on a model directory, as ratios against the machine's own ceilings
// measured in the same run (DESIGN.md "Performance method", docs/BENCH.md):
//  * decode is bandwidth-bound: bytes of weights + KV one decoded token reads (counted from the
//    model, runtime/bench_accounting) x tokens/s = achieved GB/s, over the measured read
//    bandwidth (runtime/bench_probes);
//  * prefill is compute-bound: FLOPs per prompt row (counted for each plan) x rows/s = achieved
//    FLOP/s, over the measured FMA peak (the best of one probe per vector width the CPU has)
//    and over the kernel table's own GEMM ceiling.
// Every time is a median (K reps for prefill, all generated steps for decode).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/bench_speculative.h"
#include "app/bench_vision.h"
#include "app/commands.h"
#include "app/load_model.h"
#include "app/ranks.h"
#include "app/read_file.h"
#include "base/args.h"
#include "base/progress.h"
#include "forward/moe.h"
#include "forward/transformer.h"
#include "kernels/kernel_table.h"
#include "numerics/q8b.h"
#include "runtime/bench_accounting.h"
#include "runtime/bench_probes.h"
#include "runtime/engine.h"
#include "runtime/memory_plan.h"
#include "runtime/sampler.h"

namespace cedar::app {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    const std::string tok = text.substr(i, j - i);
    if (tok.empty() || tok.size() > 9 || tok.find_first_not_of("0123456789") != std::string::npos)
      throw std::runtime_error("--prompt: '" + tok + "' is not a positive token count");
    const int64_t v = std::stoll(tok);
    if (v < 1) throw std::runtime_error("--prompt: token counts must be >= 1");
    out.push_back(v);
    i = j + 1;
  }
  return out;
}

// A deterministic prompt: BOS then ids spread over the ordinary BPE range (an LCG, so every run
// and every plan sees the same tokens).
std::vector<int32_t> make_prompt(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  const int64_t lo = std::min<int64_t>(100, vocab - 1),
                span = std::max<int64_t>(1, std::min<int64_t>(vocab, 100000) - lo);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids[size_t(i)] = int32_t(lo + int64_t((x >> 33) % uint64_t(span)));
  }
  ids[0] = 0;  // BOS
  return ids;
}

// the sampler's vectorised scan (a scalar max_element over 129,280 logits was a tenth of a
// bench run on the default model, between the timed steps)
int32_t argmax(const float* v, int64_t n) { return runtime::argmax({v, size_t(n)}); }

struct PrefillResult {
  bool ran = false;
  std::vector<double> secs;
  double median_s = 0;
  bench::PrefillFlops flops;
};

json probe_json(const bench::Probe& p, const char* unit, double scale) {
  return {{"median", p.median / scale}, {"min", p.min / scale},
          {"max", p.max / scale},       {"unit", unit},
          {"width", p.width},           {"passes", p.passes},
          {"threads", p.threads},       {"method", p.method}};
}

// The machine's ceilings, measured on the model's own pool before any model timing.
struct Machine {
  bench::Probe bw;                 // read bandwidth, widest vector loads
  std::vector<bench::Probe> fmas;  // one FMA probe per vector width, narrowest first
  bench::Probe fma;                // the best of fmas: "FMA peak" in the ratios
  bench::Probe kern;               // the kernel table's own fp8_gemm
  std::vector<bench::Probe> dots;  // bf16 and int8 dot-product peaks, where the CPU has them
  // the best dot-product peak (0: none): what a table multiplying in bf16 or int8 can reach
  double best_dot() const { return dots.empty() ? 0.0 : bench::best_probe(dots).median; }
};

Machine measure_machine(ThreadPool& pool, const KernelTable& kernels, size_t bw_bytes, int passes) {
  Machine m;
  m.bw = bench::measure_read_bandwidth(pool, bw_bytes, passes);
  m.fmas = bench::measure_fma_peaks(pool, passes);
  m.fma = bench::best_probe(m.fmas);
  m.kern = bench::measure_kernel_gemm_peak(pool, kernels, passes);
  m.dots = bench::measure_dot_peaks(pool, passes);
  return m;
}

json machine_json(const Machine& m) {
  json fmas = json::array();
  for (const bench::Probe& p : m.fmas) fmas.push_back(probe_json(p, "GFLOP/s", 1e9));
  json dots = json::array();
  for (const bench::Probe& p : m.dots) dots.push_back(probe_json(p, "GFLOP/s", 1e9));
  return {{"read_bandwidth", probe_json(m.bw, "GB/s", 1e9)},
          {"fma_peak", probe_json(m.fma, "GFLOP/s", 1e9)},
          {"fma_probes", fmas},
          {"dot_probes", dots},
          {"kernel_gemm_peak", probe_json(m.kern, "GFLOP/s", 1e9)}};
}

// The storage probe of a streamed run, reading as the expert cache does: whole routed experts
// (or, for Engram alone, 1 MiB pieces of its tables) of the shard that holds the first one,
// spread over the file, up to 512 MiB, on the cache's I/O thread count.
bench::Probe storage_probe(const Checkpoint& ck, int passes) {
  std::map<std::string, bench::ByteRange> unit;  // expert (or table piece) -> its bytes
  std::string path;
  for (const auto& [name, t] : ck.tensors()) {
    const std::string expert = runtime::routed_expert_of(name);
    if (expert.empty() && !runtime::is_engram_table(name)) continue;
    const auto where = ck.locate(t.data, t.nbytes);
    if (!where) continue;
    if (path.empty()) path = where->path;
    if (where->path != path) continue;
    if (!expert.empty()) {
      bench::ByteRange& r = unit[expert];
      const uint64_t end = std::max(r.offset + r.n, uint64_t(where->offset + t.nbytes));
      r.offset = r.n ? std::min(r.offset, uint64_t(where->offset)) : uint64_t(where->offset);
      r.n = end - r.offset;
    } else {
      for (uint64_t at = 0; at < t.nbytes; at += 1 << 20)
        unit[name + "@" + std::to_string(at)] = {where->offset + at,
                                                 std::min<uint64_t>(1 << 20, t.nbytes - at)};
    }
  }
  if (unit.empty()) throw std::runtime_error("bench: no streamed tensor is in a mapped shard");
  std::vector<bench::ByteRange> all;
  for (const auto& [k, r] : unit) all.push_back(r);
  std::sort(all.begin(), all.end(), [](const bench::ByteRange& a, const bench::ByteRange& b) {
    return a.offset < b.offset;
  });
  uint64_t total = 0;
  for (const bench::ByteRange& r : all) total += r.n;
  const size_t step = size_t(std::max<uint64_t>(1, (total + (512ull << 20) - 1) / (512ull << 20)));
  std::vector<bench::ByteRange> pick;
  for (size_t i = 0; i < all.size(); i += step) pick.push_back(all[i]);
  return bench::measure_storage_read(path, pick, ExpertCache::kIoThreads, passes);
}

// A streamed decode against its storage-bound roofline: a token costs the bytes it read from
// storage at the storage probe's rate plus the bytes it read from memory at the memory probe's.
struct StorageDecode {
  json j;
  std::string line;
};
StorageDecode storage_decode(const ExpertCacheStats& a, const ExpertCacheStats& b,
                             const EngramStoreStats& ea, const EngramStoreStats& eb, int64_t steps,
                             double tok_s, double mem_bytes, double expert_avg_bytes,
                             const bench::Probe& bw, const bench::Probe& storage) {
  const double per = 1.0 / double(std::max<int64_t>(1, steps));
  const double engram_read = double(eb.bytes_read - ea.bytes_read) * per;
  const double read = double(b.bytes_read - a.bytes_read) * per + engram_read;
  // the roofline counts the bytes a token needs: reads of wrong guesses are overhead
  const double wasted = double(b.guess_unused - a.guess_unused) * per * expert_avg_bytes;
  const double needed = std::max(0.0, read - wasted);
  const int64_t look = b.lookups - a.lookups;
  const double hit = look ? double(b.hits - a.hits) / double(look) : 0.0;
  const double roof = 1.0 / (needed / storage.median + mem_bytes / bw.median);
  StorageDecode r;
  r.j = {
      {"bytes_read_per_token", read},
      {"bytes_needed_per_token", needed},
      {"guessed_per_token", double(b.guessed - a.guessed) * per},
      {"engram_bytes_read_per_token", engram_read},
      {"engram_row_hit_rate",
       eb.lookups > ea.lookups ? double(eb.hits - ea.hits) / double(eb.lookups - ea.lookups) : 0.0},
      {"reads_per_token", double(b.reads - a.reads) * per},
      {"read_s_per_token", (b.read_seconds - a.read_seconds) * per},
      {"wait_s_per_token", (b.wait_seconds - a.wait_seconds) * per},
      {"prefetched_per_token", double(b.prefetched - a.prefetched) * per},
      {"guesses_unused_per_token", double(b.guess_unused - a.guess_unused) * per},
      {"hit_rate", hit},
      {"storage_gb_s", storage.median / 1e9},
      {"roofline_tokens_per_s", roof},
      {"ratio_storage_roofline", tok_s / roof}};
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "  %-7s streamed: %.2f MB read from storage per token (expert hit rate %.3f, "
                "%.1f ms/token waiting for reads), storage %.2f GB/s -> roofline %.2f tok/s, "
                "achieved %.1f%%\n",
                "", read / 1e6, hit, 1e3 * (b.wait_seconds - a.wait_seconds) * per,
                storage.median / 1e9, roof, 100.0 * tok_s / roof);
  r.line = buf;
  return r;
}

// " (R% of the B GB/s read between its steps)" for a decode that took read-bandwidth passes
std::string between_note(double achieved, double bw_during) {
  if (bw_during <= 0) return "";
  char s[96];
  std::snprintf(s, sizeof s, " (%.1f%% of the %.2f GB/s read between its steps)",
                100.0 * achieved / bw_during, bw_during / 1e9);
  return s;
}

void print_probe(const char* name, const bench::Probe& p, const char* unit, double scale) {
  char range[64];
  std::snprintf(range, sizeof range, "%.2f..%.2f", p.min / scale, p.max / scale);
  std::printf("  %-15s %-8s %9.2f %-8s %-16s %s\n", name, p.width.c_str(), p.median / scale, unit,
              range, p.method.c_str());
}

void print_machine(const Machine& m, long long passes, int threads) {
  std::printf("machine, measured in this run (median of %lld passes after a warmup, %d threads):\n",
              passes, threads);
  std::printf("  %-15s %-8s %9s %-8s %-16s %s\n", "probe", "width", "median", "unit", "min..max",
              "method");
  print_probe("read bandwidth", m.bw, "GB/s", 1e9);
  for (const bench::Probe& p : m.fmas) print_probe("FMA", p, "GFLOP/s", 1e9);
  for (const bench::Probe& p : m.dots) print_probe("dot product", p, "GFLOP/s", 1e9);
  print_probe("kernel GEMM", m.kern, "GFLOP/s", 1e9);
  std::printf("  FMA peak = %s, %.2f GFLOP/s (the best width above: %%FMA below is over it)\n",
              m.fma.width.c_str(), m.fma.median / 1e9);
  if (!m.dots.empty())
    std::printf("  dot-product peak = %s, %.2f GFLOP/s (%%dot below is over it)\n",
                bench::best_probe(m.dots).width.c_str(), m.best_dot() / 1e9);
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args(
      "bench",
      with_rank_options(
          {{"model", "m", true,
            "model directory or GGUF file (default: the embedded default model; e.g. make-model "
            "--preset small for bench figures)"},
           {"prompt", "", true, "comma-separated prompt sizes in tokens (default 256,1024)"},
           {"gen", "", true, "decode steps timed after each prompt (default 32)"},
           {"reps", "", true, "prefill repetitions per plan; the median is reported (default 3)"},
           {"threads", "t", true, "worker threads (default: all cores)"},
           {"kernels", "", true, kKernelsHelp},
           {"head-type", "", true, kHeadTypeHelp},
           {"gguf-requant", "", false, kGgufRequantHelp},
           {"mem-budget", "", true, kMemBudgetHelp},
           {"expert-policy", "", true, "eviction of the expert cache: lfu (default) or lru"},
           {"no-expert-guess", "", false,
            "streamed experts: do not prefetch each next layer's guessed experts"},
           {"plans", "", true, "prefill plans to time: ced,exact (default both)"},
           {"bw-mib", "", true, "bandwidth probe buffer in MiB (default 1024)"},
           {"probe-passes", "", true, "timed passes of each machine probe (default 7)"},
           {"seed", "", true, "prompt token seed (default 1)"},
           {"batch", "", true,
            "comma-separated batch sizes: decode that many copies of the first prompt's state "
            "together in batched passes (default 1,4,16; 0: skip)"},
           {"speculative", "", true,
            "off | dspark: also decode --gen tokens with DSpark speculative decoding (default: "
            "dspark "
            "when the model has DSpark stages)"},
           {"spec-tokens", "", true, "drafted tokens verified per pass (default: the block size)"},
           {"spec-confidence", "", true,
            "verify drafts only up to the first with confidence below P (default 0)"},
           {"spec-always", "", false,
            "verify on every step even where passes emit fewer tokens per second than plain steps "
            "(default: speculation pauses while it does not pay)"},
           {"vision", "", true,
            "on | off: time the vision tower on one image at the token limit (default: on when the "
            "model has a tower)"},
           {"prompt-file", "", true,
            "text whose continuation the speculative section decodes (default: the first prompt)"},
           {"json", "", false, "print one JSON object instead of the table"}}));
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  runtime::EngineOptions eo;
  eo.model_dir = model_dir_or_default(args);
  eo.threads = threads_option(args, "cedar bench");
  eo.kernels = args.get("kernels", "");
  eo.gguf_requant = args.has("gguf-requant");
  eo.head_type = parse_head_type(args.get("head-type", "stored"));
  const std::vector<int64_t> sizes = parse_sizes(args.get("prompt", "256,1024"));
  const std::string batch_arg = args.get("batch", "1,4,16");
  const std::vector<int64_t> batches =
      batch_arg == "0" ? std::vector<int64_t>{} : parse_sizes(batch_arg);
  for (int64_t b : batches)
    if (b > 4096) throw std::runtime_error("--batch sizes must be in 1..4096");
  const long long gen = args.get_int("gen", 32);
  const long long reps = args.get_int("reps", 3);
  const long long bw_mib = args.get_int("bw-mib", 1024);
  const long long passes = args.get_int("probe-passes", 7);
  const long long seed = args.get_int("seed", 1);
  if (gen < 1 || gen > 100000) throw std::runtime_error("--gen must be in 1..100000");
  if (reps < 1 || reps > 1000) throw std::runtime_error("--reps must be in 1..1000");
  if (bw_mib < 1 || bw_mib > (1 << 20)) throw std::runtime_error("--bw-mib must be in 1..1048576");
  if (passes < 1 || passes > 1000) throw std::runtime_error("--probe-passes must be in 1..1000");
  bool want_ced = false, want_exact = false;
  {
    const std::string plans = args.get("plans", "ced,exact");
    size_t i = 0;
    while (i <= plans.size()) {
      size_t j = plans.find(',', i);
      if (j == std::string::npos) j = plans.size();
      const std::string p = plans.substr(i, j - i);
      if (p == "ced")
        want_ced = true;
      else if (p == "exact")
        want_exact = true;
      else
        throw std::runtime_error("--plans: unknown plan '" + p + "' (ced, exact)");
      i = j + 1;
    }
  }
  const bool as_json = args.has("json");
  const std::string spec_arg = args.get("speculative", "");
  if (!spec_arg.empty() && spec_arg != "off" && spec_arg != "dspark")
    throw std::runtime_error("--speculative: '" + spec_arg + "' (off, dspark)");
  const long long spec_tokens = args.get_int("spec-tokens", 0);
  if (spec_tokens < 0 || spec_tokens > 64)
    throw std::runtime_error("--spec-tokens must be in 1..64");
  runtime::SpeculativeOptions spec_opt;
  spec_opt.spec_tokens = int(spec_tokens);
  spec_opt.min_confidence = args.get_double("spec-confidence", 0.0);
  spec_opt.payoff_gate = !args.has("spec-always");
  if (!(spec_opt.min_confidence >= 0.0 && spec_opt.min_confidence < 1.0))
    throw std::runtime_error("--spec-confidence must be in [0, 1)");

  {
    int64_t max_prompt = 0, max_batch = 1;
    for (int64_t n : sizes) max_prompt = std::max(max_prompt, n);
    for (int64_t b : batches) max_batch = std::max(max_batch, b);
    eo.memory = memory_request(args, int(max_batch), max_prompt + gen, 0, 512);
    eo.expert_policy = eviction_policy_from(args.get("expert-policy", "lfu"));
    eo.expert_guess = !args.has("no-expert-guess");
  }
  auto engine = runtime::Engine::load(eo);
  auto ranks =
      Ranks::start(args, eo.model_dir, engine->checkpoint(), engine->kernels(), version_string());
  if (ranks && !ranks->attach(*engine)) return 0;  // another rank: served its layers
  const ModelConfig& cfg = engine->config();
  const Transformer& model = engine->model();
  // a GGUF model's block weights count as stored, a head requantized at load (--head-type q8)
  // as its Q8B copy
  std::map<std::string, int64_t> stored = bench::stored_bytes(engine->checkpoint());
  if (model.head().requantized())
    stored["head.weight"] = q8b_bytes(cfg.vocab_size, cfg.hidden_size);
  for (int64_t n : sizes)
    if (n + gen > cfg.max_position_embeddings && cfg.max_position_embeddings > 0)
      throw std::runtime_error("--prompt " + std::to_string(n) + " + --gen exceeds " +
                               "max_position_embeddings " +
                               std::to_string(cfg.max_position_embeddings));
  const bool ced_available = model.has_ced();
  // a model split into stages runs without speculation and images (Transformer::set_stage)
  if (ranks && (spec_arg == "dspark" || args.get("vision", "") == "on"))
    throw std::runtime_error("--ranks: --speculative dspark and --vision on need one process");
  const bool want_spec =
      spec_arg.empty() ? model.dspark() != nullptr && !ranks : spec_arg == "dspark";
  const std::string vision_arg = args.get("vision", "");
  if (!vision_arg.empty() && vision_arg != "on" && vision_arg != "off")
    throw std::runtime_error("--vision: '" + vision_arg + "' (on, off)");
  const bool want_vision = vision_arg.empty() ? cfg.has_vision && !ranks : vision_arg == "on";
  if (want_vision && !cfg.has_vision)
    throw std::runtime_error("--vision on: the model has no vision tower");
  if (want_spec && !model.dspark())
    throw std::runtime_error("--speculative dspark: the model has no DSpark stages");
  std::vector<int32_t> spec_prompt;
  if (want_spec && args.has("prompt-file")) {
    spec_prompt = engine->tokenizer().encode(read_file(args.get("prompt-file"), "--prompt-file"));
    if (spec_prompt.empty()) throw std::runtime_error("--prompt-file: no tokens in the file");
  }
  if (!as_json)
    std::fprintf(stderr, "cedar bench: measuring the machine (%d threads)...\n", engine->threads());

  // Machine ceilings first, on the same pool the model uses.
  ThreadPool& pool = engine->pool();
  const Machine machine =
      measure_machine(pool, engine->kernels(), size_t(bw_mib) << 20, int(passes));
  const bench::Probe& bw = machine.bw;
  const bench::Probe& fma = machine.fma;
  const bench::Probe& refp = machine.kern;
  const ExpertCache* experts = engine->expert_cache();
  const EngramStore* engram = engine->engram_store();
  const bool streamed = experts || engram;
  const double expert_avg_bytes =
      experts ? double(experts->expert_bytes()) / double(std::max<int64_t>(1, experts->experts()))
              : 0.0;
  bench::Probe storage;
  if (streamed) storage = storage_probe(engine->checkpoint(), int(passes));
  // Read-bandwidth passes between decode steps (every kProbeEvery steps or passes): a shared
  // host's bandwidth moves by 2x within minutes, so each decode is also compared with what the
  // machine read while it ran. Not in a streamed run, whose page cache the buffer would take.
  constexpr long long kProbeEvery = 4;
  std::unique_ptr<bench::ReadProbe> between;
  if (!streamed)
    between = std::make_unique<bench::ReadProbe>(pool, size_t(bw_mib) << 20, bench::widest_simd());
  auto probe_between = [&](long long step, std::vector<double>& rates) {
    if (between && step % kProbeEvery == kProbeEvery - 1) rates.push_back(between->pass());
  };
  // the median of those passes (0: none taken) and a decode's ratio line against it
  auto during_bw = [](const std::vector<double>& r) { return r.empty() ? 0.0 : bench::median(r); };

  const int64_t V = cfg.vocab_size;
  std::vector<float> logits(static_cast<size_t>(V));  // kLast: one row
  json runs = json::array();
  std::string table;
  char line[512];

  // One timed prefill of the whole prompt; the last-row logits go to `last`.
  auto prefill_once = [&](const std::vector<int32_t>& ids, PrefillMode mode, SequenceState& st,
                          std::vector<float>& last) {
    ForwardOptions opt;
    opt.mode = mode;
    opt.completes_prompt = true;
    opt.logits = LogitsWanted::kLast;
    st = model.new_state();
    const auto t0 = Clock::now();
    model.forward(st, ids.data(), int(ids.size()), 0, opt, logits.data());
    const double s = since(t0);
    last.assign(logits.begin(), logits.begin() + V);
    return s;
  };

  SequenceState batch_state;  // the first prompt's state after its prefill (batched decode)
  int32_t batch_tok = 0;
  for (int64_t n : sizes) {
    if (!as_json) std::fprintf(stderr, "cedar bench: prompt %lld...\n", (long long)n);
    const std::vector<int32_t> ids = make_prompt(n, V, uint64_t(seed));
    PrefillResult ex, ced;
    ex.flops = bench::prefill_flops(cfg, n, bench::PrefillPlan::kExact);
    ced.flops = bench::prefill_flops(cfg, n, bench::PrefillPlan::kCed);
    SequenceState st_ex, st_ced;
    std::vector<float> last_ex, last_ced;
    // a bar on a terminal over this prompt's timed runs: the prefills, then the decode steps
    ProgressBar bar("cedar bench: prompt " + std::to_string(n),
                    reps * ((want_ced ? 1 : 0) + (want_exact ? 1 : 0)) + gen, "runs");
    int64_t runs_done = 0;
    // The plans alternate (and swap order every rep) so that load from other processes on a
    // shared machine falls on both alike.
    for (long long k = 0; k < reps; ++k) {
      const bool ced_first = k % 2 == 1;
      for (int i = 0; i < 2; ++i) {
        const bool do_ced = (i == 0) == ced_first;
        if (do_ced && want_ced)
          ced.secs.push_back(prefill_once(ids, PrefillMode::kCed, st_ced, last_ced));
        if (!do_ced && want_exact)
          ex.secs.push_back(prefill_once(ids, PrefillMode::kExact, st_ex, last_ex));
        if ((do_ced && want_ced) || (!do_ced && want_exact)) bar.update(++runs_done);
      }
    }
    for (PrefillResult* r : {&ex, &ced})
      if (!r->secs.empty()) {
        r->ran = true;
        r->median_s = bench::median(r->secs);
      }
    // CED vs exact on the same prompt: relative L2 of the next-token logits, greedy agreement
    double rel_l2 = -1;
    bool same_argmax = false;
    if (ex.ran && ced.ran) {
      double num = 0, den = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double d = double(last_ced[size_t(v)]) - double(last_ex[size_t(v)]);
        num += d * d;
        den += double(last_ex[size_t(v)]) * double(last_ex[size_t(v)]);
      }
      rel_l2 = den > 0 ? std::sqrt(num / den) : 0.0;
      same_argmax = argmax(last_ced.data(), V) == argmax(last_ex.data(), V);
    }

    // Decode after the default (CED) prefill when it ran, else after the exact one.
    SequenceState& st = want_ced ? st_ced : st_ex;
    int32_t tok = argmax((want_ced ? last_ced : last_ex).data(), V);
    if (n == sizes.front()) {
      batch_state = st;
      batch_tok = tok;
    }
    ForwardOptions dopt;
    dopt.logits = LogitsWanted::kLast;
    std::vector<double> step_s, bw_between;
    const ExpertCacheStats cache0 = experts ? experts->stats() : ExpertCacheStats{};
    const EngramStoreStats rows0 = engram ? engram->stats() : EngramStoreStats{};
    for (long long g = 0; g < gen; ++g) {
      const auto t0 = Clock::now();
      model.forward(st, &tok, 1, st.n_tokens, dopt, logits.data());
      step_s.push_back(since(t0));
      tok = argmax(logits.data(), V);
      probe_between(g, bw_between);
      bar.update(++runs_done);
    }
    bar.finish();
    const double bw_during = during_bw(bw_between);
    const double step_med = bench::median(step_s);
    const int64_t ctx_mid = n + gen / 2;
    const bench::DecodeTraffic tr = bench::decode_traffic(cfg, ctx_mid, stored);
    const double dec_tok_s = 1.0 / step_med;
    const double achieved_bw = double(tr.total()) * dec_tok_s;
    const bench::PrefillFlops dfl = bench::decode_flops(cfg, ctx_mid);
    const double dec_fl_s = dfl.total() * dec_tok_s;

    auto prefill_json = [&](const PrefillResult& r) -> json {
      if (!r.ran) return nullptr;
      const double fl_s = r.flops.total() / r.median_s;
      return {{"median_s", r.median_s},
              {"best_s", *std::min_element(r.secs.begin(), r.secs.end())},
              {"reps_s", r.secs},
              {"tokens_per_s", double(n) / r.median_s},
              {"flops_per_row", r.flops.per_row()},
              {"gemm_flops_per_row", r.flops.gemm_per_row()},
              {"attention_flops", r.flops.attention},
              {"indexer_flops", r.flops.indexer},
              {"layer_rows", r.flops.layer_rows},
              {"achieved_gflops", fl_s / 1e9},
              {"ratio_fma_peak", fl_s / fma.median},
              {"ratio_kernel_gemm_peak", fl_s / refp.median}};
    };
    json rj = {{"prompt", n},
               {"exact", prefill_json(ex)},
               {"ced", prefill_json(ced)},
               {"ced_applies", ced_available}};
    if (ex.ran && ced.ran) {
      rj["ced_speedup"] = ex.median_s / ced.median_s;
      rj["ced_speedup_best"] = *std::min_element(ex.secs.begin(), ex.secs.end()) /
                               *std::min_element(ced.secs.begin(), ced.secs.end());
      rj["ced_flop_ratio"] = ex.flops.total() / ced.flops.total();
      rj["ced_logits_rel_l2"] = rel_l2;
      rj["ced_same_next_token"] = same_argmax;
    }
    rj["decode"] = {{"after", want_ced ? "ced" : "exact"},
                    {"steps", gen},
                    {"median_step_s", step_med},
                    {"tokens_per_s", dec_tok_s},
                    {"context_mid", ctx_mid},
                    {"bytes_per_token",
                     {{"weights", tr.weights()},
                      {"kv", tr.kv()},
                      {"kv_window", tr.kv_window},
                      {"kv_compressed", tr.kv_compressed},
                      {"kv_index_keys", tr.kv_index_keys},
                      {"total", tr.total()},
                      {"engine_total", tr.engine_total()}}},
                    {"weight_params", tr.weight_params},
                    {"flops_per_token", dfl.total()},
                    {"achieved_gflops", dec_fl_s / 1e9},
                    {"ratio_kernel_gemm_peak", dec_fl_s / refp.median},
                    {"achieved_gb_s", achieved_bw / 1e9},
                    {"ratio_bandwidth", achieved_bw / bw.median},
                    {"bandwidth_between_steps_gb_s", bw_during / 1e9},
                    {"ratio_bandwidth_between_steps",
                     bw_during > 0 ? json(achieved_bw / bw_during) : json(nullptr)}};
    if (streamed) {
      const StorageDecode sd =
          storage_decode(cache0, experts ? experts->stats() : ExpertCacheStats{}, rows0,
                         engram ? engram->stats() : EngramStoreStats{}, gen, dec_tok_s,
                         double(tr.total()), expert_avg_bytes, bw, storage);
      rj["decode"]["storage"] = sd.j;
      table += sd.line;
    }
    runs.push_back(rj);

    auto prefill_line = [&](const char* plan, const PrefillResult& r) {
      if (!r.ran) return;
      const double fl_s = r.flops.total() / r.median_s;
      std::snprintf(line, sizeof line,
                    "  %-7lld %-6s %9.3f %10.1f %11.4f %10.4f %9.2f %7.2f%% %7.2f%%\n",
                    (long long)n, plan, r.median_s, double(n) / r.median_s, r.flops.per_row() / 1e9,
                    r.flops.gemm_per_row() / 1e9, fl_s / 1e9, 100.0 * fl_s / fma.median,
                    100.0 * fl_s / refp.median);
      table += line;
    };
    prefill_line("exact", ex);
    prefill_line(ced_available ? "ced" : "ced=ex", ced);
    if (ex.ran && ced.ran) {
      std::snprintf(
          line, sizeof line,
          "  %-7s CED/exact: speed x%.2f (median; best-of x%.2f), FLOPs x%.2f fewer; next-token "
          "logits rel L2 %.3g, same greedy token: %s\n",
          "", ex.median_s / ced.median_s,
          *std::min_element(ex.secs.begin(), ex.secs.end()) /
              *std::min_element(ced.secs.begin(), ced.secs.end()),
          ex.flops.total() / ced.flops.total(), rel_l2, same_argmax ? "yes" : "no");
      table += line;
    }
    std::snprintf(line, sizeof line,
                  "  %-7lld %-6s %9.4f %10.2f %11.4f %10.4f %9.2f %7.2f%% %7.2f%%  | ctx %lld: "
                  "%.2f MB weights + %.3f MB KV = %.2f MB/token -> %.2f GB/s = %.1f%% of read "
                  "bandwidth%s\n",
                  (long long)n, "decode", step_med, dec_tok_s, dfl.total() / 1e9,
                  dfl.gemm_per_row() / 1e9, dec_fl_s / 1e9, 100.0 * dec_fl_s / fma.median,
                  100.0 * dec_fl_s / refp.median, (long long)ctx_mid, double(tr.weights()) / 1e6,
                  double(tr.kv()) / 1e6, double(tr.total()) / 1e6, achieved_bw / 1e9,
                  100.0 * achieved_bw / bw.median, between_note(achieved_bw, bw_during).c_str());
    table += line;
  }

  // Batched decode (continuous batching): B sequences at the first prompt's context decoded
  // together, one forward_batch per step. The weights are read once per pass, so the bytes a
  // token costs fall towards the KV's as B grows.
  json batch_runs = json::array();
  std::string btable;
  double base_rate = 0;
  for (int64_t B : batches) {
    if (!as_json) std::fprintf(stderr, "cedar bench: batched decode x%lld...\n", (long long)B);
    std::vector<SequenceState> states(size_t(B), batch_state);
    std::vector<int32_t> toks(size_t(B), batch_tok);
    for (int64_t b = 0; b < B; ++b) toks[size_t(b)] = int32_t((batch_tok + 7919 * b) % V);
    std::vector<float> lg(size_t(B) * size_t(V));
    std::vector<BatchItem> items(static_cast<size_t>(B));
    std::vector<double> pass_s, bw_between;
    int64_t expert_runs = 0;  // routed (layer, expert) products over all passes
    const std::vector<dist::MpiLink::Sent> sent0 = ranks ? ranks->sent() : decltype(sent0){};
    for (long long g = 0; g < gen; ++g) {
      for (int64_t b = 0; b < B; ++b) {
        BatchItem& it = items[size_t(b)];
        it.state = &states[size_t(b)];
        it.ids = &toks[size_t(b)];
        it.n = 1;
        it.first_pos = states[size_t(b)].n_tokens;
        it.opt = ForwardOptions{};
        it.logits = lg.data() + size_t(b) * size_t(V);
      }
      const int64_t runs0 = routed_expert_runs();
      const auto t0 = Clock::now();
      model.forward_batch(std::span<BatchItem>(items));
      pass_s.push_back(since(t0));
      expert_runs += routed_expert_runs() - runs0;
      for (int64_t b = 0; b < B; ++b) {
        if (items[size_t(b)].error) std::rethrow_exception(items[size_t(b)].error);
        toks[size_t(b)] = argmax(lg.data() + size_t(b) * size_t(V), V);
      }
      probe_between(g, bw_between);
    }
    const double med = bench::median(pass_s);
    const double bw_during = during_bw(bw_between);
    const json hops = ranks ? ranks->traffic_json(sent0, ranks->sent(), B * gen) : json(nullptr);
    const double rate = double(B) / med;
    if (base_rate == 0) base_rate = rate;
    const int64_t ctx_mid = batch_state.n_tokens + gen / 2;
    const bench::DecodeTraffic tr = bench::decode_traffic(cfg, ctx_mid, stored);
    // the routed experts a pass actually read: B rows pick up to B x k distinct ones per layer
    const double runs_per_pass = double(expert_runs) / double(std::max<long long>(1, gen));
    const double bytes = double(tr.weights_of_pass(runs_per_pass)) + double(B) * double(tr.kv());
    const double gbs = bytes / med;
    // every row of the pass costs a decode step's FLOPs at the middle context
    const double fl_s = bench::decode_flops(cfg, ctx_mid).total() * rate;
    const double dot_peak = machine.best_dot();
    batch_runs.push_back(
        {{"batch", B},
         {"context_mid", ctx_mid},
         {"median_pass_s", med},
         {"tokens_per_s", rate},
         {"gain_vs_first", rate / base_rate},
         {"bytes_per_pass", bytes},
         {"routed_experts_per_pass", runs_per_pass},
         {"bytes_per_token", bytes / double(B)},
         {"achieved_gb_s", gbs / 1e9},
         {"ratio_bandwidth", gbs / bw.median},
         {"bandwidth_between_steps_gb_s", bw_during / 1e9},
         {"ratio_bandwidth_between_steps", bw_during > 0 ? json(gbs / bw_during) : json(nullptr)},
         {"achieved_gflops", fl_s / 1e9},
         {"ratio_fma_peak", fl_s / fma.median},
         {"ratio_dot_peak", dot_peak > 0 ? json(fl_s / dot_peak) : json(nullptr)},
         {"rank_traffic", hops}});
    char dot_pct[16] = "     -";
    if (dot_peak > 0) std::snprintf(dot_pct, sizeof dot_pct, "%5.1f%%", 100.0 * fl_s / dot_peak);
    std::snprintf(line, sizeof line,
                  "  %-6lld %9.4f %10.2f   x%-6.2f %8.1f %5.1f%% %s   %9.2f MB/token -> %7.2f "
                  "GB/s = %5.1f%% of read bandwidth%s\n",
                  (long long)B, med, rate, rate / base_rate, fl_s / 1e9, 100.0 * fl_s / fma.median,
                  dot_pct, bytes / double(B) / 1e6, gbs / 1e9, 100.0 * gbs / bw.median,
                  between_note(gbs, bw_during).c_str());
    btable += line;
    for (const json& h : ranks ? hops : json::array()) {
      std::snprintf(
          line, sizeof line, "         rank %d -> %d: %.0f bytes/token in %llu messages\n",
          h["from_rank"].get<int>(), h["to_rank"].get<int>(), h["bytes_per_token"].get<double>(),
          (unsigned long long)h["messages"].get<uint64_t>());
      btable += line;
    }
  }

  VisionBench vis;
  if (want_vision) {
    if (!as_json) std::fprintf(stderr, "cedar bench: image encode...\n");
    vis = bench_vision(*engine, int(reps), machine.fma.median);
  }

  SpecBench spec;
  if (want_spec) {
    if (!as_json) std::fprintf(stderr, "cedar bench: speculative decoding...\n");
    if (spec_prompt.empty()) spec_prompt = make_prompt(sizes.front(), V, uint64_t(seed));
    spec = bench_speculative(*engine, spec_prompt, int(gen), spec_opt);
  }

  if (as_json) {
    json out = {{"model",
                 {{"dir", eo.model_dir},
                  {"layers", cfg.num_hidden_layers},
                  {"hidden_size", cfg.hidden_size},
                  {"n_routed_experts", cfg.n_routed_experts},
                  {"num_experts_per_tok", cfg.num_experts_per_tok},
                  {"ced_split", ced_available}}},
                {"threads", engine->threads()},
                {"ranks", ranks ? json{{"count", ranks->size()},
                                       {"layers", ranks->split().describe()},
                                       {"line", ranks->describe(cfg)}}
                                : json(nullptr)},
                {"kernels", std::string(engine->kernels().name)},
                {"kernels_line", describe_kernels(engine->kernels())},
                {"head_type", model.head().requantized() ? "q8" : "stored"},
                {"machine", machine_json(machine)},
                {"storage_read", streamed ? probe_json(storage, "GB/s", 1e9) : json(nullptr)},
                {"runs", runs},
                {"batched_decode", batch_runs},
                {"speculative", want_spec ? spec.json : json()},
                {"vision", want_vision ? vis.json : json()}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("cedar bench: %s (%d layers, D %d, %d of %d experts%s), %d threads, %s\n",
              eo.model_dir.c_str(), cfg.num_hidden_layers, cfg.hidden_size, cfg.num_experts_per_tok,
              cfg.n_routed_experts, model.head().requantized() ? ", head requantized to Q8B" : "",
              engine->threads(), describe_kernels(engine->kernels()).c_str());
  print_machine(machine, passes, engine->threads());
  if (ranks) std::printf("pipeline stages: %s\n", ranks->describe(cfg).c_str());
  std::printf(
      "\nprefill: median of %lld reps; FLOPs counted per prompt row (GEMM + attention + "
      "indexer); %%FMA / %%kern = achieved FLOP/s over the probes above%s\n",
      reps, ced_available ? "" : " (no CED split in this config: ced = exact)");
  std::printf(
      "decode: median over %lld greedy steps after the %s prefill; FLOPs and bytes per token at "
      "the middle context; bytes = weights read (storage dtypes) + KV read\n",
      gen, want_ced ? "CED" : "exact");
  std::printf("  %-7s %-6s %9s %10s %11s %10s %9s %8s %8s\n", "prompt", "plan", "time_s", "tok/s",
              "GFLOP/row", "GEMM/row", "GFLOP/s", "%FMA", "%kern");
  std::printf("%s", table.c_str());
  if (!batches.empty()) {
    std::printf(
        "\nbatched decode: B copies of the %lld-token prompt's state, one batched pass per step "
        "(median of %lld passes); bytes = every weight once per pass (each routed expert that "
        "received rows once) + B x KV; GFLOP/s = B x a decode step's FLOPs per pass, over the FMA "
        "and dot-product peaks\n",
        (long long)batch_state.n_tokens, gen);
    std::printf("  %-6s %9s %10s   %-7s %8s %6s %6s   %s\n", "batch", "pass_s", "tok/s", "gain",
                "GFLOP/s", "%FMA", "%dot", "traffic");
    std::printf("%s", btable.c_str());
  }
  if (want_vision) {
    std::printf("\nimage encode (median of %lld runs; one image at the processor's token limit)\n",
                reps);
    std::printf("%s", vis.line.c_str());
  }
  if (want_spec) {
    std::printf(
        "\nspeculative decoding (DSpark, greedy): the same continuation decoded plainly and with "
        "verify passes of up to %d drafts\n",
        int(spec.json["spec_tokens"].get<size_t>()));
    std::printf("%s", spec.line.c_str());
  }
  return 0;
}

}  // namespace cedar::app
