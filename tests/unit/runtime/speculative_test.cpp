// Speculative decoding in the Generator (runtime/speculative.h) on a generated tiny model (its
// DSpark stages are random, so real drafts are mostly rejected): the tokens, text and session
// state equal plain decoding's -- greedy and sampled (temperature, top-p, penalties, a seed) --
// with the DSpark drafter and with an oracle proposer that drafts the true continuation with
// planted errors, so every acceptance length occurs and passes end inside stop strings and the
// token limit; the counters say how many drafts each pass kept. The payoff gate (off where the
// counters are checked) pauses a drafter that does not pay.
#include "runtime/speculative.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/generator.h"

namespace cedar::runtime {
namespace {

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

struct Rig {
  Rig() {
    char tmpl[] = "/tmp/cedar-spec-test-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    root = tmpl;
    const std::string dir = root + "/tiny";
    if (std::system(
            (cedar_bin() + " make-model --preset tiny --seed 2 --out " + dir + " > /dev/null 2>&1")
                .c_str()) != 0)
      throw std::runtime_error("cedar make-model failed");
    EngineOptions o;
    o.model_dir = dir;
    o.threads = 2;
    engine = Engine::load(o);
  }
  ~Rig() {
    engine.reset();
    std::filesystem::remove_all(root);
  }
  std::string root;
  std::unique_ptr<Engine> engine;
};

Rig& rig() {
  static Rig r;
  return r;
}
Engine& engine() { return *rig().engine; }

std::vector<int32_t> prompt_ids(int n, int32_t salt) {
  std::vector<int32_t> v = {0};
  for (int i = 1; i < n; ++i) v.push_back(int32_t((i * 7919 + salt * 104729) % 120000 + 100));
  return v;
}

GenerationOptions greedy(int n) {
  GenerationOptions o;
  o.sampling.temperature = 0;
  o.max_tokens = n;
  o.parse_output = false;
  o.speculative.payoff_gate = false;  // counts that do not depend on this machine's timings
  return o;
}

GenerationOptions sampled(int n) {
  GenerationOptions o = greedy(n);
  o.sampling.temperature = 0.8;
  o.sampling.top_p = 0.9;
  o.sampling.seed = 11;
  o.sampling.frequency_penalty = 0.3;
  return o;
}

// Runs one generation plainly and one speculatively on fresh generators; both must agree on
// everything the caller sees and on the session they leave.
GenerationResult expect_same(const std::vector<int32_t>& prompt, GenerationOptions o) {
  Generator plain(engine()), spec(engine());
  const GenerationResult a = plain.generate(prompt, o);
  o.speculative.enabled = true;
  const GenerationResult b = spec.generate(prompt, o);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.finish, b.finish);
  EXPECT_EQ(plain.tokens(), spec.tokens());
  EXPECT_EQ(plain.state().n_tokens, spec.state().n_tokens);
  // the sessions go on alike: a second turn on each
  std::vector<int32_t> turn2 = plain.tokens();
  turn2.push_back(1000);
  GenerationOptions o2 = o;
  o2.max_tokens = 4;
  o2.speculative.enabled = false;
  EXPECT_EQ(plain.generate(turn2, o2).tokens, spec.generate(turn2, o2).tokens);
  return b;
}

TEST(Speculative, DSparkDraftsGivePlainTokensGreedyAndSampled) {
  for (int32_t salt : {1, 2, 3}) {
    SCOPED_TRACE("prompt " + std::to_string(salt));
    const std::vector<int32_t> p = prompt_ids(20 + 60 * salt, salt);
    const GenerationResult g = expect_same(p, greedy(20));
    EXPECT_GT(g.speculative.passes, 0);
    EXPECT_GE(g.speculative.mean_accepted_length(), 1.0);
    expect_same(p, sampled(20));
  }
}

// Inside continuous batching: three generations at once on a batching engine, each with its
// verify passes joining the batched passes, give what plain decoding gives alone.
TEST(Speculative, BatchedGenerationsEqualPlainAlone) {
  EngineOptions eo;
  eo.model_dir = rig().root + "/tiny";
  eo.threads = 2;
  auto batched = Engine::load(eo);
  batched->enable_batching();
  std::vector<std::vector<int32_t>> want, got(3);
  for (int i = 0; i < 3; ++i)
    want.push_back(Generator(engine()).generate(prompt_ids(30 + 40 * i, i), sampled(16)).tokens);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      GenerationOptions o = sampled(16);
      o.speculative.enabled = true;
      got[size_t(i)] = Generator(*batched).generate(prompt_ids(30 + 40 * i, i), o).tokens;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, want);
}

TEST(Speculative, RefusesMoreDraftsThanAWindowHolds) {
  GenerationOptions o = greedy(4);
  o.speculative.enabled = true;
  o.speculative.spec_tokens = 200;  // more drafts than a window holds
  Generator g(engine());
  EXPECT_THROW(g.generate(prompt_ids(5, 1), o), std::runtime_error);
}

// Drafts the true continuation (the plain run's tokens) with a wrong token at draft position
// (pass % 6) (6: none wrong).
struct Oracle {
  std::vector<int32_t> truth;
  size_t prompt = 0;
  int pass = 0;
  int64_t expect_kept = 0;
  std::vector<int32_t> operator()(const SequenceState& st, int32_t anchor, int max) {
    const size_t at = size_t(st.n_tokens) - prompt;  // the anchor is truth[at]
    EXPECT_EQ(anchor, truth.at(at));
    std::vector<int32_t> d;
    for (int k = 0; k < max && at + 1 + size_t(k) < truth.size(); ++k)
      d.push_back(truth[at + 1 + size_t(k)]);
    const int wrong = pass++ % 6;
    if (wrong < int(d.size())) d[size_t(wrong)] = (d[size_t(wrong)] + 1) % 1000;
    return d;
  }
};

TEST(Speculative, OracleDraftsAreKeptUpToTheirFirstError) {
  const std::vector<int32_t> p = prompt_ids(150, 7);  // past the 128-slot rings
  for (const GenerationOptions& base : {greedy(60), sampled(60)}) {
    Generator plain(engine());
    auto oracle = std::make_shared<Oracle>();
    oracle->truth = plain.generate(p, base).tokens;
    oracle->prompt = p.size();
    GenerationOptions o = base;
    o.speculative.spec_tokens = 5;
    o.speculative.proposer = [oracle](const SequenceState& st, int32_t a, int max) {
      return (*oracle)(st, a, max);
    };
    const GenerationResult r = expect_same(p, o);
    const SpecStats& k = r.speculative;
    EXPECT_EQ(k.emitted, int64_t(r.tokens.size()) - 1 - r.decode_steps);
    EXPECT_GT(k.accepted, k.passes);  // most passes keep several drafts
    ASSERT_EQ(k.accepted_at.size(), 5u);
    EXPECT_GT(k.accepted_at[4], 0);  // all five kept on some passes
    EXPECT_GT(k.mean_accepted_length(), 2.0);
  }
}

TEST(Speculative, PassesEndInsideStopStringsAndTheTokenLimit) {
  const std::vector<int32_t> p = prompt_ids(40, 9);
  Generator plain(engine());
  const GenerationResult full = plain.generate(p, greedy(40));
  ASSERT_GT(full.text.size(), 12u);
  auto oracle = std::make_shared<Oracle>();
  oracle->truth = full.tokens;
  oracle->prompt = p.size();
  oracle->pass = 5;  // start with error-free passes
  for (int max_tokens : {7, 13, 40}) {
    GenerationOptions o = greedy(max_tokens);
    o.speculative.proposer = [oracle](const SequenceState& st, int32_t a, int m) {
      return (*oracle)(st, a, m);
    };
    o.stop = {full.text.substr(full.text.size() / 2, 3)};
    expect_same(p, o);
  }
}

// A drafter whose passes keep nothing is paused (plain steps) and probed again; a confidence
// bar verifies fewer drafts. Neither changes a token.
TEST(Speculative, BackOffAndConfidenceBarKeepTheTokens) {
  const std::vector<int32_t> p = prompt_ids(60, 5);
  Generator plain(engine());
  auto oracle = std::make_shared<Oracle>();
  oracle->truth = plain.generate(p, greedy(50)).tokens;
  oracle->prompt = p.size();
  GenerationOptions o = greedy(50);
  o.speculative.proposer = [oracle](const SequenceState& st, int32_t a, int max) {
    oracle->pass = 0;  // always wrong at the first draft
    return (*oracle)(st, a, max);
  };
  const GenerationResult r = expect_same(p, o);
  EXPECT_EQ(r.speculative.accepted, 0);
  EXPECT_GT(r.speculative.paused_steps, 0);
  EXPECT_LT(r.speculative.passes, 20);  // 4 passes, then 8 plain steps, 4 passes, 16 ...
  GenerationOptions all = greedy(30), bar = greedy(30);
  bar.speculative.min_confidence = 0.9;
  const GenerationResult a = expect_same(p, all), b = expect_same(p, bar);
  EXPECT_LT(double(b.speculative.drafted) / double(std::max<int64_t>(1, b.speculative.passes)),
            double(a.speculative.drafted) / double(std::max<int64_t>(1, a.speculative.passes)));
}

// The payoff gate: passes emitting fewer tokens per second than plain steps pause speculation.
TEST(SpecPayoff, JudgesTokensPerSecondOfPassesAgainstPlainSteps) {
  SpecPayoff g;
  EXPECT_TRUE(g.pays());                         // nothing measured: speculate
  for (int i = 0; i < 4; ++i) g.pass(0.010, 3);  // 300 tokens/s
  EXPECT_FALSE(g.judged());                      // no plain step timed yet
  EXPECT_TRUE(g.pays());
  g.plain_step(0.004);  // 250 tokens/s
  EXPECT_TRUE(g.judged());
  EXPECT_TRUE(g.pays());
  EXPECT_DOUBLE_EQ(g.pass_tokens_per_s(), 300.0);
  EXPECT_DOUBLE_EQ(g.plain_tokens_per_s(), 250.0);
  for (int i = 0; i < 8; ++i) g.pass(0.010, 1);  // the drafter stops agreeing: ~100 tokens/s
  EXPECT_FALSE(g.pays());
  for (int i = 0; i < 8; ++i) g.plain_step(0.020);  // plain steps get slower (a busy machine)
  EXPECT_TRUE(g.pays());
  g.pass(0.0, 6);  // an unmeasurable sample is ignored
  g.plain_step(-1.0);
  EXPECT_TRUE(g.pays());
  EXPECT_EQ(g.pause_steps(8, 256), 8);  // paying: the shortest pause
}

// A pass that does not pay pauses for ten times the plain steps it loses, within the bounds.
TEST(SpecPayoff, PausesInProportionToWhatAPassLoses) {
  SpecPayoff g;
  for (int i = 0; i < 4; ++i) g.pass(0.008, 3);  // a pass: 8 plain steps' time for 3 tokens
  g.plain_step(0.001);
  ASSERT_FALSE(g.pays());
  EXPECT_EQ(g.pause_steps(8, 256), 50);  // loses 5 steps a pass
  EXPECT_EQ(g.pause_steps(8, 40), 40);
  for (int i = 0; i < 40; ++i) g.pass(0.1, 1);  // loses ~99 steps a pass
  EXPECT_EQ(g.pause_steps(8, 256), 256);
}

// A pass slower than as many plain steps as it could ever emit tokens is judged at once: no
// acceptance would make it pay, so the gate need not wait for kMinPasses passes to say so.
TEST(SpecPayoff, APassSlowerThanItsMostTokensIsJudgedAtOnce) {
  SpecPayoff g;
  g.set_most(6);             // five drafts and the bonus token
  g.pass(0.008, 3);          // 8 plain steps' time
  EXPECT_FALSE(g.judged());  // no plain step timed yet
  g.plain_step(0.001);
  EXPECT_TRUE(g.hopeless());
  EXPECT_TRUE(g.judged());
  EXPECT_FALSE(g.pays());
  EXPECT_EQ(g.pause_steps(8, 256), 256);  // probes only watch for the machine changing
  SpecPayoff h;
  h.set_most(6);
  h.pass(0.005, 1);  // 5 plain steps' time: pays if it keeps enough drafts, so not judged yet
  h.plain_step(0.001);
  EXPECT_FALSE(h.hopeless());
  EXPECT_FALSE(h.judged());
  EXPECT_TRUE(h.pays());
  SpecPayoff unknown;  // no set_most: judged by the measured tokens only
  for (int i = 0; i < 3; ++i) unknown.pass(0.1, 1);
  unknown.plain_step(0.001);
  EXPECT_FALSE(unknown.judged());
}

// The engine keeps what the drafter's last generation measured: the next one, gate on, starts
// paused when passes did not pay (no passes for its first steps), and runs passes when they did.
TEST(Speculative, GenerationsStartFromTheEnginesMeasuredPayoff) {
  const SpecPayoff before = engine().spec_payoff();
  const std::vector<int32_t> p = prompt_ids(40, 7);
  GenerationOptions o = greedy(30);
  o.speculative.enabled = true;
  o.speculative.payoff_gate = true;
  SpecPayoff loses;
  for (int i = 0; i < 4; ++i) loses.pass(0.008, 3);
  loses.plain_step(0.001);
  engine().set_spec_payoff(loses);
  Generator g(engine());
  const GenerationResult a = g.generate(p, o);
  EXPECT_EQ(a.speculative.passes, 0);
  // 30 tokens: 29 steps, of which the last cannot draft (one token left): 28 paused
  EXPECT_EQ(a.speculative.paused_steps, 28);
  SpecPayoff pays;
  for (int i = 0; i < 4; ++i) pays.pass(0.002, 4);
  pays.plain_step(0.001);
  engine().set_spec_payoff(pays);
  Generator h(engine());
  EXPECT_GT(h.generate(p, o).speculative.passes, 0);
  EXPECT_TRUE(engine().spec_payoff().judged());  // left by the generation that ran passes
  engine().set_spec_payoff(before);
}

// A drafter far slower than a plain step (its proposals cost 300 ms, more than the six plain
// steps that a pass of five drafts would have to beat) keeps drafts but cannot pay: the gate
// stops it after its first pass and the plain steps timed after it, and the tokens stay plain
// decoding's. The gate reads a test clock on which every reading advances 0.5 ms and a proposal
// 300 ms: with the steady clock, a plain step slowed past 50 ms by a loaded machine (the suite
// runs two tests at once on two cores) made a second pass (CI, stop 43).
TEST(Speculative, PayoffGatePausesADrafterThatDoesNotPay) {
  const std::vector<int32_t> p = prompt_ids(60, 3);
  Generator plain(engine());
  auto oracle = std::make_shared<Oracle>();
  oracle->truth = plain.generate(p, greedy(60)).tokens;
  oracle->prompt = p.size();
  oracle->pass = 5;  // error-free passes first
  auto t = std::make_shared<double>(0.0);
  GenerationOptions o = greedy(60);
  o.speculative.payoff_gate = true;
  o.speculative.clock = [t] { return *t += 0.0005; };
  o.speculative.proposer = [oracle, t](const SequenceState& st, int32_t a, int max) {
    *t += 0.3;
    return (*oracle)(st, a, max);
  };
  const GenerationResult r = expect_same(p, o);
  EXPECT_GT(r.speculative.accepted, 0);
  EXPECT_EQ(r.speculative.passes, 1);
  EXPECT_GT(r.speculative.paused_steps, 8);  // more than the probe that times plain steps
  EXPECT_NEAR(r.speculative.plain_tokens_per_s, 2000.0, 1e-6);  // the test clock's
  EXPECT_GT(r.speculative.plain_tokens_per_s, r.speculative.pass_tokens_per_s);
}

}  // namespace
}  // namespace cedar::runtime
