// What `cedar run` prints for one answer: the streamed reasoning, content and tool calls on
// stdout, the stats line on stderr, and a hint when the answer was cut inside its reasoning.
#pragma once

#include <atomic>

#include "runtime/generator.h"
#include "runtime/prefix_cache.h"

namespace cedar::app {

struct TurnOutput {
  bool parse = true;           // chat output (reasoning / content / tool calls); false: raw text
  bool hide_thinking = false;  // leave the reasoning out (its tokens are still counted)
};

// Runs one generation of `prompt` with `cancel` as its stop flag (cleared first) and prints it.
// The hint names `limit_flag`, the way the caller sets the completion limit.
runtime::GenerationResult run_turn(runtime::Generator& gen, const runtime::PrefixCache* cache,
                                   const runtime::Prompt& prompt, runtime::GenerationOptions opt,
                                   const TurnOutput& out, std::atomic<bool>* cancel,
                                   const char* limit_flag);

}  // namespace cedar::app
