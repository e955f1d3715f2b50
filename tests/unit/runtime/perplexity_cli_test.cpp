// `cedar perplexity` as a user runs it (the real binary, CEDAR_BIN) on a generated tiny model:
// the score equals the negative log-likelihood computed here from `cedar logits` of the same
// window (an independent path: one exact call, logits to .npy), windows and scored rows are
// counted as documented, CED equals exact prefill where the decoder sees the whole window, and
// bad input exits non-zero with a message.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/dsml.h"

namespace {

using cedar::text::ojson;

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Result {
  int status = -1;
  std::string out, err;
};

// A float32 .npy of `cedar logits` (format version 1: magic, version, u16 header length).
std::vector<float> read_npy_f32(const std::string& path) {
  const std::string b = slurp(path);
  EXPECT_GE(b.size(), 10u);
  const size_t header = size_t(uint8_t(b[8])) | size_t(uint8_t(b[9])) << 8;
  std::vector<float> v((b.size() - 10 - header) / sizeof(float));
  std::memcpy(v.data(), b.data() + 10 + header, v.size() * sizeof(float));
  return v;
}

class PerplexityCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/cedar-ppl-cli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    model_ = root_ + "/tiny";
    ASSERT_EQ(run("make-model --preset tiny --seed 1 --out " + model_).status, 0);
    text_ = root_ + "/text.txt";
    std::ofstream f(text_, std::ios::binary);
    for (int i = 0; i < 40; ++i)
      f << "The river runs past the mill at dawn, and the miller counts " << i
        << " sacks of grain before the market opens.\n";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(root_); }

  static Result run(const std::string& args) {
    const std::string out = root_ + "/stdout.txt", err = root_ + "/stderr.txt";
    const int st = std::system((cedar_bin() + " " + args + " > " + out + " 2> " + err).c_str());
    Result r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  static ojson perplexity(const std::string& flags) {
    const Result r =
        run("perplexity -m " + model_ + " -f " + text_ + " --kernels ref --json " + flags);
    EXPECT_EQ(r.status, 0) << r.err;
    return ojson::parse(r.out, nullptr, false);
  }
  static std::vector<int32_t> text_ids() {
    const Result r = run("tokenize --tokenizer " + model_ + "/tokenizer.json " + text_);
    EXPECT_EQ(r.status, 0) << r.err;
    return ojson::parse(r.out).get<std::vector<int32_t>>();
  }

  static std::string root_, model_, text_;
};
std::string PerplexityCli::root_, PerplexityCli::model_, PerplexityCli::text_;

TEST_F(PerplexityCli, TheScoreIsTheLikelihoodOfTheLastRowsFromCedarLogits) {
  const ojson p = perplexity("-c 64 --exact-prefill --chunks 1");
  ASSERT_TRUE(p.is_object());
  ASSERT_EQ(p["tokens"], 32);  // min(128, 64 / 2) rows of one window
  // the window: BOS and 63 text tokens; the rows 32..63 predict the tokens after them
  std::vector<int32_t> ids = text_ids();
  ids.insert(ids.begin(), 0);
  std::string list;
  for (int i = 0; i < 64; ++i) list += (i ? "," : "") + std::to_string(ids[size_t(i)]);
  const std::string npy = root_ + "/w.npy";
  ASSERT_EQ(run("logits -m " + model_ + " --kernels ref --ids " + list + " --out " + npy).status,
            0);
  const std::vector<float> logits = read_npy_f32(npy);
  const size_t vocab = logits.size() / 64;
  ASSERT_EQ(vocab, 129280u);
  double nll = 0;
  for (size_t row = 32; row < 64; ++row) {
    const float* l = logits.data() + row * vocab;
    double mx = l[0];
    for (size_t v = 0; v < vocab; ++v) mx = std::max(mx, double(l[v]));
    double sum = 0;
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(double(l[v]) - mx);
    nll += std::log(sum) + mx - double(l[ids[row + 1]]);
  }
  nll /= 32;
  EXPECT_NEAR(p["nll"].get<double>(), nll, 1e-9 * nll);
  EXPECT_NEAR(p["perplexity"].get<double>(), std::exp(nll), 1e-9 * std::exp(nll));
}

TEST_F(PerplexityCli, WindowsAndRowsAreCountedAndCedMatchesExactOnShortWindows) {
  const size_t n = text_ids().size();
  const ojson ced = perplexity("-c 64"), exact = perplexity("-c 64 --exact-prefill");
  ASSERT_TRUE(ced.is_object() && exact.is_object());
  EXPECT_EQ(ced["windows"], (n - 1) / 63);
  EXPECT_EQ(ced["tokens"], ced["windows"].get<int64_t>() * 32);
  EXPECT_EQ(ced["prefill"], "ced");
  EXPECT_EQ(exact["prefill"], "exact");
  // a prompt of <= 128 tokens: the CED decoder runs on every row, exactly as exact prefill
  EXPECT_EQ(ced["perplexity"], exact["perplexity"]);
  // longer windows: the last 128 rows are scored either way, and both are finite
  const ojson long_ced = perplexity("-c 256");
  ASSERT_TRUE(long_ced.is_object());
  EXPECT_EQ(long_ced["tokens"], long_ced["windows"].get<int64_t>() * 128);
  EXPECT_TRUE(std::isfinite(long_ced["perplexity"].get<double>()));
  EXPECT_GT(long_ced["perplexity"].get<double>(), 1.0);
}

TEST_F(PerplexityCli, BadInputExitsNonZeroWithAMessage) {
  Result r = run("perplexity -m " + model_ + " -f " + root_ + "/missing.txt");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  std::ofstream(root_ + "/short.txt") << "Too short.";
  r = run("perplexity -m " + model_ + " -f " + root_ + "/short.txt");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("fewer than one window"), std::string::npos) << r.err;
  r = run("perplexity -m " + model_ + " -f " + text_ + " -c 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--ctx"), std::string::npos) << r.err;
}

}  // namespace
