#include "runtime/spec_payoff.h"

#include <algorithm>

namespace cedar::runtime {

void SpecPayoff::pass(double seconds, int emitted) {
  if (!(seconds > 0.0)) return;
  mix(pass_s_, seconds, n_pass_);
  mix(pass_tokens_, double(emitted), n_pass_);
  ++n_pass_;
}

void SpecPayoff::plain_step(double seconds, bool seeded) {
  if (!(seconds > 0.0)) return;
  if (seeded) {
    mix(seeded_s_, seconds, n_seeded_);
    ++n_seeded_;
  } else {
    mix(plain_s_, seconds, n_plain_);
    ++n_plain_;
  }
}

bool SpecPayoff::pays() const {
  if (!measured()) return true;
  return pass_tokens_ * plain_s() >= pass_s_;  // tokens/pass_s >= 1/plain_s
}

double SpecPayoff::pass_loss() const {
  if (!measured()) return 0.0;
  return pass_s_ / plain_s() - pass_tokens_;
}

double SpecPayoff::seed_extra() const {
  if (n_plain_ == 0 || n_seeded_ == 0) return 0.0;
  return std::max(0.0, seeded_s_ / plain_s_ - 1.0);
}

}  // namespace cedar::runtime
