#include "app/bench_speculative.h"

#include <algorithm>
#include <cstdio>

#include "runtime/generator.h"

namespace cedar::app {

SpecBench bench_speculative(runtime::Engine& engine, const std::vector<int32_t>& prompt, int gen,
                            const runtime::SpeculativeOptions& spec_opt) {
  runtime::GenerationOptions o;
  o.sampling.temperature = 0;  // greedy
  o.max_tokens = gen;
  o.use_prefix_cache = false;
  runtime::Generator g(engine);
  const runtime::GenerationResult plain = g.generate(prompt, o);
  g.reset();
  o.speculative = spec_opt;
  o.speculative.enabled = true;
  const runtime::GenerationResult spec = g.generate(prompt, o);

  const runtime::SpecStats& k = spec.speculative;
  nlohmann::json per_pos = nlohmann::json::array();
  for (size_t i = 0; i < k.offered_at.size(); ++i)
    per_pos.push_back(k.offered_at[i] ? double(k.accepted_at[i]) / double(k.offered_at[i]) : 0.0);
  // the first token comes from the prefill in both runs: the rates are over the others
  const double n = double(std::max<size_t>(1, plain.tokens.size() - 1));
  const double plain_rate = n / plain.decode_seconds, spec_rate = n / spec.decode_seconds;
  const bool same = spec.tokens == plain.tokens;
  SpecBench out;
  out.json = {{"method", "dspark"},
              {"sampling", "greedy"},
              {"prompt_tokens", prompt.size()},
              {"tokens", plain.tokens.size()},
              {"spec_tokens", k.offered_at.size()},
              {"min_confidence", spec_opt.min_confidence},
              {"payoff_gate", spec_opt.payoff_gate},
              // the gate's running means at the end: a pass's tokens per second vs plain steps'
              {"gate_pass_tokens_per_s", k.pass_tokens_per_s},
              {"gate_plain_tokens_per_s", k.plain_tokens_per_s},
              {"paused_steps", k.paused_steps},
              // plain steps of time the gate's budget counted as lost (probes, their seeding)
              {"gate_lost_steps", k.gate_lost_steps},
              {"verify_passes", k.passes},
              {"plain_forwards_in_speculative_run", spec.decode_steps},
              {"mean_accepted_length", k.mean_accepted_length()},
              {"acceptance_per_position", per_pos},
              {"drafted", k.drafted},
              {"accepted", k.accepted},
              {"plain_tokens_per_s", plain_rate},
              {"speculative_tokens_per_s", spec_rate},
              {"speedup", spec_rate / plain_rate},
              {"identical_tokens", same}};
  char line[256];
  std::snprintf(line, sizeof line,
                "  %zu tokens after a %zu-token prompt: %.2f tokens per verify pass, plain %.2f "
                "tok/s, speculative %.2f tok/s = x%.2f; identical tokens: %s\n",
                plain.tokens.size(), prompt.size(), k.mean_accepted_length(), plain_rate, spec_rate,
                spec_rate / plain_rate, same ? "yes" : "NO");
  out.line = line;
  return out;
}

}  // namespace cedar::app
