#include "base/args.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <stdexcept>
#include <string>

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
  // every one of them is a usage error (status 2)
  auto d = make();
  EXPECT_THROW(d.parse(2, const_cast<char**>(bad1)), cedar::UsageError);
  EXPECT_THROW(c.get_int("n", 0), cedar::UsageError);
}

// Help shows a typed placeholder per value (by the flag's conventional name, or its own) and,
// with an env prefix, the variable; an option absent from argv takes the variable's value, argv
// wins over it, a boolean reads 1/0-like words, and an error names the variable.
TEST(Args, PlaceholdersAndEnvironmentVariables) {
  cedar::Args a("t", {{"ctx-size", "c", true, "context"},
                      {"model", "m", true, "model"},
                      {"mode", "", true, "mode", "off|on"},
                      {"no-cache", "", false, "flag"},
                      {"port", "", true, "port"}});
  setenv("CEDARTEST_CTX_SIZE", "4096", 1);
  setenv("CEDARTEST_NO_CACHE", "yes", 1);
  setenv("CEDARTEST_PORT", "x", 1);
  const char* argv[] = {"t", "--port", "9"};
  a.parse(3, const_cast<char**>(argv), "CEDARTEST_");
  EXPECT_EQ(a.get_int("ctx-size", 0), 4096);
  EXPECT_TRUE(a.has("no-cache"));
  EXPECT_EQ(a.get_int("port", 0), 9);  // argv over the environment
  EXPECT_FALSE(a.has("model"));
  const std::string u = a.usage();
  EXPECT_NE(u.find("-c, --ctx-size N"), std::string::npos) << u;
  EXPECT_NE(u.find("-m, --model PATH"), std::string::npos) << u;
  EXPECT_NE(u.find("--mode off|on"), std::string::npos) << u;
  EXPECT_NE(u.find("[$CEDARTEST_CTX_SIZE]"), std::string::npos) << u;
  setenv("CEDARTEST_CTX_SIZE", "big", 1);
  cedar::Args b("t", {{"ctx-size", "c", true, "context"}, {"no-cache", "", false, "flag"}});
  b.parse(1, const_cast<char**>(argv), "CEDARTEST_");
  try {
    (void)b.get_int("ctx-size", 0);
    ADD_FAILURE() << "expected an error";
  } catch (const cedar::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("$CEDARTEST_CTX_SIZE"), std::string::npos) << e.what();
  }
  setenv("CEDARTEST_NO_CACHE", "maybe", 1);
  cedar::Args c("t", {{"no-cache", "", false, "flag"}});
  EXPECT_THROW(c.parse(1, const_cast<char**>(argv), "CEDARTEST_"), cedar::UsageError);
  for (const char* v : {"CEDARTEST_CTX_SIZE", "CEDARTEST_NO_CACHE", "CEDARTEST_PORT"}) unsetenv(v);
}

}  // namespace
