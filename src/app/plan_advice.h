// `cedar inspect --plan`'s advice: for the RAM of this machine (or --ram SIZE), which `cedar
// serve` flags fit the model: everything mapped, or a --mem-budget that streams the routed
// experts (and Engram rows) from storage, and the longest context that fits when even that is
// too much. Computed with the same memory plan that `serve` refuses or accepts with.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/memory_plan.h"

namespace cedar::app {

// The machine's physical memory in bytes (0 when it cannot be read).
int64_t physical_ram();

// The advice for `ram` bytes. `plan(req)` computes the plan of a request (the checkpoint's, or
// the config's expected tensors); `base` is the request as the user gave it (parallel, ctx,
// prefix cache, head type); `model` names the model in the suggested command.
std::string plan_advice(
    int64_t ram, const runtime::MemoryRequest& base,
    const std::function<runtime::MemoryPlan(const runtime::MemoryRequest&)>& plan,
    const std::string& model);

}  // namespace cedar::app
