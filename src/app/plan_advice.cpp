#include "app/plan_advice.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace cedar::app {

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

// "200G": a budget as the flag takes it, rounded down to whole GiB.
std::string budget_flag(int64_t bytes) { return std::to_string(bytes / kGiB) + "G"; }

}  // namespace

int64_t physical_ram() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
}

std::string plan_advice(
    int64_t ram, const runtime::MemoryRequest& base,
    const std::function<runtime::MemoryPlan(const runtime::MemoryRequest&)>& plan,
    const std::string& model) {
  using runtime::format_bytes;
  // what the process may take: the RAM less what the system and the page cache's other users
  // keep (a tenth, at least 4 GiB)
  const int64_t usable = ram - std::max<int64_t>(ram / 10, 4 * kGiB);
  std::string s = "advice for " + format_bytes(ram) + " of RAM (a process budget of " +
                  format_bytes(std::max<int64_t>(usable, 0)) + "):\n";
  if (usable <= 0) return s + "  too little memory to plan for\n";
  const std::string ctx_flag = base.ctx > 0 ? " -c " + std::to_string(base.ctx) : "";
  const std::string par_flag = (base.parallel > 1 ? " -np " + std::to_string(base.parallel) : "") +
                               (base.q8_head ? " --head-type q8" : "");
  const runtime::MemoryPlan all = plan(base);
  if (all.refusal.empty() && all.resident() <= usable)
    return s + "  everything mapped fits (" + format_bytes(all.resident()) +
           "):\n    cedar serve -m " + model + ctx_flag + par_flag + "\n";
  runtime::MemoryRequest r = base;
  r.budget = usable;
  const runtime::MemoryPlan b = plan(r);
  if (b.refusal.empty()) {
    s += "  the weights (" + format_bytes(all.checkpoint) + ") do not fit; under a budget ";
    s += b.streamed ? "the routed experts stream from storage through a " +
                          format_bytes(b.expert_cache) + " expert cache"
                    : "they stay mapped";
    s += b.engram_streamed ? " and the Engram tables are read by row" : "";
    s += ":\n    cedar serve -m " + model + ctx_flag + par_flag + " --mem-budget " +
         budget_flag(usable) + "\n";
    if (b.streamed)
      s += "  decode then reads the experts a token selects from the disk where they miss the "
           "cache: `cedar bench --mem-budget " +
           budget_flag(usable) + "` measures the rate on this machine's storage\n";
    return s;
  }
  // even streamed it does not fit: the longest context that does, one sequence
  for (int64_t ctx : {int64_t(262144), int64_t(65536), int64_t(16384), int64_t(4096)}) {
    if (base.ctx > 0 && ctx >= base.ctx) continue;
    runtime::MemoryRequest c = r;
    c.ctx = ctx;
    c.parallel = 1;
    if (plan(c).refusal.empty())
      return s + "  " + b.refusal + "\n  one sequence of " + std::to_string(ctx) +
             " tokens fits:\n    cedar serve -m " + model + " -c " + std::to_string(ctx) +
             " --mem-budget " + budget_flag(usable) + "\n";
  }
  return s + "  " + b.refusal + "\n  no context fits: the dense weights alone need " +
         format_bytes(b.dense) + "\n";
}

}  // namespace cedar::app
