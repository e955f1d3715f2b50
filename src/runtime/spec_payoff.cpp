#include "runtime/spec_payoff.h"

#include <algorithm>
#include <cmath>

namespace cedar::runtime {

void SpecPayoff::pass(double seconds, int emitted) {
  if (!(seconds > 0.0)) return;
  mix(pass_s_, seconds, n_pass_);
  mix(pass_tokens_, double(emitted), n_pass_);
  ++n_pass_;
}

void SpecPayoff::plain_step(double seconds) {
  if (!(seconds > 0.0)) return;
  mix(plain_s_, seconds, n_plain_);
  ++n_plain_;
}

bool SpecPayoff::pays() const {
  if (!judged()) return true;
  return pass_tokens_ * plain_s_ >= pass_s_;  // tokens/pass_s >= 1/plain_s
}

int SpecPayoff::pause_steps(int lo, int hi) const {
  if (pays() || !(plain_s_ > 0.0)) return lo;
  if (hopeless()) return hi;
  const double lost = pass_s_ / plain_s_ - pass_tokens_;  // plain steps a pass loses
  return int(std::clamp(std::ceil(10.0 * lost), double(lo), double(hi)));
}

}  // namespace cedar::runtime
