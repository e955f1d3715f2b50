#include "base/args.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

cedar::Args make() {
  return cedar::Args("t", {{"model", "m", true, "dir"}, {"decode", "", false, "flag"}, {"n", "n", true, "count"}});
}

TEST(Args, ParsesLongShortInlineAndPositional) {
  const char* argv[] = {"t", "-m", "dir", "--decode", "--n=5", "file.txt"};
  auto a = make();
  a.parse(6, const_cast<char**>(argv));
  EXPECT_EQ(a.get("model"), "dir");
  EXPECT_TRUE(a.has("decode"));
  EXPECT_EQ(a.get_int("n", 0), 5);
  ASSERT_EQ(a.positional().size(), 1u);
  EXPECT_EQ(a.positional()[0], "file.txt");
}

TEST(Args, RejectsUnknownOptionAndMissingValue) {
  const char* bad1[] = {"t", "--nope"};
  auto a = make();
  EXPECT_THROW(a.parse(2, const_cast<char**>(bad1)), std::runtime_error);
  const char* bad2[] = {"t", "--model"};
  auto b = make();
  EXPECT_THROW(b.parse(2, const_cast<char**>(bad2)), std::runtime_error);
  const char* bad3[] = {"t", "--n", "x5"};
  auto c = make();
  c.parse(3, const_cast<char**>(bad3));
  EXPECT_THROW(c.get_int("n", 0), std::runtime_error);
}

}  // namespace
