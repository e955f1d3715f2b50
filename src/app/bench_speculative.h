// `cedar bench`'s speculative section: the greedy continuation of one prompt generated plainly
// (one forward per token) and with DSpark speculative decoding (runtime/speculative.h) by the
// Generator `cedar run` uses, both in the same run. Reports tokens per verify pass
// (bonus included), the acceptance rate per draft position, both decode rates and their ratio,
// and whether the two token streams are identical (they must be: greedy speculation is lossless).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/speculative.h"

namespace cedar::app {

struct SpecBench {
  nlohmann::json json;  // the "speculative" object of `cedar bench --json`
  std::string line;     // the table line
};

// prompt: the prompt's ids; gen: continuation tokens; spec: spec_tokens and min_confidence of
// the speculative run (enabled by this function).
SpecBench bench_speculative(runtime::Engine& engine, const std::vector<int32_t>& prompt, int gen,
                            const runtime::SpeculativeOptions& spec);

}  // namespace cedar::app
