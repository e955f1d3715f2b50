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
  // last one measured, paused at once when that said passes do not pay (a short generation no
  // longer spends its first passes and a timed plain step learning it again). A test hook's
  // proposer starts afresh.
  if (own_proposer_) payoff_ = engine.spec_payoff();
  payoff_.set_most(spec_tokens_ + 1);
  if (own_proposer_ && opt_.payoff_gate && payoff_.judged() && !payoff_.pays())
    pause_left_ = payoff_.pause_steps(kMinPause, kMaxPause);
}

VerifyPass::~VerifyPass() {
  if (opt_.enabled && own_proposer_ && payoff_.judged()) engine_.set_spec_payoff(payoff_);
}

double VerifyPass::now() const {
  if (opt_.clock) return opt_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool VerifyPass::run(SequenceState& st, int32_t id, int max_drafts, ForwardOptions base) {
  if (!opt_.enabled || max_drafts < 1 || active_) return false;
  if (judge_next_ && pause_left_ == 0) {  // the plain steps after the first pass are timed
    judge_next_ = false;
    if (opt_.payoff_gate && !payoff_.pays()) pause();
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
  stats_.pass_tokens_per_s = payoff_.pass_tokens_per_s();
  stats_.plain_tokens_per_s = payoff_.plain_tokens_per_s();
  // back-off: kIdlePasses passes in a row that kept nothing, or passes slower than plain steps
  // (the payoff gate), pause speculation for pause_len_ steps, doubling up to kMaxPause while
  // it stays so; a kept draft from passes that pay resets it
  const bool idle = used_ == 0 && ++idle_passes_ >= kIdlePasses;
  if (used_ > 0) idle_passes_ = 0;
  if (idle) {
    idle_passes_ = 0;
    pause();
  } else if (opt_.payoff_gate && !payoff_.pays()) {
    pause();
  } else if (opt_.payoff_gate && !payoff_.has_plain()) {
    // time plain steps after the first pass, and judge before the next: a pass that cannot pay
    // at any acceptance (SpecPayoff::hopeless, a small model's) then costs no second pass
    pause_left_ = kTimePlain;
    judge_next_ = true;
  } else if (used_ > 0) {
    pause_len_ = kMinPause;
  }
  return dropped;
}

void VerifyPass::pause() {
  pause_left_ = opt_.payoff_gate ? std::max(pause_len_, payoff_.pause_steps(kMinPause, kMaxPause))
                                 : pause_len_;
  pause_len_ = std::min(kMaxPause, 2 * pause_len_);
}

}  // namespace cedar::runtime
