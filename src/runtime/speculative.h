// Speculative decoding with the DSpark drafter (spec v41-extras §2.5), as the decode loop's
// lookahead (runtime/generator.cpp): after the token for position n is chosen, the drafter
// proposes d_1 .. d_l and one exact forward runs [token, d_1 .. d_l] at positions n .. n+l with
// the state's undo log kept. The loop then chooses the next token from row 0's logits exactly as
// plain decoding would (same sampler, position, penalties, constraint); while it equals the
// drafted one, the next row's logits are already there. At the first difference (or when the
// generation ends) the rows after the current one are rewound exactly (SequenceState::rewind).
// So the tokens are plain decoding's at any temperature and seed, token for token: with
// deterministic drafts this is speculative sampling with a point-mass proposal (a draft is kept
// with probability p_t(d), a rejection leaves the target's own sample, distributed as the
// residual p_t(. | != d)).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/engine.h"
#include "runtime/spec_budget.h"
#include "runtime/spec_payoff.h"

namespace cedar::runtime {

struct SpeculativeOptions {
  bool enabled = false;
  int spec_tokens = 0;  // drafts verified per pass (<= 0: the drafter's block size)
  // Verify the drafts only up to the first whose confidence sigmoid(c_k) is below this (the
  // DSpark confidence head; 0: all of them). Not calibrated on a trained drafter yet.
  double min_confidence = 0.0;
  // Pause speculation while verify passes emit fewer tokens per second than plain steps
  // (runtime/spec_payoff.h: measured wall times), probing it again only as often as 3% of the
  // plain time allows (runtime/spec_budget.h); false: speculate on every step it can.
  bool payoff_gate = true;
  // Test hook: up to `max` tokens after the state's last position given the anchor (the token
  // for the next position), instead of the engine's DSpark draft.
  std::function<std::vector<int32_t>(const SequenceState& st, int32_t anchor, int max)> proposer;
  // Test hook: seconds on the clock the payoff gate times passes and plain steps with, instead
  // of the steady clock (a test of the gate's decisions then does not depend on how loaded the
  // machine is).
  std::function<double()> clock;
};

// Counters of the verify passes of a generation.
struct SpecStats {
  int64_t passes = 0;   // verify passes
  int64_t emitted = 0;  // tokens chosen from their rows (kept drafts + one more per pass)
  int64_t drafted = 0, accepted = 0;
  int64_t paused_steps = 0;  // plain steps while the back-off or the payoff gate paused it
  // the running means when the generation ended (0 when not measured)
  double pass_tokens_per_s = 0.0, plain_tokens_per_s = 0.0;
  // plain steps of time the payoff gate's budget counts as lost (SpecBudget::lost_steps)
  double gate_lost_steps = 0.0;
  std::vector<int64_t> offered_at, accepted_at;  // per draft position k = 0 ..: verified, kept
  // tokens per verify pass, the bonus token included
  double mean_accepted_length() const { return passes ? double(emitted) / double(passes) : 0.0; }
  void add(const SpecStats& o);
};

class VerifyPass {
 public:
  // Throws std::runtime_error when speculation is enabled on a model without DSpark stages (and
  // no proposer is given) or spec_tokens does not fit a window.
  VerifyPass(Engine& engine, const SpeculativeOptions& opt);
  // Leaves what the DSpark drafter's passes measured with the engine (Engine::spec_payoff).
  ~VerifyPass();
  VerifyPass(const VerifyPass&) = delete;
  VerifyPass& operator=(const VerifyPass&) = delete;

  int spec_tokens() const { return spec_tokens_; }

  // Drafts after the state's last position with anchor `id` (the token just chosen for position
  // st.n_tokens) and runs [id, drafts] (at most max_drafts >= 1 drafts) in one forward with all
  // logits and the undo log; `base` gives the mode. Returns false, running nothing, when no
  // draft can be made (the rings do not reach the state's last position: the caller runs a
  // plain forward, which seeds them again).
  bool run(SequenceState& st, int32_t id, int max_drafts, ForwardOptions base);
  bool active() const { return active_; }
  // Whether this step's plain forward should write the drafter's rings (after run() declined):
  // not while the payoff gate waits for its budget, nor while more than kSeedAhead steps of a
  // back-off lie ahead. Seeding costs part of a step (the budget counts it: SpecPayoff::
  // seed_extra); the kSeedAhead steps before a probe write the rings again, so drafts resume
  // with that much context (the rings restart where seeding resumes, forward/dspark.h).
  bool seeding() const { return opt_.enabled && !waiting_ && pause_left_ <= kSeedAhead; }
  const std::vector<int32_t>& rows() const { return rows_; }  // [id, drafts] of the pass
  // The logits of the current row (the row the next token is chosen from) and its position.
  const float* logits() const;
  int64_t position() const { return p0_ + used_; }
  // `t` was chosen from the current row: true, and the next row current, when t is the draft
  // of the next row.
  bool advance(int32_t t);
  // Ends the pass: rewinds the rows after the current one; returns how many were dropped.
  int finish(SequenceState& st);
  // Seconds on the payoff gate's clock (the steady clock, or the options' test hook).
  double now() const;
  // The wall time of a plain decode step the caller ran after run() declined (the payoff
  // gate's other side), read with now(); seeding() still says whether it wrote the rings.
  void plain_step(double seconds);
  const SpecStats& stats() const { return stats_; }

 private:
  Engine& engine_;
  SpeculativeOptions opt_;
  int spec_tokens_ = 0;
  bool own_proposer_ = false;  // the DSpark drafter (not a test hook)
  // back-off with the payoff gate off (back_off()): kIdlePasses passes in a row that keep
  // nothing pause for kMinPause steps, doubling up to kMaxPause while it stays so
  static constexpr int kIdlePasses = 4, kMinPause = 8, kMaxPause = 256, kSeedAhead = 32;
  // the payoff gate (gate(), wait()): the first pass pauses kTimePlain steps to time plain ones
  // and is judged before the next (judge_next_); a pass that does not pay, where the means do
  // not either, waits for the budget (waiting_, unseeded steps), then seeds kSeedAhead steps
  // (pause_left_) and probes
  static constexpr int kTimePlain = 2;
  int idle_passes_ = 0, pause_left_ = 0, pause_len_ = kMinPause;
  bool judge_next_ = false, waiting_ = false;
  int64_t waited_ = 0;  // unseeded steps of this wait: the rings need a lead after any
  void back_off();
  void gate();
  bool wait();
  SpecBudget budget_;
  SpecPayoff payoff_;
  double pass_seconds_ = 0.0;  // of the active pass: its draft and its forward
  bool active_ = false;
  int64_t p0_ = 0;
  int used_ = 0;
  std::vector<int32_t> rows_;
  std::vector<float> logits_;
  SpecStats stats_;
};

}  // namespace cedar::runtime
