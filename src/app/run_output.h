// What `cedar run` prints for one answer: the streamed reasoning, content and tool calls on
// stdout, the stats line on stderr, and a hint when the answer was cut inside its reasoning.
// The text goes through the server's output pipeline (server/completion.h): the reasoning, the
// tool calls and the stop strings (matched on the answer only) follow the same rules in every
// front end.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "runtime/prefix_cache.h"
#include "server/completion.h"

namespace cedar::app {

struct TurnOutput {
  bool parse = true;              // chat output (reasoning / content / tool calls); false: raw text
  bool hide_thinking = false;     // leave the reasoning out (its tokens are still counted)
  std::vector<std::string> stop;  // stop strings (the answer's text)
};

struct TurnResult {
  runtime::GenerationResult gen;
  server::Outcome outcome;  // the parsed answer, its finish and usage
};

// Runs one generation of `prompt` with `cancel` as its stop flag (cleared first) and prints it.
// The hint names `limit_flag`, the way the caller sets the completion limit.
TurnResult run_turn(runtime::Generator& gen, const runtime::PrefixCache* cache,
                    const runtime::Prompt& prompt, runtime::GenerationOptions opt,
                    const TurnOutput& out, std::atomic<bool>* cancel, const char* limit_flag);

}  // namespace cedar::app
