// The payoff gate's budget for one generation: what a drafter that does not pay may cost. While
// passes do not pay, speculation is paused and probed now and then (a pass, to see whether that
// changed), and each probe costs time plain decoding would not spend: the plain steps a pass
// takes beyond the tokens it emits, and the extra time of the plain steps that seed the drafter's
// rings before it (VerifyPass::kSeedAhead of them, so the probe drafts with context). The budget
// keeps that loss within kShare (3%) of the tokens decoded so far, in plain steps: the next probe
// waits until the loss so far plus what it is expected to lose fits. So probes of a drafter that
// never pays come every (probe loss) / 3% steps, about 107 steps for a pass of 4 plain steps
// that emits 1 token: the tightest spacing that keeps the cost at or under 3% at every length
// (exponential back-off would cost less over long runs but notice later and later a drafter that
// starts to pay, on a prompt that turns repetitive). The one loss the budget cannot bound ahead
// is the first pass where nothing was measured: it is run at once (it may pay), and the engine
// keeps the means, so later generations start paused instead (Engine::spec_payoff).
#pragma once

#include <cstdint>

#include "runtime/spec_payoff.h"

namespace cedar::runtime {

class SpecBudget {
 public:
  static constexpr double kShare = 0.03;  // the most probing may cost, as a share of plain time

  // Accounts a verify pass (after m.pass()): its time in plain steps less its tokens.
  void pass(double seconds, int emitted, const SpecPayoff& m);
  // Accounts a plain step (after m.plain_step()): a token; seeded: m.seed_extra() lost.
  void plain_step(bool seeded, const SpecPayoff& m);
  // The loss so far is within the share of the tokens so far.
  bool within() const { return lost_ <= kShare * double(tokens_); }
  // Plain steps to wait before a probe preceded by `lead` seeding steps may begin its lead: 0
  // when the loss so far and the probe's (m.pass_loss() and lead * m.seed_extra()) fit the
  // share of the tokens decoded by the time the probe runs.
  int64_t wait_steps(const SpecPayoff& m, int lead) const;
  double lost_steps() const { return lost_; }
  int64_t tokens() const { return tokens_; }

 private:
  // Never below 0: a pass that pays repays earlier losses, but gains are not banked, so a
  // drafter that paid for a while and stops gets no licence to spend them on probes.
  void lose(double steps);
  double lost_ = 0.0;  // plain steps
  int64_t tokens_ = 0;
  // passes run before a plain step was timed (the first one), accounted at the first plain step
  double unsettled_s_ = 0.0;
  int64_t unsettled_tokens_ = 0;
};

}  // namespace cedar::runtime
