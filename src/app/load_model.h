// Loading the engine for `cedar run` and `cedar serve`: the checkpoint mapped and validated, then
// (unless turned off, and only when the weights fit in available memory) every page read in with
// a progress bar on a terminal, so that the first request does not pay for page faults.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/args.h"
#include "runtime/engine.h"

namespace cedar::app {

// -m DIR, or the embedded default model (build/models/default, the trained tiny model the build
// expands from models/default/) when the option is absent; an error naming --model when that
// model is not built.
std::string model_dir_or_default(const Args& args);

// `who` prefixes the messages ("cedar serve"). prefetch: read the weights in after mapping.
// `note` says what the load decided (streamed experts, weights not read ahead); default: a line
// "WHO: ..." on stderr.
std::unique_ptr<runtime::Engine> load_engine(
    const runtime::EngineOptions& opt, const char* who, bool prefetch,
    const std::function<void(const std::string&)>& note = {});

// The memory request of a command from its --mem-budget (absent: no budget), --kv-ram (serve
// and inspect only; absent: a full context per slot) and serving shape.
runtime::MemoryRequest memory_request(const Args& args, int parallel, int64_t ctx,
                                      int64_t prefix_cache_bytes, int batch_rows);

// --threads (-t): 0 or absent is every CPU this process may use; more than that only time-shares
// them, so it is lowered to that number with a warning from `who`; negative is an error.
int threads_option(const Args& args, const char* who);

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
size_t available_memory_bytes();

}  // namespace cedar::app
