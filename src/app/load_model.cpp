#include "app/load_model.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>

#include "base/progress.h"
#include "base/thread_pool.h"
#include "runtime/memory_plan.h"

namespace cedar::app {

std::string model_dir_or_default(const Args& args) {
  if (args.has("model")) return args.get("model");
#ifdef CEDAR_DEFAULT_MODEL
  if (!std::filesystem::exists(std::filesystem::path(CEDAR_DEFAULT_MODEL) / "config.json"))
    throw std::runtime_error(std::string("no --model (-m DIR) given and the default model ") +
                             CEDAR_DEFAULT_MODEL + " is not built (cmake --build build)");
  return CEDAR_DEFAULT_MODEL;
#else
  throw std::runtime_error("missing required option --model (-m DIR)");
#endif
}

int threads_option(const Args& args, const char* who) {
  const long long asked = args.get_int("threads", 0);
  if (asked < 0)
    throw std::runtime_error("--threads must be 0 (every CPU) or a positive number, got " +
                             std::to_string(asked));
  const int cpus = available_cpus();
  if (asked > cpus) {
    std::fprintf(
        stderr,
        "%s: warning: --threads %lld is more than the %d CPUs this process may use; using %d\n",
        who, asked, cpus, cpus);
    return cpus;
  }
  return int(asked);
}

size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

runtime::MemoryRequest memory_request(const Args& args, int parallel, int64_t ctx,
                                      int64_t prefix_cache_bytes, int batch_rows) {
  runtime::MemoryRequest r;
  if (args.has("mem-budget"))
    r.budget = runtime::parse_size(args.get("mem-budget"), "--mem-budget");
  if (args.has("kv-ram")) r.kv_pool = runtime::parse_size(args.get("kv-ram"), "--kv-ram");
  r.parallel = parallel;
  r.ctx = ctx;
  r.prefix_cache = prefix_cache_bytes;
  r.batch_rows = batch_rows;
  return r;
}

std::unique_ptr<runtime::Engine> load_engine(
    const runtime::EngineOptions& opt, const char* who, bool prefetch,
    const std::function<void(const std::string&)>& note_fn) {
  auto note = [&](const char* f, auto... a) {
    char buf[256];
    std::snprintf(buf, sizeof buf, f, a...);
    if (note_fn)
      note_fn(buf);
    else
      std::fprintf(stderr, "%s: %s\n", who, buf);
  };
  auto engine = runtime::Engine::load(opt);
  const runtime::MemoryPlan& plan = engine->memory_plan();
  if (plan.engram_streamed)
    note("Engram tables read from storage row by row (%.1f MiB row cache)",
         double(plan.engram_cache) / double(1 << 20));
  if (const ExpertCache* c = engine->expert_cache())
    note("routed experts streamed from storage: %d cache slots of %.1f MiB", c->capacity(),
         double(c->slot_bytes()) / double(1 << 20));
  if (!prefetch) return engine;
  // Streamed experts or Engram rows: the tensors that stay mapped (the dense weights, which every
  // token reads) are read in with a progress bar; reading the whole mapping would pull the
  // streamed tensors into the page cache too.
  if (plan.engram_streamed || plan.streamed) {
    auto stays = [&](const std::string& name) {
      return !(plan.streamed && !runtime::routed_expert_of(name).empty()) &&
             !(plan.engram_streamed && runtime::is_engram_table(name));
    };
    std::optional<ProgressBar> shown;
    const size_t read =
        engine->checkpoint().prefetch_tensors(stays, [&](size_t done, size_t total) {
          if (!shown)
            shown.emplace(std::string(who) + ": reading the weights that stay in memory",
                          int64_t(total >> 20), "MiB");
          shown->update(int64_t(done >> 20));
        });
    if (shown) shown->finish();
    note(
        "read %.1f GiB of weights that stay in memory (the streamed ones load as tokens need them)",
        double(read) / double(1ull << 30));
    return engine;
  }
  const size_t bytes = engine->checkpoint().mapped_bytes();
  const size_t avail = available_memory_bytes();
  constexpr double kGiB = double(1ull << 30);
  // A model larger than memory would evict its own pages: leave it to be read as it is used.
  if (avail > 0 && double(bytes) > 0.8 * double(avail)) {
    note(
        "the weights (%.1f GiB) exceed 80%% of available memory (%.1f GiB): not read in ahead, "
        "pages load as they are used",
        double(bytes) / kGiB, double(avail) / kGiB);
    return engine;
  }
  ProgressBar bar(std::string(who) + ": reading weights", int64_t(bytes >> 20), "MiB");
  engine->checkpoint().prefetch([&](size_t done, size_t) { bar.update(int64_t(done >> 20)); });
  bar.finish();
  return engine;
}

}  // namespace cedar::app
