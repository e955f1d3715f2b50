// Named model configurations: the `tiny`, `small` and `bench` presets of `cedar make-model`
// (docs/NUMERICS.md "Presets"; bench sizes the release's schedule for `cedar bench`, docs/BENCH.md)
// and `released`, the DeepSeek-V4.1-Flash release configuration
// (spec §2.1, ../shared/spec/released-config.json) used by the inventory tests.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace cedar {

// "tiny", "small", "bench" or "released". Throws std::runtime_error naming the preset when unknown.
// The returned config is not validate()d (its `layers` plan is empty).
ModelConfig preset_config(const std::string& name);

const std::vector<std::string>& preset_names();

}  // namespace cedar
