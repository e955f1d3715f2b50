// `cedar tokenize --tokenizer PATH FILE`: the CLI contract of issue 3.
#include <gtest/gtest.h>

#include <filesystem>

#include "text_test_util.h"

namespace cedar::text {
namespace {

using namespace testing;

CommandResult tokenize(const std::string& file, const std::string& tok = tokenizer_json_path()) {
  return run_command(shell_quote(cedar_bin()) + " tokenize --tokenizer " + shell_quote(tok) + " " +
                     shell_quote(file));
}

class CliTokenize : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("cli"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& bytes) {
    const std::string p = dir_ + "/" + name;
    write_file(p, bytes);
    return p;
  }
  std::string dir_;
};

TEST_F(CliTokenize, PrintsPlainIdsAsOneJsonArray) {
  const auto r = tokenize(file("user.txt", "<｜User｜>"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[30,28217,6756,28217,32]\n");  // no BOS, no added-token ids
  const auto e = tokenize(file("effort.txt", "You are helpful."));
  EXPECT_EQ(e.out, "[3476,477,11502,16]\n");
}

TEST_F(CliTokenize, EmptyFileGivesEmptyArray) {
  const auto r = tokenize(file("empty.txt", ""));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[]\n");
}

TEST_F(CliTokenize, InvalidUtf8IsAnError) {
  const auto r = tokenize(file("bad.txt", "ok\xC3("));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("not valid UTF-8"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("offset 2"), std::string::npos) << r.err;
}

TEST_F(CliTokenize, MissingInputFileIsAnError) {
  const auto r = tokenize(dir_ + "/does-not-exist.txt");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("does-not-exist.txt"), std::string::npos) << r.err;
}

TEST_F(CliTokenize, BadTokenizerJsonIsAnError) {
  const std::string in = file("in.txt", "hello");
  auto r = tokenize(in, file("broken.json", "{\"model\": [1, 2"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("broken.json"), std::string::npos) << r.err;
  r = tokenize(in, file("wrong.json", R"({"model":{"type":"Unigram"},"pre_tokenizer":null})"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Unigram"), std::string::npos) << r.err;
  r = tokenize(in, dir_ + "/missing.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
}

TEST_F(CliTokenize, UsageErrors) {
  const std::string in = file("in.txt", "hello");
  auto r = run_command(shell_quote(cedar_bin()) + " tokenize " + shell_quote(in));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tokenizer"), std::string::npos) << r.err;
  r = run_command(shell_quote(cedar_bin()) + " tokenize --tokenizer " +
                  shell_quote(tokenizer_json_path()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("FILE"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cedar::text
