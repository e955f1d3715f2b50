// The sampling a checkpoint recommends: its generation_config.json (Hugging Face's file beside
// config.json; the release recommends temperature 1.0 and top-p 0.95). `cedar run` and
// `cedar serve` start from it, and their flags override it; a request's own fields override both.
#pragma once

#include <optional>
#include <string>

namespace cedar {

struct GenerationDefaults {
  std::optional<double> temperature, top_p, min_p;
  std::optional<int> top_k;
  std::string source;   // the file read ("" when there was none)
  std::string warning;  // why a file that is present was not used ("" when it was, or none)
};

// Reads <model>/generation_config.json when `model_path` is a directory holding one. The file is
// hostile until checked: a regular file of at most 1 MiB, JSON, each field in range (temperature
// and min_p >= 0, top_p in (0, 1], top_k >= 0; "do_sample": false means greedy). A file that
// fails is not used: `warning` says why, and nothing is set.
GenerationDefaults read_generation_config(const std::string& model_path);

}  // namespace cedar
