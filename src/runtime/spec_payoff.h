// Whether speculative decoding pays on this machine and model: running means of a verify pass's
// wall time and of the tokens it emits, against a plain decode step's wall time. A pass costs a
// draft plus a target forward of several rows; where the target step is cheap next to that (a
// small model whose LM head dominates, or a drafter that rarely agrees) plain steps are faster,
// and the decode loop should use them. Timing only decides *when* to speculate: the tokens are
// plain decoding's either way (runtime/speculative.h). How much probing a drafter that does not
// pay may cost is runtime/spec_budget.h's.
#pragma once

#include <cstdint>

namespace cedar::runtime {

class SpecPayoff {
 public:
  void pass(double seconds, int emitted);
  // seeded: the step also wrote the drafter's rings (VerifyPass::seeding). Seeded and unseeded
  // steps are timed apart: plain decoding, what a pass competes with, does not seed, and the
  // difference is what seeding ahead of a probe costs (seed_extra).
  void plain_step(double seconds, bool seeded);
  bool has_plain() const { return n_plain_ + n_seeded_ > 0; }
  // A pass and a plain step timed: pays() and pass_loss() say something.
  bool measured() const { return n_pass_ > 0 && has_plain(); }
  // Passes emit at least as many tokens per second as plain steps (true until measured()).
  bool pays() const;
  // A plain step's seconds: the unseeded steps' mean, the seeded ones' until one is timed.
  double plain_s() const { return n_plain_ > 0 ? plain_s_ : seeded_s_; }
  // Plain steps of time a pass loses against plain decoding of the tokens it emits (its time in
  // plain steps less its tokens; negative where passes pay); 0 until measured().
  double pass_loss() const;
  // The part of a plain step that seeding adds (0 until both kinds are timed; never negative).
  double seed_extra() const;
  double pass_tokens_per_s() const { return pass_s_ > 0 ? pass_tokens_ / pass_s_ : 0.0; }
  double plain_tokens_per_s() const { return plain_s() > 0 ? 1.0 / plain_s() : 0.0; }

 private:
  static constexpr double kAlpha = 0.25;  // weight of the newest sample in the running means
  static void mix(double& mean, double v, int64_t n) {
    mean = n == 0 ? v : mean + kAlpha * (v - mean);
  }
  double pass_s_ = 0.0, pass_tokens_ = 0.0, plain_s_ = 0.0, seeded_s_ = 0.0;
  int64_t n_pass_ = 0, n_plain_ = 0, n_seeded_ = 0;
};

}  // namespace cedar::runtime
