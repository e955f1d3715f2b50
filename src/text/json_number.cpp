#include "text/json_number.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace cedar::text {

namespace {

using i128 = __int128;
// Beyond every reachable number: a prefix of at most 15 digits, in units of at most 10^-30,
// stays below 10^16 units; bounds are saturated here rather than overflow.
constexpr i128 kSat = i128(1000000000000000000LL) * i128(1000000000000000000LL);

i128 pow10(int k) {
  i128 v = 1;
  for (int i = 0; i < k; ++i) v *= 10;
  return v;
}

// floor / ceil of m * 10^x (m < 10^18), saturated at kSat; *exact: no rounding happened.
void scale(uint64_t m, int x, i128* floor, i128* ceil, bool* exact) {
  *exact = true;
  if (m == 0) {
    *floor = *ceil = 0;
  } else if (x >= 0) {
    *floor = *ceil = x > 18 ? kSat : std::min<i128>(i128(m) * pow10(x), kSat);
  } else if (-x > 36) {
    *floor = 0;
    *ceil = 1;
    *exact = false;
  } else {
    const i128 p = pow10(-x);
    *floor = i128(m) / p;
    *exact = i128(m) % p == 0;
    *ceil = *floor + (*exact ? 0 : 1);
  }
}

DecBound negate(DecBound b) {
  b.neg = !b.neg;
  return b;
}

// The smallest / largest integer n with n * 10^-g above lo / below hi.
i128 lowest(const DecBound& lo, int g) {
  if (!lo.set) return -kSat;
  i128 f, c;
  bool exact;
  scale(lo.m, lo.e + g, &f, &c, &exact);
  const i128 v = lo.neg ? -f : c;  // ceil(-a) = -floor(a)
  return exact && lo.excl ? v + 1 : v;
}
i128 highest(const DecBound& hi, int g) {
  if (!hi.set) return kSat;
  i128 f, c;
  bool exact;
  scale(hi.m, hi.e + g, &f, &c, &exact);
  const i128 v = hi.neg ? -c : f;
  return exact && hi.excl ? v - 1 : v;
}

// Some n in [a, b) (the number's magnitude n * 10^-g; negative when neg) satisfies r.
bool hits(const NumberRule& r, bool neg, i128 a, i128 b, int g) {
  const DecBound lo = neg ? negate(r.hi) : r.lo;
  const DecBound hi = neg ? negate(r.lo) : r.hi;
  i128 from = std::max(a, lowest(lo, g));
  const i128 to = std::min(b - 1, highest(hi, g));
  if (r.multiple != 0) {  // integer rules: g == 0
    const i128 d = i128(r.multiple);
    from = (std::max<i128>(from, 0) + d - 1) / d * d;
  }
  return from <= to;
}

}  // namespace

DecBound make_bound(double v, bool exclusive) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);  // the shortest round-trip spelling
  DecBound b;
  b.set = true;
  b.excl = exclusive;
  const char* p = buf;
  if (*p == '-') {
    b.neg = true;
    ++p;
  }
  int frac = -1;
  for (; p < res.ptr && *p != 'e'; ++p) {
    if (*p == '.') {
      frac = 0;
      continue;
    }
    b.m = b.m * 10 + uint64_t(*p - '0');
    if (frac >= 0) ++frac;
  }
  if (p < res.ptr) b.e = int32_t(std::strtol(p + 1, nullptr, 10));
  b.e -= std::max(frac, 0);
  return b;
}

bool number_reachable(const NumberRule& r, const NumPrefix& p) {
  if (!r.exact) return true;
  if (p.ndig == 0) {  // nothing (or only '-') yet: some first digit works
    for (uint64_t d = 0; d < 10; ++d) {
      NumPrefix q = p;
      q.mant = d;
      q.ndig = 1;
      if (number_reachable(r, q)) return true;
    }
    return false;
  }
  const int left = kExactDigits - p.ndig;  // digits still allowed
  const i128 m = i128(p.mant);
  if (p.frac < 0) {
    if (p.mant == 0)  // a leading zero: 0 itself, or 0.xxx
      return r.integer || left == 0 ? hits(r, p.neg, 0, 1, 0)
                                    : hits(r, p.neg, 0, pow10(left), left);
    for (int j = 0; j <= left; ++j) {  // j more integer digits, then maybe a fraction
      if (r.integer ? hits(r, p.neg, m * pow10(j), (m + 1) * pow10(j), 0)
                    : hits(r, p.neg, m * pow10(left), (m + 1) * pow10(left), left - j))
        return true;
    }
    return false;
  }
  if (left == 0) return p.frac > 0 && hits(r, p.neg, m, m + 1, p.frac);
  return hits(r, p.neg, m * pow10(left), (m + 1) * pow10(left), p.frac + left);
}

bool number_satisfies(const NumberRule& r, const NumPrefix& p) {
  if (!r.exact) return true;
  return hits(r, p.neg, i128(p.mant), i128(p.mant) + 1, std::max<int>(p.frac, 0));
}

bool number_finish(NumberRule* r) {
  NumPrefix p;
  r->pos_ok = number_reachable(*r, p);
  p.neg = true;
  r->neg_ok = number_reachable(*r, p);
  return r->pos_ok || r->neg_ok;
}

}  // namespace cedar::text
