// The prompt printer's depth bound (text/dsml.h py_json_append): a value nested deeper than any
// parse would let through is refused, not recursed into.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "text/dsml.h"

namespace cedar::text {
namespace {

std::string nested(int d) { return std::string(size_t(d), '[') + std::string(size_t(d), ']'); }

TEST(PyJson, ADeepValueFailsCleanly) {
  // a value deeper than the printer allows, built in code (no parse to stop it)
  ojson deep = ojson::array();
  for (int i = 0; i < 1000; ++i) deep = ojson::array({deep});
  std::string out;
  EXPECT_THROW(py_json_append(deep, &out), std::runtime_error);
  ojson ok = ojson::array();
  for (int i = 0; i < 100; ++i) ok = ojson::array({ok});
  out.clear();
  py_json_append(ok, &out);
  EXPECT_EQ(out, nested(101));
}

}  // namespace
}  // namespace cedar::text
