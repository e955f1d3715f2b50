// Whether speculative decoding pays on this machine and model: running means of a verify pass's
// wall time and of the tokens it emits, against a plain decode step's wall time. A pass costs a
// draft plus a target forward of several rows; where the target step is cheap next to that (a
// small model whose LM head dominates, or a drafter that rarely agrees) plain steps are faster,
// and the decode loop should use them. Timing only decides *when* to speculate: the tokens are
// plain decoding's either way (runtime/speculative.h).
#pragma once

#include <cstdint>

namespace cedar::runtime {

class SpecPayoff {
 public:
  void pass(double seconds, int emitted);
  void plain_step(double seconds);
  bool has_plain() const { return n_plain_ > 0; }
  // The most tokens a pass can emit (its drafts and one more; 0: unknown). A pass slower than
  // that many plain steps cannot pay at any acceptance, and one pass and one plain step show it.
  void set_most(int tokens) { most_ = tokens; }
  bool hopeless() const {
    return most_ > 0 && n_pass_ > 0 && n_plain_ > 0 && pass_s_ > double(most_) * plain_s_;
  }
  // Both kinds measured enough to compare (kMinPasses passes and one plain step), or hopeless().
  bool judged() const { return hopeless() || (n_pass_ >= kMinPasses && n_plain_ > 0); }
  // Passes emit at least as many tokens per second as plain steps (true until judged()).
  bool pays() const;
  double pass_tokens_per_s() const { return pass_s_ > 0 ? pass_tokens_ / pass_s_ : 0.0; }
  // Plain steps to pause after a pass that does not pay: ten times what a pass loses against
  // plain steps, counted in plain steps, so a probing pass costs at most a tenth of the time
  // paused before it; within [lo, hi]. lo until judged() and while passes pay; hi when
  // hopeless() (a probe then only watches for the machine or the model changing).
  int pause_steps(int lo, int hi) const;
  double plain_tokens_per_s() const { return plain_s_ > 0 ? 1.0 / plain_s_ : 0.0; }

 private:
  static constexpr int kMinPasses = 4;
  static constexpr double kAlpha = 0.25;  // weight of the newest sample in the running means
  static void mix(double& mean, double v, int64_t n) {
    mean = n == 0 ? v : mean + kAlpha * (v - mean);
  }
  double pass_s_ = 0.0, pass_tokens_ = 0.0, plain_s_ = 0.0;
  int64_t n_pass_ = 0, n_plain_ = 0;
  int most_ = 0;
};

}  // namespace cedar::runtime
