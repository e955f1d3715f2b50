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

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
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
// stop: a stop sequence the caller matches on the streamed text, ending the generation through
// the cancel flag (as the output pipeline does)
GenerationResult expect_same(const std::vector<int32_t>& prompt, GenerationOptions o,
                             const std::string& stop = "") {
  Generator plain(engine()), spec(engine());
  auto run = [&](Generator& g, GenerationOptions go) {
    std::atomic<bool> halt{false};
    std::string seen;
    GenerationCallbacks cb;
    if (!stop.empty()) {
      go.cancel = &halt;
      cb.on_text = [&](const std::string& piece) {
        seen += piece;
        if (seen.find(stop) != std::string::npos) halt = true;
      };
    }
    return g.generate(prompt, go, cb);
  };
  const GenerationResult a = run(plain, o);
  o.speculative.enabled = true;
  const GenerationResult b = run(spec, o);
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
    expect_same(p, o, full.text.substr(full.text.size() / 2, 3));
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

// The payoff gate's means: passes emitting fewer tokens per second than plain steps do not pay;
// seeded plain steps are timed apart from plain ones (plain decoding does not seed).
TEST(SpecPayoff, JudgesTokensPerSecondOfPassesAgainstPlainSteps) {
  SpecPayoff g;
  EXPECT_TRUE(g.pays());       // nothing measured: speculate
  g.pass(0.010, 3);            // 300 tokens/s
  EXPECT_FALSE(g.measured());  // no plain step timed yet
  EXPECT_TRUE(g.pays());
  g.plain_step(0.004, true);  // 250 tokens/s, seeded: the plain time until a plain step is timed
  EXPECT_TRUE(g.measured());
  EXPECT_TRUE(g.pays());
  EXPECT_DOUBLE_EQ(g.seed_extra(), 0.0);
  g.plain_step(0.002, false);  // 500 tokens/s without seeding
  EXPECT_FALSE(g.pays());
  EXPECT_DOUBLE_EQ(g.plain_tokens_per_s(), 500.0);
  EXPECT_DOUBLE_EQ(g.pass_tokens_per_s(), 300.0);
  EXPECT_DOUBLE_EQ(g.seed_extra(), 1.0);                   // seeding doubles a step
  EXPECT_DOUBLE_EQ(g.pass_loss(), 2.0);                    // 5 plain steps' time for 3 tokens
  for (int i = 0; i < 8; ++i) g.plain_step(0.020, false);  // plain steps get slower (busy)
  EXPECT_TRUE(g.pays());
  EXPECT_LT(g.pass_loss(), 0.0);
  g.pass(0.0, 6);  // an unmeasurable sample is ignored
  g.plain_step(-1.0, false);
  EXPECT_TRUE(g.pays());
}

// The budget counts, in plain steps, what passes lose against plain decoding of their tokens
// and what seeding adds, never below zero, and spaces probes so that the loss with the next
// probe's fits 3% of the tokens decoded by then.
TEST(SpecBudget, CountsWhatPassesAndSeedingLoseAndSpacesProbes) {
  SpecPayoff m;
  SpecBudget b;
  m.pass(0.004, 1);  // the first pass, before any plain step is timed
  b.pass(0.004, 1, m);
  EXPECT_EQ(b.lost_steps(), 0.0);
  m.plain_step(0.001, false);
  b.plain_step(false, m);  // now it is known: 4 plain steps' time for 1 token
  EXPECT_DOUBLE_EQ(b.lost_steps(), 3.0);
  EXPECT_EQ(b.tokens(), 2);
  EXPECT_FALSE(b.within());
  m.plain_step(0.00125, true);
  b.plain_step(true, m);  // seeding adds a quarter of a step
  EXPECT_DOUBLE_EQ(b.lost_steps(), 3.25);
  // the next probe loses 3 steps more: (3.25 + 3) / 3% = 208.3 tokens, 3 decoded
  EXPECT_EQ(b.wait_steps(m, 0), 206);
  // with a lead of 32 seeded steps (8 steps more): 475 tokens, the lead's 32 among them
  EXPECT_NEAR(double(b.wait_steps(m, 32)), 440.0, 1.0);
  SpecBudget paying;  // passes that pay repay losses, but gains are not banked
  paying.pass(0.004, 1, m);
  EXPECT_DOUBLE_EQ(paying.lost_steps(), 3.0);
  for (int i = 0; i < 3; ++i) paying.pass(0.002, 6, m);  // 2 steps' time for 6 tokens
  EXPECT_EQ(paying.lost_steps(), 0.0);
  EXPECT_TRUE(paying.within());
  paying.pass(0.004, 1, m);
  EXPECT_DOUBLE_EQ(paying.lost_steps(), 3.0);  // not 3 - 12
}

// The engine keeps what the drafter's last generation measured: the next one, gate on, starts
// paused when passes did not pay (no passes until its own tokens pay for a probe: 5 plain steps
// lost a pass, 167 tokens), and runs passes when they did. The gate reads a test clock (1 ms a
// reading, so a plain step takes the remembered 1 ms): the wait is recomputed every step from
// the means, and a loaded machine's slow plain steps would shorten it.
TEST(Speculative, GenerationsStartFromTheEnginesMeasuredPayoff) {
  const SpecPayoff before = engine().spec_payoff();
  const std::vector<int32_t> p = prompt_ids(40, 7);
  GenerationOptions o = greedy(30);
  o.speculative.enabled = true;
  o.speculative.payoff_gate = true;
  auto t = std::make_shared<double>(0.0);
  o.speculative.clock = [t] { return *t += 0.001; };
  SpecPayoff loses;
  for (int i = 0; i < 4; ++i) loses.pass(0.008, 3);
  loses.plain_step(0.001, false);
  engine().set_spec_payoff(loses);
  Generator g(engine());
  const GenerationResult a = g.generate(p, o);
  EXPECT_EQ(a.speculative.passes, 0);
  // 30 tokens: 29 steps, of which the last cannot draft (one token left): 28 paused
  EXPECT_EQ(a.speculative.paused_steps, 28);
  SpecPayoff pays;
  for (int i = 0; i < 4; ++i) pays.pass(0.002, 4);
  pays.plain_step(0.001, false);
  engine().set_spec_payoff(pays);
  Generator h(engine());
  EXPECT_GT(h.generate(p, o).speculative.passes, 0);
  EXPECT_TRUE(engine().spec_payoff().measured());  // left by the generation that ran passes
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

// The gate's budget on a test clock: every reading advances it 1 ms, so a plain step takes 1 ms,
// and a proposal takes 3 ms more, so a verify pass takes 4 plain steps' time and pays only when
// it emits more than 4 tokens. The proposer drafts the plain run's continuation where right(at)
// says so (at: the anchor's index in the completion; a pass of 5 right drafts emits 6 tokens)
// and a wrong first draft elsewhere (1 token); it records where passes ran.
struct ClockedDrafter {
  std::vector<int32_t> prompt, truth;
  std::function<bool(size_t)> right;
  std::vector<size_t> passes_at;

  GenerationResult run(int n) {
    prompt = prompt_ids(60, 4);
    truth = Generator(engine()).generate(prompt, greedy(n)).tokens;
    EXPECT_EQ(int(truth.size()), n);  // the cost checks below assume the whole length
    auto t = std::make_shared<double>(0.0);
    GenerationOptions o = greedy(n);
    o.speculative.enabled = true;
    o.speculative.payoff_gate = true;
    o.speculative.clock = [t] { return *t += 0.001; };
    o.speculative.proposer = [this, t](const SequenceState& st, int32_t, int max) {
      *t += 0.003;
      const size_t at = size_t(st.n_tokens) - prompt.size();
      passes_at.push_back(at);
      std::vector<int32_t> d(
          truth.begin() + std::ptrdiff_t(std::min(at + 1, truth.size())),
          truth.begin() + std::ptrdiff_t(std::min(at + 1 + size_t(max), truth.size())));
      if (!right(at) && !d.empty()) d[0] = d[0] == 5 ? 6 : 5;
      return d;
    };
    GenerationResult r = Generator(engine()).generate(prompt, o);
    EXPECT_EQ(r.tokens, truth);
    return r;
  }
  // The simulated decode time against plain decoding's (the first token is the prefill's).
  static double cost(const GenerationResult& r) {
    return double(r.decode_steps + 4 * r.speculative.passes) / double(r.tokens.size() - 1);
  }
  size_t passes_from(size_t at) const {
    return size_t(
        std::count_if(passes_at.begin(), passes_at.end(), [at](size_t p) { return p >= at; }));
  }
};

// A drafter that never pays costs at most 3% of plain decoding's time over 256 and 1024 tokens
// (each pass loses 3 steps: a probe about every 100 steps), and is still probed.
TEST(SpeculativeGate, ADrafterThatNeverPaysCostsAtMostThreePercent) {
  for (int n : {256, 1024}) {
    SCOPED_TRACE(std::to_string(n) + " tokens");
    ClockedDrafter c;
    c.right = [](size_t) { return false; };
    const GenerationResult r = c.run(n);
    EXPECT_LE(ClockedDrafter::cost(r), 1.03);
    EXPECT_GE(r.speculative.passes, n / 128);  // probed on: it would see a change
    EXPECT_LE(r.speculative.gate_lost_steps, 0.03 * n);
  }
}

// A drafter that pays speculates on most steps: nearly every token comes from a pass.
TEST(SpeculativeGate, ADrafterThatPaysSpeculatesOnMostSteps) {
  ClockedDrafter c;
  c.right = [](size_t) { return true; };
  const GenerationResult r = c.run(300);
  EXPECT_GE(double(r.speculative.emitted), 0.9 * double(r.tokens.size() - 1));
  EXPECT_LT(ClockedDrafter::cost(r), 0.8);
}

// A drafter that starts to pay is back on at the next probe (within about 100 steps, what the
// budget spaces probes by) and then speculates on most steps; one that stops paying is paused
// within a few passes and then only probed.
TEST(SpeculativeGate, NoticesADrafterThatStartsOrStopsPaying) {
  const size_t turn = 310, n = 700;  // mid-way between two probes (at 300 and 400)
  ClockedDrafter starts;
  starts.right = [turn](size_t at) { return at >= turn; };
  const GenerationResult a = starts.run(int(n));
  const auto first = std::find_if(starts.passes_at.begin(), starts.passes_at.end(),
                                  [turn](size_t p) { return p >= turn; });
  ASSERT_NE(first, starts.passes_at.end());
  EXPECT_LE(*first, turn + 110);
  EXPECT_GE(double(starts.passes_from(*first)), 0.8 * double(n - *first) / 6.0);
  EXPECT_LE(ClockedDrafter::cost(a), 1.0);

  ClockedDrafter stops;
  stops.right = [turn](size_t at) { return at < turn; };
  const GenerationResult b = stops.run(int(n));
  EXPECT_GE(stops.passes_from(0) - stops.passes_from(turn), size_t(turn / 6 - 10));
  EXPECT_LE(stops.passes_from(turn) - stops.passes_from(turn + 30), 5u);  // paused within 5
  EXPECT_LE(stops.passes_from(turn), 12u);                                // of 400 steps
  EXPECT_LT(ClockedDrafter::cost(b), 1.0);
}

}  // namespace
}  // namespace cedar::runtime
