// generation_config.json as a checkpoint ships it, and as a hostile one might: the values read,
// and every bad file skipped with a warning that names it (never an error, never a hang).
#include "model/generation_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace cedar {
namespace {

class GenerationConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cedar-gencfg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  GenerationDefaults with(const std::string& text) {
    std::ofstream(dir_ + "/generation_config.json", std::ios::binary | std::ios::trunc) << text;
    return read_generation_config(dir_);
  }
  std::string dir_;
};

TEST_F(GenerationConfig, TheReleaseFileIsRead) {
  const GenerationDefaults none = read_generation_config(dir_);
  EXPECT_TRUE(none.source.empty());
  EXPECT_TRUE(none.warning.empty());
  const GenerationDefaults g = with(
      R"({"_from_model_config": true, "bos_token_id": 0, "eos_token_id": 1, "do_sample": true,
          "temperature": 1.0, "top_p": 0.95, "transformers_version": "4.46.3"})");
  EXPECT_EQ(g.source, dir_ + "/generation_config.json");
  EXPECT_EQ(g.temperature, 1.0);
  EXPECT_EQ(g.top_p, 0.95);
  EXPECT_FALSE(g.top_k.has_value());
  EXPECT_FALSE(g.min_p.has_value());
  EXPECT_EQ(with(R"({"do_sample": false, "temperature": 0.7, "top_k": 20})").temperature, 0.0);
  EXPECT_EQ(with(R"({"top_k": 20, "min_p": 0.05})").top_k, 20);
  // a GGUF file (not a directory) has no such file beside it
  EXPECT_TRUE(read_generation_config(dir_ + "/generation_config.json").source.empty());
}

TEST_F(GenerationConfig, ABadFileIsSkippedWithAWarning) {
  for (const char* bad :
       {"{", "[1, 2]", R"({"temperature": -1})", R"({"top_p": 0})", R"({"top_p": 1.5})",
        R"({"top_k": 2.5})", R"({"min_p": "x"})", R"({"temperature": 1e400})"}) {
    const GenerationDefaults g = with(bad);
    EXPECT_TRUE(g.source.empty()) << bad;
    EXPECT_FALSE(g.temperature.has_value()) << bad;
    EXPECT_NE(g.warning.find("generation_config.json is not used"), std::string::npos) << bad;
  }
  // larger than 1 MiB: refused before it is read
  const GenerationDefaults big = with("{\"pad\": \"" + std::string(2 << 20, 'x') + "\"}");
  EXPECT_FALSE(big.warning.empty());
  // a FIFO in its place: refused at once (the open never waits for a writer)
  std::filesystem::remove(dir_ + "/generation_config.json");
  ASSERT_EQ(mkfifo((dir_ + "/generation_config.json").c_str(), 0600), 0);
  const GenerationDefaults fifo = read_generation_config(dir_);
  EXPECT_FALSE(fifo.warning.empty());
  EXPECT_TRUE(fifo.source.empty());
}

}  // namespace
}  // namespace cedar
