// ProgressBar's line, and that it stays silent off a terminal; MappedFile::prefetch bounds.
#include "base/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/mapped_file.h"

namespace cedar {
namespace {

TEST(ProgressBar, RendersFractionCountsAndTime) {
  EXPECT_EQ(ProgressBar::render("prefill", 1434, 4096, "tokens", 2.14, 20),
            "prefill [#######.............]  35%  1434/4096 tokens  2.1 s");
  EXPECT_EQ(ProgressBar::render("w", 9, 3, "MiB", 0, 4), "w [####] 100%  3/3 MiB  0.0 s");
  EXPECT_EQ(ProgressBar::render("w", -1, 0, "MiB", 0, 4), "w [....]   0%  0/1 MiB  0.0 s");
}

TEST(ProgressBar, WritesNothingWhenNotATerminal) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar("x", 10, "u", std::chrono::milliseconds(0), f);
    EXPECT_FALSE(bar.enabled());
    for (int i = 0; i <= 10; ++i) bar.update(i);
  }
  EXPECT_EQ(std::ftell(f), 0);
  std::fclose(f);
}

TEST(MappedFile, PrefetchStaysInsideTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "cedar_prefetch_test.bin";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(10000, 'a');
  }
  auto f = MappedFile::open(path.string());
  f->prefetch(0, 1u << 30);  // clamped to the file
  f->prefetch(9999, 100);
  f->prefetch(20000, 10);  // past the end: nothing
  EXPECT_EQ(f->data()[9999], 'a');
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace cedar
