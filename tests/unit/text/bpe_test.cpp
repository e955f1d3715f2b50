// BPE merge order and tokenizer.json validation on small synthetic tokenizers, plus a property
// test of the heap-based merge against a plain quadratic implementation on the real merges.
#include "text/bpe.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "../peak_memory.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text_test_util.h"

namespace cedar::text {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

// A tokenizer whose vocab is the 256 byte characters (id = byte value) plus `extra` tokens
// (ids 256, 257, ... in order), with the given merges.
json synthetic(const std::vector<std::string>& extra, const json& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, char(b)))] = b;
  int next = 256;
  for (const auto& e : extra) vocab[e] = next++;
  json j;
  j["version"] = "1.0";
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  j["pre_tokenizer"] = json::parse(R"({"type":"Sequence","pretokenizers":[
      {"type":"Split","pattern":{"Regex":" ?[a-z]+|[0-9]"},"behavior":"Isolated","invert":false},
      {"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})");
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"byte_fallback", false},
                {"vocab", vocab},
                {"merges", merges}};
  j["added_tokens"] = json::array();
  return j;
}

Tokenizer make(const json& j) { return Tokenizer::from_json_text(j.dump(), "synthetic"); }

std::string load_error(const json& j) {
  try {
    make(j);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Bpe, LowestRankMergesFirstNotLeftmost) {
  // (b,c) has the better rank, so "abc" becomes a|bc, and "a bc" is no merge.
  const Tokenizer t = make(synthetic({"bc", "ab", "abc"}, {"b c", "a b", "ab c"}));
  EXPECT_EQ(t.encode("abc"), (Ids{'a', 256}));
  // With the ranks the other way round the same vocab gives one token.
  const Tokenizer u = make(synthetic({"bc", "ab", "abc"}, {"a b", "b c", "ab c"}));
  EXPECT_EQ(u.encode("abc"), (Ids{258}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  const Tokenizer t = make(synthetic({"aa", "aaaa"}, {"a a", "aa aa"}));
  EXPECT_EQ(t.encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(t.encode("aaaa"), (Ids{257}));
  EXPECT_EQ(t.encode("aaaaa"), (Ids{257, 'a'}));
  EXPECT_EQ(t.encode("aaaaaaa"), (Ids{257, 256, 'a'}));
}

TEST(Bpe, MergesAsArraysAndPiecesAreIndependent) {
  const Tokenizer t = make(synthetic({"ab"}, json::parse(R"([["a","b"]])")));
  EXPECT_EQ(t.encode("ab ab"), (Ids{256, ' ', 256}));
  // " ab" is its own piece (" ?[a-z]+") and "Ġ a" is no merge: space, a|b → ' ', ab.
  EXPECT_EQ(t.encode(" ab"), (Ids{' ', 256}));
  EXPECT_EQ(t.encode("ab1ab"), (Ids{256, '1', 256}));
}

TEST(Bpe, IgnoreMergesTakesWholeWords) {
  json j = synthetic({"ab", "xyz"}, {"a b"});
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(make(j).encode("xyz"), (Ids{257}));
  EXPECT_EQ(make(j).encode("ab"), (Ids{256}));
}

TEST(Bpe, RejectsBadModels) {
  json j = synthetic({"ab"}, {"a q"});
  EXPECT_NE(load_error(j).find("merges[0] 'a q' refers to a token missing from the vocab"),
            std::string::npos)
      << load_error(j);
  j = synthetic({}, {"a b c"});
  EXPECT_NE(load_error(j).find("merges[0]"), std::string::npos);
  j = synthetic({}, json::array());
  j["model"]["vocab"].erase("A");
  j["model"]["vocab"]["not a byte"] = 65;  // ids stay contiguous
  EXPECT_NE(load_error(j).find("no entry for byte 65"), std::string::npos) << load_error(j);
  j = synthetic({}, json::array());
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(load_error(j).find("only BPE"), std::string::npos);
  j = synthetic({}, json::array());
  j["model"]["byte_fallback"] = true;
  EXPECT_NE(load_error(j).find("byte_fallback"), std::string::npos);
  j = synthetic({}, json::array());
  j["model"]["dropout"] = 0.1;
  EXPECT_NE(load_error(j).find("dropout"), std::string::npos);
  j = synthetic({}, json::array());
  j["model"].erase("merges");
  EXPECT_NE(load_error(j).find("merges is missing"), std::string::npos);
  j = synthetic({}, json::array());
  j["model"]["vocab"]["x"] = 5;  // id 5 twice
  EXPECT_NE(load_error(j).find("id 5 is used twice"), std::string::npos);
}

TEST(Bpe, RejectsBadTokenizerFiles) {
  EXPECT_NE(load_error(json::parse("[1,2]")).find("top level"), std::string::npos);
  try {
    Tokenizer::from_json_text("{ not json", "file.json");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("file.json: invalid JSON"), std::string::npos);
  }
  try {
    Tokenizer::load("/nonexistent/dir/tokenizer.json");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/tokenizer.json"), std::string::npos);
  }
  json j = synthetic({}, json::array());
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_NE(load_error(j).find("normalizer"), std::string::npos);
  j = synthetic({}, json::array());
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(load_error(j).find("decoder.type"), std::string::npos);
  j = synthetic({}, json::array());
  j.erase("pre_tokenizer");
  EXPECT_NE(load_error(j).find("pre_tokenizer"), std::string::npos);
  // Added tokens: a gap in the id space, a duplicate, unsupported flags, a clash with the vocab.
  j = synthetic({}, json::array());
  // (an added token may repeat a vocab entry, so a gap can hide below the count of tokens)
  j["added_tokens"] = json::parse(R"([{"id":65,"content":"A"},{"id":257,"content":"<x>"}])");
  EXPECT_NE(load_error(j).find("token id 256 is neither"), std::string::npos) << load_error(j);
  j["added_tokens"] = json::parse(R"([{"id":256,"content":"<x>"},{"id":256,"content":"<y>"}])");
  EXPECT_NE(load_error(j).find("appears twice"), std::string::npos);
  j["added_tokens"] = json::parse(R"([{"id":256,"content":"<x>","lstrip":true}])");
  EXPECT_NE(load_error(j).find("lstrip"), std::string::npos);
  j["added_tokens"] = json::parse(R"([{"id":256,"content":"A"}])");
  EXPECT_NE(load_error(j).find("vocab says 65"), std::string::npos);
  j["added_tokens"] = json::parse(R"([{"id":"x","content":"A"}])");
  EXPECT_NE(load_error(j).find("added_tokens entry"), std::string::npos);
}

TEST(Bpe, IdsPastTheTokenCountAreRefusedBeforeTheIdTableIsSized) {
  // one id of 10^8 sized the id tables (gigabytes) before the gap below it was found
  json j = synthetic({"ab"}, json::array());
  j["model"]["vocab"]["ab"] = 100000000;
  std::string err;
  const int64_t growth = cedar::testing::peak_growth_bytes([&] { err = load_error(j); });
  EXPECT_NE(err.find("synthetic: tokenizer.json: model.vocab['ab'] = 100000000: ids must be "
                     "contiguous, and 257 vocab entries + 0 added tokens define ids below 257"),
            std::string::npos)
      << err;
  EXPECT_LT(growth, int64_t(64) << 20);
  j = synthetic({}, json::array());
  j["added_tokens"] = json::parse(R"([{"id":100000000,"content":"<x>"}])");
  const int64_t growth2 = cedar::testing::peak_growth_bytes([&] { err = load_error(j); });
  EXPECT_NE(err.find("added token id 100000000 is out of range: ids must be contiguous, and 256 "
                     "vocab entries + 1 added tokens define ids below 257"),
            std::string::npos)
      << err;
  EXPECT_LT(growth2, int64_t(64) << 20);
}

TEST(Bpe, TokenizerFilesMustBeRegularFiles) {
  const std::string dir = testing::make_temp_dir("bpe_fifo");
  const std::string fifo = dir + "/tokenizer.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    Tokenizer::load(fifo);  // an ordinary open would wait for a writer forever
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": not a regular file (a FIFO)");
  }
  std::remove(fifo.c_str());
}

TEST(Bpe, AddedTokensLeftmostLongestRawBeforeNormalized) {
  json j = synthetic({}, json::array());
  j["added_tokens"] = json::parse(R"([
      {"id":256,"content":"<a>","normalized":false,"special":true},
      {"id":257,"content":"<a>b","normalized":false,"special":true},
      {"id":258,"content":"b<c","normalized":true,"special":false},
      {"id":259,"content":"<c>","normalized":false,"special":true}])");
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("<a>b", true), (Ids{257}));  // longest at the same start
  EXPECT_EQ(t.encode("<a>x", true), (Ids{256, 'x'}));
  // "b<c>": the raw token <c> is cut first, so the normalized "b<c" cannot match across it.
  EXPECT_EQ(t.encode("b<c>", true), (Ids{'b', 259}));
  EXPECT_EQ(t.encode("b<cx", true), (Ids{258, 'x'}));
  EXPECT_EQ(t.vocab_size(), 260);
}

// Plain quadratic BPE: merge the lowest-ranked adjacent pair (leftmost on ties) until none.
Ids naive_bpe(const std::string& bytes,
              const std::map<std::pair<int32_t, int32_t>, std::pair<int, int32_t>>& merges,
              const Tokenizer& tok) {
  Ids s;
  for (unsigned char b : bytes)
    s.push_back(*tok.token_to_id(bytes_to_byte_level(std::string(1, char(b)))));
  for (;;) {
    int best = -1;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      auto it = merges.find({s[i], s[i + 1]});
      if (it != merges.end() && (best < 0 || it->second.first < best)) {
        best = it->second.first;
        at = i;
      }
    }
    if (best < 0) return s;
    s[at] = merges.at({s[at], s[at + 1]}).second;
    s.erase(s.begin() + at + 1);
  }
}

TEST(Bpe, HeapMergeEqualsQuadraticMergeOnTheRealMerges) {
  const Tokenizer& tok = testing::v41_tokenizer();
  const json j = json::parse(testing::read_file(testing::tokenizer_json_path()));
  std::map<std::pair<int32_t, int32_t>, std::pair<int, int32_t>> merges;
  int rank = 0;
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    const auto sp = s.find(' ');
    const auto a = *tok.token_to_id(s.substr(0, sp)), b = *tok.token_to_id(s.substr(sp + 1));
    merges.emplace(std::make_pair(a, b),
                   std::make_pair(rank++, *tok.token_to_id(s.substr(0, sp) + s.substr(sp + 1))));
  }
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a",   "e",   "t", "n",  "s",  "r", "in",
                                             "the", "ing", " ", "中", "文", "é", "\xF0\x9F\x98",
                                             "0",   "-",   "\n"};
  for (int w = 0; w < 3000; ++w) {
    std::string word;
    const int len = 1 + static_cast<int>(rng() % (w % 10 == 0 ? 120 : 14));
    for (int k = 0; k < len; ++k) word += alphabet[rng() % alphabet.size()];
    Ids got;
    tok.model().encode_word(word, &got);
    ASSERT_EQ(got, naive_bpe(word, merges, tok)) << ::testing::PrintToString(word);
  }
}

}  // namespace
}  // namespace cedar::text
