#include "runtime/spec_budget.h"

#include <algorithm>
#include <cmath>

namespace cedar::runtime {

void SpecBudget::lose(double steps) { lost_ = std::max(0.0, lost_ + steps); }

void SpecBudget::pass(double seconds, int emitted, const SpecPayoff& m) {
  tokens_ += emitted;
  if (!(seconds > 0.0)) return;
  const double plain = m.plain_s();
  if (plain > 0.0) {
    lose(seconds / plain - double(emitted));
  } else {
    unsettled_s_ += seconds;
    unsettled_tokens_ += emitted;
  }
}

void SpecBudget::plain_step(bool seeded, const SpecPayoff& m) {
  ++tokens_;
  const double plain = m.plain_s();
  if (!(plain > 0.0)) return;
  if (unsettled_tokens_ > 0) {
    lose(unsettled_s_ / plain - double(unsettled_tokens_));
    unsettled_s_ = 0.0;
    unsettled_tokens_ = 0;
  }
  if (seeded) lose(m.seed_extra());
}

int64_t SpecBudget::wait_steps(const SpecPayoff& m, int lead) const {
  const double probe = std::max(0.0, m.pass_loss()) + double(lead) * m.seed_extra();
  const double wait = std::ceil((lost_ + probe) / kShare) - double(tokens_) - double(lead);
  // bounded so the conversion is defined whatever the clock said (a waiting generation
  // recomputes this every step, so a long wait is not a hang)
  return wait > 0.0 ? int64_t(std::min(wait, 1e12)) : 0;
}

}  // namespace cedar::runtime
