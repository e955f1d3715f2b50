#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

namespace cedar::runtime {

void SpecStats::add(const SpecStats& o) {
  passes += o.passes;
  emitted += o.emitted;
  drafted += o.drafted;
  accepted += o.accepted;
  paused_steps += o.paused_steps;
  gate_lost_steps += o.gate_lost_steps;
  offered_at.resize(std::max(offered_at.size(), o.offered_at.size()));
  accepted_at.resize(offered_at.size());
  for (size_t k = 0; k < o.offered_at.size(); ++k) {
    offered_at[k] += o.offered_at[k];
    accepted_at[k] += o.accepted_at[k];
  }
}

VerifyPass::VerifyPass(Engine& engine, const SpeculativeOptions& opt) : engine_(engine), opt_(opt) {
  if (!opt_.enabled) return;
  const DSpark* ds = engine.model().dspark();
  own_proposer_ = !opt_.proposer;
  if (own_proposer_ && !ds)
    throw std::runtime_error("speculative decoding: the model has no DSpark stages");
  if (!(opt_.min_confidence >= 0.0 && opt_.min_confidence < 1.0))
    throw std::runtime_error("speculative decoding: min_confidence must be in [0, 1)");
  spec_tokens_ = opt_.spec_tokens > 0 ? opt_.spec_tokens : (ds ? ds->block_size() : 5);
  if (spec_tokens_ + 1 > engine.config().sliding_window)
    throw std::runtime_error("speculative decoding: " + std::to_string(spec_tokens_) +
                             " drafts per pass do not fit the window");
  // The drafter's costs are the model's and the machine's: a generation starts from what the
  // last one measured, waiting for its budget at once when that said passes do not pay (its
  // first probe comes when its own tokens pay for it, not in its first step). A test hook's
  // proposer starts afresh.
  if (own_proposer_) payoff_ = engine.spec_payoff();
  if (own_proposer_ && opt_.payoff_gate && payoff_.measured() && !payoff_.pays()) waiting_ = true;
}

VerifyPass::~VerifyPass() {
  if (opt_.enabled && own_proposer_ && payoff_.measured()) engine_.set_spec_payoff(payoff_);
}

double VerifyPass::now() const {
  if (opt_.clock) return opt_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool VerifyPass::run(SequenceState& st, int32_t id, int max_drafts, ForwardOptions base) {
  if (!opt_.enabled || max_drafts < 1 || active_) return false;
  if (judge_next_ && pause_left_ == 0) {  // the plain steps after the first pass are timed
    judge_next_ = false;
    gate();
  }
  if (waiting_ && wait()) {  // passes do not pay: unseeded plain steps until the budget allows
    ++stats_.paused_steps;
    return false;
  }
  if (pause_left_ > 0) {  // the drafter has not been helping: plain steps for a while
    --pause_left_;
    ++stats_.paused_steps;
    return false;
  }
  // the drafter's rings must reach this position (not so after a prefix-cache restore or a
  // forward that did not seed): a plain forward instead, which seeds them
  if (own_proposer_ && (st.dspark_to != st.n_tokens || st.dspark_from >= st.dspark_to))
    return false;
  const int max = std::min(max_drafts, spec_tokens_);
  const double t0 = now();
  std::vector<int32_t> drafts;
  if (own_proposer_) {
    // verify the drafts up to the first whose confidence is below the bar: decided from the
    // drafter's own outputs before the target sees them (non-anticipating, so lossless)
    const Draft d = engine_.draft(st, id, false);  // tokens and confidences
    for (size_t k = 0; k + 1 < d.tokens.size() && int(k) < max; ++k) {
      if (opt_.min_confidence > 0.0 &&
          1.0 / (1.0 + std::exp(-double(d.confidence[k]))) < opt_.min_confidence)
        break;
      drafts.push_back(d.tokens[k + 1]);
    }
  } else {
    drafts = opt_.proposer(st, id, max);
    drafts.resize(std::min<size_t>(drafts.size(), size_t(max)));
  }
  if (drafts.empty()) return false;
  rows_ = {id};
  rows_.insert(rows_.end(), drafts.begin(), drafts.end());
  const int n = int(rows_.size());
  const int64_t V = engine_.config().vocab_size;
  logits_.resize(size_t(n) * size_t(V));
  base.logits = LogitsWanted::kAll;
  base.completes_prompt = true;
  base.dspark_seed = true;
  base.keep_undo = true;
  p0_ = st.n_tokens;
  engine_.forward(st, rows_.data(), n, p0_, base, logits_.data());
  pass_seconds_ = now() - t0;
  active_ = true;
  used_ = 0;
  return true;
}

const float* VerifyPass::logits() const {
  return logits_.data() + size_t(used_) * size_t(engine_.config().vocab_size);
}

bool VerifyPass::advance(int32_t t) {
  if (!active_ || used_ + 1 >= int(rows_.size()) || rows_[size_t(used_ + 1)] != t) return false;
  ++used_;
  return true;
}

int VerifyPass::finish(SequenceState& st) {
  if (!active_) return 0;
  active_ = false;
  const int drafts = int(rows_.size()) - 1, dropped = drafts - used_;
  st.rewind(dropped);
  ++stats_.passes;
  stats_.emitted += used_ + 1;
  stats_.drafted += drafts;
  stats_.accepted += used_;
  if (stats_.offered_at.size() < size_t(drafts)) {
    stats_.offered_at.resize(size_t(drafts));
    stats_.accepted_at.resize(size_t(drafts));
  }
  for (int k = 0; k < drafts; ++k) ++stats_.offered_at[size_t(k)];
  for (int k = 0; k < used_; ++k) ++stats_.accepted_at[size_t(k)];
  payoff_.pass(pass_seconds_, used_ + 1);
  budget_.pass(pass_seconds_, used_ + 1, payoff_);
  stats_.pass_tokens_per_s = payoff_.pass_tokens_per_s();
  stats_.plain_tokens_per_s = payoff_.plain_tokens_per_s();
  stats_.gate_lost_steps = budget_.lost_steps();
  if (!opt_.payoff_gate) {
    back_off();
  } else if (!payoff_.has_plain()) {
    // time plain steps after the first pass, and judge it before the next: a pass that does
    // not pay then costs no second pass before the budget allows one
    pause_left_ = kTimePlain;
    judge_next_ = true;
  } else {
    gate();
  }
  return dropped;
}

void VerifyPass::plain_step(double seconds) {
  const bool seeded = seeding();
  payoff_.plain_step(seconds, seeded);
  budget_.plain_step(seeded, payoff_);
  stats_.plain_tokens_per_s = payoff_.plain_tokens_per_s();
  stats_.gate_lost_steps = budget_.lost_steps();
}

// Without the payoff gate a drafter whose passes keep nothing would cost a verify pass per token:
// kIdlePasses such passes in a row pause it for pause_len_ steps, doubling while it stays so; a
// kept draft resets it.
void VerifyPass::back_off() {
  if (used_ > 0) {
    idle_passes_ = 0;
    pause_len_ = kMinPause;
  } else if (++idle_passes_ >= kIdlePasses) {
    idle_passes_ = 0;
    pause_left_ = pause_len_;
    pause_len_ = std::min(kMaxPause, 2 * pause_len_);
  }
}

// After a pass whose plain steps are timed: passes go on while the running means say they pay
// and the budget holds (the means lag a drafter that stops paying by a few passes); otherwise
// speculation waits for the budget (wait()). A probe that pays lowers the loss so far and the
// next probe's expected loss, so the budget allows the next pass at once: a drafter that starts
// to pay is back on from its first paying probe, before the means have caught up.
void VerifyPass::gate() {
  if (payoff_.pays() && budget_.within()) return;
  waiting_ = true;
  waited_ = 0;
}

// A step while the gate waits: true (an unseeded plain step) until the budget allows the next
// probe after its seeding lead; then the lead's kSeedAhead steps (pause_left_), or the probe at
// once where no step has waited yet (the rings are still current) and the budget allows it.
bool VerifyPass::wait() {
  if (waited_ == 0 && budget_.wait_steps(payoff_, 0) == 0) {
    waiting_ = false;
    return false;
  }
  if (budget_.wait_steps(payoff_, kSeedAhead) > 0) {
    ++waited_;
    return true;
  }
  waiting_ = false;
  waited_ = 0;
  pause_left_ = kSeedAhead;
  return false;
}

}  // namespace cedar::runtime
