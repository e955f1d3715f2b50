#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace {

using cedar::runtime::format_bytes;
using cedar::runtime::parse_size;

TEST(MemoryPlan, ParsesSizesInPowersOf1024) {
  EXPECT_EQ(parse_size("4096", "--x"), 4096);
  EXPECT_EQ(parse_size("512M", "--x"), int64_t(512) << 20);
  EXPECT_EQ(parse_size("16G", "--x"), int64_t(16) << 30);
  EXPECT_EQ(parse_size("16GiB", "--x"), int64_t(16) << 30);
  EXPECT_EQ(parse_size("1.5T", "--x"), int64_t(3) << 39);
  EXPECT_EQ(parse_size("64k", "--x"), int64_t(64) << 10);
}

TEST(MemoryPlan, RefusesMalformedSizesNamingTheFlag) {
  for (const char* bad : {"", "G", "12Q", "-1G", "0", "1e30T", "nan", "5 G"}) {
    try {
      parse_size(bad, "--mem-budget");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("--mem-budget"), std::string::npos);
    }
  }
}

TEST(MemoryPlan, FormatsBytes) {
  EXPECT_EQ(format_bytes(int64_t(3) << 29), "1.50 GiB");
  EXPECT_EQ(format_bytes(int64_t(12) << 20), "12.0 MiB");
  EXPECT_EQ(format_bytes(2048), "2.0 KiB");
}

}  // namespace
