// Generator on a generated tiny model (cedar make-model --preset tiny --seed 1): greedy
// determinism across runs and thread counts, a cross-check of greedy tokens against the argmax of
// `cedar logits` over the growing sequence, max tokens, context size, stop strings (never
// emitted, hold-back), cancellation, session reuse, the prefix-cache seam, chat parsing and usage.
#include "runtime/generator.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "text/chat_request.h"

namespace cedar::runtime {
namespace {

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

int run(const std::string& cmd) { return std::system((cmd + " > /dev/null 2>&1").c_str()); }

// One tiny model for the whole suite.
class TinyModel : public ::testing::Environment {
 public:
  static std::string dir;
  void SetUp() override {
    char tmpl[] = "/tmp/cedar-gen-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir = root_ + "/tiny";
    ASSERT_EQ(run(cedar_bin() + " make-model --preset tiny --seed 1 --out " + dir), 0)
        << "cedar make-model failed (CEDAR_BIN=" << cedar_bin() << ")";
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

 private:
  std::string root_;
};
std::string TinyModel::dir;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new TinyModel);

// Engines are shared by the tests (loading the tokenizer and Engram map takes a while); a
// Generator never changes its Engine.
Engine* load(int threads) {
  static std::unique_ptr<Engine> engines[3];
  auto& e = engines[threads];
  if (!e) {
    EngineOptions o;
    o.model_dir = TinyModel::dir;
    o.threads = threads;
    e = Engine::load(o);
  }
  return e.get();
}

GenerationOptions greedy(int64_t n) {
  GenerationOptions o;
  o.sampling.temperature = 0.0;
  o.max_tokens = n;
  return o;
}

// Reads a little-endian float32 .npy [rows, cols] written by `cedar logits`.
std::vector<float> read_npy(const std::string& path, int64_t* rows, int64_t* cols) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  char magic[8];
  f.read(magic, 8);
  uint16_t hlen = 0;
  f.read(reinterpret_cast<char*>(&hlen), 2);
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  const size_t lp = header.find("'shape': (");
  if (lp == std::string::npos || header.find("<f4") == std::string::npos)
    throw std::runtime_error(path + ": unexpected npy header " + header);
  *rows = std::stoll(header.substr(lp + 10));
  *cols = std::stoll(header.substr(header.find(',', lp) + 1));
  std::vector<float> v(size_t(*rows * *cols));
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  if (!f) throw std::runtime_error(path + ": short read");
  return v;
}

std::vector<int32_t> without_stop(const Engine& e, std::vector<int32_t> t) {
  if (!t.empty() && e.is_stop_token(t.back())) t.pop_back();
  return t;
}

TEST(Generator, GreedyIsDeterministicAcrossRunsAndThreadCounts) {
  Engine* e1 = load(1);
  Engine* e2 = load(2);
  ASSERT_EQ(e1->threads(), 1);
  ASSERT_EQ(e2->threads(), 2);
  const Prompt p = e1->encode_raw("Hello, world. The quick brown fox");
  for (bool exact : {false, true}) {
    GenerationOptions o = greedy(24);
    o.exact_prefill = exact;
    Generator g1(*e1), g1b(*e1), g2(*e2);
    const auto a = g1.generate(p.ids, o);
    const auto b = g1b.generate(p.ids, o);
    const auto c = g2.generate(p.ids, o);
    ASSERT_EQ(a.tokens.size(), 24u);
    EXPECT_EQ(a.finish, FinishReason::kLength);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.tokens, c.tokens);
    EXPECT_EQ(a.text, c.text);
  }
}

TEST(Generator, SeededSamplingIsDeterministicAcrossThreadCounts) {
  auto e1 = load(1);
  auto e2 = load(2);
  const Prompt p = e1->encode_raw("Once upon a time");
  GenerationOptions o;
  o.max_tokens = 16;
  o.sampling = {.temperature = 1.0, .top_k = 50, .top_p = 0.9, .min_p = 0.0, .seed = 77};
  Generator g1(*e1), g2(*e2);
  const auto a = g1.generate(p.ids, o);
  const auto b = g2.generate(p.ids, o);
  EXPECT_EQ(a.tokens, b.tokens);
  o.sampling.seed = 78;
  Generator g3(*e1);
  EXPECT_NE(g3.generate(p.ids, o).tokens, a.tokens);
}

// The real cross-check: every greedy token is the argmax of the logits `cedar logits` (exact
// one-shot prefill of the grown sequence, a separate process) computes at its position.
std::string long_text() {
  std::string t;
  for (int i = 0; i < 12; ++i)
    t += "Paragraph " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog. ";
  return t;
}

// The real cross-check: every greedy token is the argmax of the logits `cedar logits` (exact
// one-shot prefill of the grown sequence, a separate process) computes at its position.
TEST(Generator, GreedyTokensEqualArgmaxOfCedarLogits) {
  auto e = load(2);
  const Prompt p = e->encode_raw(long_text());
  ASSERT_GT(p.ids.size(), 140u);  // longer than the window
  GenerationOptions o = greedy(12);
  o.exact_prefill = true;
  o.prefill_chunk = 64;
  const auto r = Generator(*e).generate(p.ids, o);
  ASSERT_EQ(r.tokens.size(), 12u);
  std::vector<int32_t> seq = p.ids;
  seq.insert(seq.end(), r.tokens.begin(), r.tokens.end() - 1);
  std::string ids;
  for (int32_t id : seq) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const std::string npy = TinyModel::dir + "/../greedy_logits.npy";
  ASSERT_EQ(run(cedar_bin() + " logits --model " + TinyModel::dir + " --ids " + ids + " --out " +
                npy + " -t 1"),
            0);
  int64_t rows = 0, cols = 0;
  const auto lg = read_npy(npy, &rows, &cols);
  ASSERT_EQ(rows, int64_t(seq.size()));
  ASSERT_EQ(cols, e->config().vocab_size);
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const int64_t row = int64_t(p.ids.size()) - 1 + int64_t(i);
    const std::span<const float> lrow(lg.data() + row * cols, size_t(cols));
    EXPECT_EQ(r.tokens[i], argmax(lrow)) << "token " << i;
  }
}

TEST(Generator, ShortPromptsGiveTheSameTokensUnderCedAndExact) {
  // a prompt within the window: CED runs the decoder on every row, so it is exact
  auto e = load(2);
  const Prompt p = e->encode_raw("The capital of France is");
  GenerationOptions o = greedy(12);
  const auto ced = Generator(*e).generate(p.ids, o);
  o.exact_prefill = true;
  EXPECT_EQ(Generator(*e).generate(p.ids, o).tokens, ced.tokens);
}

TEST(Generator, ChunkedPrefillGivesTheSameTokens) {
  auto e = load(2);
  const Prompt p = e->encode_raw(long_text());
  ASSERT_GT(p.ids.size(), 140u);  // CED: open chunks, then a completing one replaying 128 rows
  for (bool exact : {false, true}) {
    GenerationOptions o = greedy(10);
    o.exact_prefill = exact;
    const auto whole = Generator(*e).generate(p.ids, o);
    for (int64_t chunk : {7, 50, 128}) {
      o.prefill_chunk = chunk;
      const auto chunked = Generator(*e).generate(p.ids, o);
      EXPECT_EQ(whole.tokens, chunked.tokens) << "exact=" << exact << " chunk=" << chunk;
      EXPECT_EQ(chunked.prefill_computed, int64_t(p.ids.size()));
    }
  }
}

TEST(Generator, MaxTokensAndContextSize) {
  auto e = load(2);
  const Prompt p = e->encode_raw("Count:");
  const int64_t T = int64_t(p.ids.size());
  auto r = Generator(*e).generate(p.ids, greedy(5));
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.usage.prompt_tokens, T);
  EXPECT_EQ(r.usage.completion_tokens, 5);
  EXPECT_EQ(r.decode_steps, 4);  // the last sampled token is not run
  GenerationOptions o = greedy(100);
  o.ctx_size = T + 3;
  r = Generator(*e).generate(p.ids, o);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  o.ctx_size = T;
  EXPECT_THROW(Generator(*e).generate(p.ids, o), std::runtime_error);
}

// A caller's stop sequence (the output pipeline's) sets the cancel flag while its text is
// streamed: the generation ends on the token whose text completed it, with the tokens an
// uninterrupted run samples up to there.
TEST(Generator, ACancelSetOnAPieceEndsItOnThatToken) {
  auto e = load(2);
  const Prompt p = e->encode_raw("Tell me a story about");
  const auto base = Generator(*e).generate(p.ids, greedy(32));
  EXPECT_EQ(base.text, e->tokenizer().decode(without_stop(*e, base.tokens)));
  ASSERT_GT(base.text.size(), 12u);
  // a stop string starting at a character boundary around the middle of the text
  size_t at = base.text.size() / 2;
  while (at > 0 && (uint8_t(base.text[at]) & 0xC0) == 0x80) --at;
  size_t len = 1;
  while (at + len < base.text.size() && len < 3) ++len;
  while (at + len < base.text.size() && (uint8_t(base.text[at + len]) & 0xC0) == 0x80) ++len;
  const std::string stop = base.text.substr(at, len);
  std::atomic<bool> halt{false};
  GenerationOptions o = greedy(32);
  o.cancel = &halt;
  std::string streamed;
  GenerationCallbacks cb;
  cb.on_text = [&](const std::string& piece) {
    streamed += piece;
    if (streamed.find(stop) != std::string::npos) halt = true;
  };
  const auto r = Generator(*e).generate(p.ids, o, cb);
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_EQ(streamed, r.text);
  ASSERT_FALSE(r.tokens.empty());
  ASSERT_LE(r.tokens.size(), base.tokens.size());
  EXPECT_EQ(std::vector<int32_t>(base.tokens.begin(), base.tokens.begin() + long(r.tokens.size())),
            r.tokens);
  EXPECT_NE(r.text.find(stop), std::string::npos);
  const std::vector<int32_t> before(r.tokens.begin(), r.tokens.end() - 1);
  EXPECT_EQ(e->tokenizer().decode(before).find(stop), std::string::npos);
}

TEST(StopMatcher, HoldsBackPossiblePrefixes) {
  StopMatcher m({"END", "xyz"});
  EXPECT_EQ(m.push("abc E"), "abc ");  // "E" may start END
  EXPECT_EQ(m.push("N"), "");          // "EN" still may
  EXPECT_EQ(m.push("x"), "EN");        // not END; "x" may start xyz
  EXPECT_FALSE(m.matched());
  EXPECT_EQ(m.push("yz tail"), "");  // match: the text before it was already returned
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.matched_string(), "xyz");
  EXPECT_EQ(m.push("more"), "");
  // the earliest match wins, and finish() returns what is held at the end
  StopMatcher a({"bc", "ab"});
  EXPECT_EQ(a.push("xabc"), "x");
  EXPECT_EQ(a.matched_string(), "ab");
  StopMatcher b({"</s>"});
  EXPECT_EQ(b.push("héllo </"), "héllo ");
  EXPECT_EQ(b.finish(), "</");
  EXPECT_FALSE(b.matched());
  EXPECT_THROW(StopMatcher({""}), std::runtime_error);
}

TEST(Generator, CancellationBetweenSteps) {
  auto e = load(2);
  const Prompt p = e->encode_raw("Go");
  std::atomic<bool> cancel{false};
  GenerationOptions o = greedy(50);
  o.cancel = &cancel;
  GenerationCallbacks cb;
  int n = 0;
  cb.on_token = [&](int32_t) {
    if (++n == 3) cancel.store(true);
  };
  const auto r = Generator(*e).generate(p.ids, o, cb);
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_EQ(r.tokens.size(), 3u);
}

TEST(Generator, CancellationDuringPrefillLeavesAUsableSession) {
  auto e = load(2);
  const Prompt p = e->encode_raw(long_text());
  std::atomic<bool> cancel{true};
  GenerationOptions o = greedy(4);
  o.cancel = &cancel;
  o.prefill_chunk = 32;
  Generator g(*e);
  const auto r = g.generate(p.ids, o);
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.prefill_computed, 32);  // stopped after the first chunk
  EXPECT_TRUE(g.state().prompt_open());
  // the same session then serves an exact request (cannot continue the open CED prompt) and a
  // CED one (continues it): both equal cold runs
  cancel.store(false);
  o.exact_prefill = true;
  const auto exact = g.generate(p.ids, o);
  EXPECT_EQ(exact.usage.cached_tokens, 0);
  EXPECT_EQ(exact.tokens, Generator(*e).generate(p.ids, o).tokens);
  o.exact_prefill = false;
  cancel.store(true);
  Generator g2(*e);
  g2.generate(p.ids, o);
  cancel.store(false);
  const auto ced = g2.generate(p.ids, o);
  EXPECT_EQ(ced.usage.cached_tokens, 32);
  EXPECT_EQ(ced.tokens, Generator(*e).generate(p.ids, o).tokens);
}

TEST(Generator, SessionReusesItsStateWhenThePromptExtendsIt) {
  auto e = load(2);
  const Prompt p = e->encode_raw("First turn of a conversation.");
  GenerationOptions o = greedy(6);
  o.exact_prefill = true;
  Generator g(*e);
  const auto r1 = g.generate(p.ids, o);
  ASSERT_EQ(g.tokens().size(), p.ids.size() + r1.tokens.size() - 1);
  std::vector<int32_t> p2 = p.ids;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end());
  const auto more = e->tokenizer().encode(" And the second turn.");
  p2.insert(p2.end(), more.begin(), more.end());
  const auto r2 = g.generate(p2, o);
  EXPECT_EQ(r2.usage.cached_tokens, int64_t(p.ids.size() + r1.tokens.size() - 1));
  EXPECT_EQ(r2.prefill_computed, int64_t(p2.size()) - r2.usage.cached_tokens);
  const auto cold = Generator(*e).generate(p2, o);
  EXPECT_EQ(cold.usage.cached_tokens, 0);
  EXPECT_EQ(r2.tokens, cold.tokens);
  // a prompt that does not extend the state starts over
  const auto r3 = g.generate(p.ids, o);
  EXPECT_EQ(r3.usage.cached_tokens, 0);
  EXPECT_EQ(r3.tokens, r1.tokens);
}

// A whole-state in-memory hook: exercises the seam the prefix cache plugs into.
class RecordingCache : public PrefixCacheHook {
 public:
  struct Offer {
    std::vector<int32_t> ids;
    Point where;
    int64_t n_tokens;
  };
  std::vector<Offer> offers;
  std::vector<std::pair<std::vector<int32_t>, SequenceState>> units;
  int64_t every = 0;

  int64_t restore(Engine&, std::span<const int32_t> ids, int64_t max_len,
                  SequenceState* state) override {
    int64_t best = 0;
    for (const auto& [u, st] : units)
      if (int64_t(u.size()) <= max_len && int64_t(u.size()) > best &&
          std::equal(u.begin(), u.end(), ids.begin())) {
        best = int64_t(u.size());
        *state = st;
      }
    return best;
  }
  int64_t interval() const override { return every; }
  void offer(std::span<const int32_t> ids, const SequenceState& state, Point where) override {
    offers.push_back({std::vector<int32_t>(ids.begin(), ids.end()), where, state.n_tokens});
    units.emplace_back(std::vector<int32_t>(ids.begin(), ids.end()), state);
  }
};

TEST(Generator, PrefixCacheHookSeam) {
  auto e = load(2);
  const Prompt a = e->encode_raw(
      "A shared system prompt that many requests start with, long enough for a few intervals "
      "of sixteen tokens each, and then some more words to be sure.");
  std::vector<int32_t> b = a.ids;
  const auto q = e->tokenizer().encode(" Question two?");
  b.insert(b.end(), q.begin(), q.end());
  GenerationOptions o = greedy(5);
  o.exact_prefill = true;  // whole-state copies: bit-identical continuations
  RecordingCache cache;
  cache.every = 16;
  Generator g1(*e, &cache);
  const auto r1 = g1.generate(a.ids, o);
  // interval offers at 16, 32, ... inside the prompt, then prompt end, then answer end
  const int64_t T = int64_t(a.ids.size());
  size_t k = 0;
  for (int64_t at = 16; at < T; at += 16, ++k) {
    ASSERT_LT(k, cache.offers.size());
    EXPECT_EQ(cache.offers[k].where, PrefixCacheHook::Point::kInterval);
    EXPECT_EQ(int64_t(cache.offers[k].ids.size()), at);
    EXPECT_EQ(cache.offers[k].n_tokens, at);
  }
  ASSERT_EQ(cache.offers.size(), k + 2);
  EXPECT_EQ(cache.offers[k].where, PrefixCacheHook::Point::kPromptEnd);
  EXPECT_EQ(cache.offers[k].ids, a.ids);
  EXPECT_EQ(cache.offers[k + 1].where, PrefixCacheHook::Point::kAnswerEnd);
  EXPECT_EQ(int64_t(cache.offers[k + 1].ids.size()), T + int64_t(r1.tokens.size()) - 1);
  EXPECT_EQ(cache.offers[k + 1].n_tokens, int64_t(cache.offers[k + 1].ids.size()));

  // a new request sharing the prefix restores it from the hook
  Generator g2(*e, &cache);
  const auto r2 = g2.generate(b, o);
  EXPECT_EQ(r2.usage.cached_tokens, T);
  EXPECT_EQ(r2.prefill_computed, int64_t(b.size()) - T);
  const auto cold = Generator(*e).generate(b, o);
  EXPECT_EQ(r2.tokens, cold.tokens);
  // the same prompt again: restored up to T-1 at most (the last token always runs)
  Generator g3(*e, &cache);
  const auto r3 = g3.generate(a.ids, o);
  EXPECT_EQ(r3.usage.cached_tokens, (T - 1) / 16 * 16);
  EXPECT_EQ(r3.tokens, r1.tokens);
  // use_prefix_cache = false bypasses it
  o.use_prefix_cache = false;
  EXPECT_EQ(Generator(*e, &cache).generate(b, o).usage.cached_tokens, 0);
}

// A chat prompt's completion streams as text (the output pipeline parses it): the pieces are
// the decoded tokens, and a reasoning prompt's text parses into reasoning then content.
TEST(Generator, ChatPromptStreamsItsText) {
  auto e = load(2);
  text::ojson body = text::ojson::parse(
      R"({"messages":[{"role":"user","content":"Hello"}],"reasoning_effort":75})");
  const Prompt p = e->render_request(body);
  ASSERT_EQ(p.start, text::GenerationStart::kReasoning);
  ASSERT_EQ(p.ids.front(), int32_t(e->config().bos_token_id));
  GenerationOptions o = greedy(20);
  o.start = p.start;
  std::string streamed;
  GenerationCallbacks cb;
  cb.on_text = [&](const std::string& piece) { streamed += piece; };
  const auto r = Generator(*e).generate(p.ids, o, cb);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.text, e->tokenizer().decode(without_stop(*e, r.tokens)));
  text::ParserOptions po;
  po.start = p.start;
  const auto whole = text::OutputParser::parse(r.text, po);
  EXPECT_TRUE(whole.thinking);
  EXPECT_EQ(r.usage.completion_tokens, int64_t(r.tokens.size()));
}

TEST(Generator, StopTokensIncludeEosAndTurnOpeners) {
  auto e = load(1);
  EXPECT_TRUE(e->is_stop_token(1));                                               // EOS
  EXPECT_TRUE(e->is_stop_token(*e->tokenizer().token_to_id("<｜User｜>")));       // 128803
  EXPECT_TRUE(e->is_stop_token(*e->tokenizer().token_to_id("<｜Assistant｜>")));  // 128804
  EXPECT_FALSE(e->is_stop_token(0));
  EXPECT_FALSE(e->is_stop_token(*e->tokenizer().token_to_id("</think>")));
}

// Frequency / presence penalties: the generator's greedy tokens equal a hand-written loop over
// the Transformer that subtracts OpenAI's penalty terms from the raw logits before the argmax.
TEST(Generator, PenaltiesFollowOpenAIsFormula) {
  Engine* e = load(2);
  const Prompt p = e->encode_raw("Repeat after me: la la la la la la");
  const int64_t V = e->config().vocab_size;
  std::vector<std::vector<int32_t>> runs;
  for (const auto& [freq, pres] : {std::pair{0.0, 0.0}, std::pair{1.5, 0.0}, std::pair{0.0, 2.0},
                                   std::pair{-0.5, 1.0}, std::pair{-2.0, -2.0}}) {
    GenerationOptions o = greedy(20);
    o.sampling.frequency_penalty = freq;
    o.sampling.presence_penalty = pres;
    Generator g(*e);
    const auto got = g.generate(p.ids, o);
    SequenceState st = e->model().new_state();
    std::vector<float> lg(static_cast<size_t>(V));
    e->forward(st, p.ids.data(), int(p.ids.size()), 0, ForwardOptions{}, lg.data());
    std::map<int32_t, int> count;
    std::vector<int32_t> want;
    while (want.size() < 20) {
      for (const auto& [id, c] : count)
        lg[size_t(id)] = float(double(lg[size_t(id)]) - freq * c - pres);
      const int32_t id = argmax(std::span<const float>(lg));
      want.push_back(id);
      ++count[id];
      if (e->is_stop_token(id)) break;
      e->forward(st, &id, 1, st.n_tokens, ForwardOptions{}, lg.data());
    }
    EXPECT_EQ(got.tokens, want) << "frequency " << freq << " presence " << pres;
    runs.push_back(got.tokens);
  }
  // the penalties bite: random weights rarely repeat a token under greedy decoding, so the
  // negative penalties (which reward repeats) must change the run
  EXPECT_NE(runs[4], runs[0]);
  GenerationOptions bad = greedy(2);
  bad.sampling.presence_penalty = 2.5;
  Generator g(*e);
  EXPECT_THROW(g.generate(p.ids, bad), std::runtime_error);
}

// Several generators on one engine with batching on: their forward calls share passes, and every
// generation gives the tokens it gives alone.
TEST(Generator, BatchedGenerationsEqualGenerationsAlone) {
  EngineOptions eo;
  eo.model_dir = TinyModel::dir;
  eo.threads = 2;
  auto batched = Engine::load(eo);
  batched->enable_batching();
  Engine* plain = load(2);
  std::vector<Prompt> prompts;
  for (int i = 0; i < 6; ++i)
    prompts.push_back(
        plain->encode_raw("Prompt number " + std::to_string(i) + std::string(size_t(i * 40), 'x')));
  std::vector<std::vector<int32_t>> alone, together(prompts.size());
  for (const auto& p : prompts) {
    GenerationOptions o = greedy(16);
    o.prefill_chunk = 32;
    alone.push_back(Generator(*plain).generate(p.ids, o).tokens);
  }
  std::vector<std::thread> th;
  for (size_t i = 0; i < prompts.size(); ++i)
    th.emplace_back([&, i] {
      GenerationOptions o = greedy(16);
      o.prefill_chunk = 32;
      together[i] = Generator(*batched).generate(prompts[i].ids, o).tokens;
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(alone, together);
  const BatcherStats b = batched->batcher_stats();
  EXPECT_GE(b.calls, 6u * 16u);
  EXPECT_LT(b.passes, b.calls);  // calls shared passes
  EXPECT_GE(b.max_calls, 2u);
}

TEST(Generator, RejectsBadInput) {
  auto e = load(1);
  Generator g(*e);
  EXPECT_THROW(g.generate(std::vector<int32_t>{}, greedy(4)), std::runtime_error);
  EXPECT_THROW(g.generate(std::vector<int32_t>{0, int32_t(e->config().vocab_size)}, greedy(4)),
               std::runtime_error);
  EXPECT_THROW(g.generate(std::vector<int32_t>{0, -3}, greedy(4)), std::runtime_error);
  GenerationOptions o = greedy(4);
  o.sampling.top_p = 0.0;
  EXPECT_THROW(g.generate(std::vector<int32_t>{0, 5}, o), std::runtime_error);
  EngineOptions bad;
  bad.model_dir = TinyModel::dir + "/nope";
  try {
    Engine::load(bad);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& ex) {
    EXPECT_NE(std::string(ex.what()).find("nope"), std::string::npos);
  }
}

}  // namespace
}  // namespace cedar::runtime
