// `cedar bench`'s vision section (model with a vision tower): the preprocessing and the tower +
// aligner forward of one synthetic image that the processor plans to the most tokens it allows
// (a large square: 31 x 31 cells, 994 of the 1024 tokens at the release's geometry), timed over
// `reps` runs in the same run as the machine probes, with the tower's FLOPs (GEMMs and
// attention) and their rate over the measured FMA peak.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/engine.h"

namespace cedar::app {

struct VisionBench {
  nlohmann::json json;  // the "vision" object of `cedar bench --json`
  std::string line;     // the table line
};

VisionBench bench_vision(runtime::Engine& engine, int reps, double fma_peak_flops);

}  // namespace cedar::app
