// The default sampling of `cedar run` and `cedar serve`, one rule for both: the API's neutral
// values (temperature 1, top-p 1, top-k and min-p off), then the checkpoint's
// generation_config.json, then the flags --temp, --top-p, --top-k, --min-p. A request's own
// fields (serve) and /set (run's chat) come last.
#pragma once

#include <string>
#include <vector>

#include "base/args.h"

namespace cedar::app {

struct SamplingDefaults {
  double temperature = 1.0, top_p = 1.0, min_p = 0.0;
  int top_k = 0;
  std::string from;  // where they came from, for the banner: "generation_config.json", ...
};

// `options` and the four flags with their help.
std::vector<Args::Option> with_sampling_options(std::vector<Args::Option> options);

// The defaults for `model_path`. A generation_config.json that cannot be used is named on stderr
// (prefixed by `who`) and skipped; a bad flag value throws std::invalid_argument naming it.
SamplingDefaults sampling_defaults(const Args& a, const std::string& model_path, const char* who);

}  // namespace cedar::app
