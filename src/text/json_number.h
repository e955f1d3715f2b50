// Numeric bounds enforced digit by digit. A number under minimum / maximum / exclusive* /
// multipleOf is written as a plain decimal (no exponent) of at most kExactDigits digits, so that
// its double -- what a validator such as ajv compares -- orders exactly as its decimal text does
// (any two distinct decimals of at most 15 significant digits are distinct doubles). The bounds
// are taken as the validator sees them too: the double of the schema's number, spelled as its
// shortest decimal. After each digit the matcher asks whether the prefix can still become a
// number in range, so a number never runs into a dead end.
#pragma once

#include <cstdint>

namespace cedar::text {

class ByteDfa;

constexpr int kExactDigits = 15;

// One bound: value = (neg ? -1 : 1) * m * 10^e.
struct DecBound {
  bool set = false;
  bool excl = false;
  bool neg = false;
  uint64_t m = 0;
  int32_t e = 0;
};
// The double v as its shortest decimal; v must be finite.
DecBound make_bound(double v, bool exclusive);

struct NumberRule {
  bool integer = false;  // integers only: no fraction, no exponent
  bool exact = false;    // bounds or multipleOf: plain decimals of at most kExactDigits digits
  DecBound lo, hi;
  uint64_t multiple = 0;              // multipleOf (an integer; integer rules only), 0: none
  const ByteDfa* literals = nullptr;  // enum / const: the allowed texts (the rest is unused)
  bool pos_ok = true, neg_ok = true;  // a number can start with a digit / with '-'
  bool sat = true;                    // some number satisfies the rule
};

// The number read so far (shared by the matcher's hypotheses).
struct NumPrefix {
  uint64_t mant = 0;  // every digit read, as one integer (exact while ndig <= kExactDigits)
  uint8_t ndig = 0;   // digits read, integer and fraction
  int8_t frac = -1;   // digits after the '.' (-1: no '.')
  bool neg = false;
};

// Some completion of p (as an exact rule allows it to grow) satisfies r.
bool number_reachable(const NumberRule& r, const NumPrefix& p);
// p, a complete number, satisfies r.
bool number_satisfies(const NumberRule& r, const NumPrefix& p);
// Sets pos_ok / neg_ok; false when no number satisfies r.
bool number_finish(NumberRule* r);

}  // namespace cedar::text
