// CED prefill and SWA Bounded Replay (spec §9.2, §9.4) on a generated tiny checkpoint (7 layers,
// candidate source 4: encoder = layers 0-3 + layer 4's projection, decoder = layers 4-6):
//  * CED writes the same encoder state as exact prefill (global rows of every source, including
//    the candidate source's, encoder rings, tails, Engram history), and equals exact prefill
//    outright when the prompt fits the window;
//  * CED over chunks equals CED one-shot bit for bit (logits and state), whatever the chunking;
//  * decode after CED is deterministic;
//  * replay of a state stripped of its window refills the rings for [s, h) without touching the
//    global rows (bit-identical to the exact state when h <= window), rebuilds a missing ratio-2
//    tail, and refuses ids that are not the state's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "forward/transformer.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "text/engram_token_map.h"
#include "text/tokenizer.h"
#include "tiny_fixture.h"

namespace cedar {
namespace {

using testutil::bit_equal;
using testutil::cedar_bin;
using testutil::expect_same_global;
using testutil::expect_same_state;

class Ced : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/cedar_ced_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    const std::string model = *dir_ + "/tiny";
    ASSERT_EQ(std::system((cedar_bin() + " make-model --preset tiny --seed 5 --out " + model +
                           " > /dev/null 2>&1")
                              .c_str()),
              0);
    ckpt_ = Checkpoint::open(model).release();
    const auto tok = text::Tokenizer::load(model + "/tokenizer.json");
    map_ = new std::vector<int32_t>(text::build_engram_token_map(tok).map);
    pool_ = new ThreadPool(2);
    model_ = new Transformer(*ckpt_, choose_kernels("ref"), *pool_, *map_);
    std::mt19937 rng(23);
    std::uniform_int_distribution<int32_t> id(0, 127999);
    ids_ = new std::vector<int32_t>(420);
    for (auto& v : *ids_) v = id(rng);
    for (int i = 0; i < 12; ++i) (*ids_)[200 + i] = (*ids_)[i];  // repeated n-grams (Engram)
  }
  static void TearDownTestSuite() {
    delete model_;
    delete pool_;
    delete map_;
    delete ckpt_;
    delete ids_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static int64_t V() { return model_->config().vocab_size; }

  // CED prefill of ids[0..T) in chunks of `chunk` (the last one completes the prompt); returns
  // the last-row logits and (optionally) the replay-row logits.
  static std::vector<float> ced(int T, int chunk, SequenceState& st,
                                std::vector<float>* replay = nullptr,
                                ForwardResult* res = nullptr) {
    st = model_->new_state();
    std::vector<float> last(static_cast<size_t>(V()));
    for (int p = 0; p < T; p += chunk) {
      const int n = std::min(chunk, T - p);
      ForwardOptions o;
      o.completes_prompt = p + n == T;
      o.logits = o.completes_prompt ? LogitsWanted::kLast : LogitsWanted::kNone;
      const ForwardResult r = model_->forward(st, ids_->data() + p, n, p, o,
                                              o.completes_prompt ? last.data() : nullptr);
      if (o.completes_prompt && res) *res = r;
    }
    if (replay) {
      // the replay rows' logits: the same prompt once more, one shot, kReplay
      SequenceState st2 = model_->new_state();
      ForwardOptions o;
      o.logits = LogitsWanted::kReplay;
      replay->assign(size_t(std::min(T, 128)) * size_t(V()), 0.0f);
      model_->forward(st2, ids_->data(), T, 0, o, replay->data());
    }
    return last;
  }

  static std::vector<float> exact(int T, SequenceState& st) {
    st = model_->new_state();
    std::vector<float> last(static_cast<size_t>(V()));
    model_->forward(st, ids_->data(), T, 0, LogitsWanted::kLast, last.data());
    return last;
  }

  static std::string* dir_;
  static Checkpoint* ckpt_;
  static std::vector<int32_t>* map_;
  static ThreadPool* pool_;
  static Transformer* model_;
  static std::vector<int32_t>* ids_;
};

std::string* Ced::dir_ = nullptr;
Checkpoint* Ced::ckpt_ = nullptr;
std::vector<int32_t>* Ced::map_ = nullptr;
ThreadPool* Ced::pool_ = nullptr;
Transformer* Ced::model_ = nullptr;
std::vector<int32_t>* Ced::ids_ = nullptr;

bool same_ring(const SequenceState& a, const SequenceState& b, size_t l) {
  return a.window[l].codes == b.window[l].codes && a.window[l].scales == b.window[l].scales;
}

TEST_F(Ced, TinyHasTheSplit) {
  EXPECT_TRUE(model_->has_ced());
  EXPECT_EQ(model_->ced_layer(), 4);
}

TEST_F(Ced, PromptWithinTheWindowEqualsExact) {
  for (int T : {1, 2, 77, 128}) {
    SequenceState a, b;
    ForwardResult r;
    const auto lc = ced(T, T, a, nullptr, &r);
    const auto le = exact(T, b);
    EXPECT_TRUE(bit_equal(lc, le)) << "T " << T;
    expect_same_state(a, b);
    EXPECT_EQ(r.replay_start, 0);
    EXPECT_EQ(r.decoder_rows, T);
    EXPECT_FALSE(r.truncated);
  }
}

TEST_F(Ced, EncoderStateEqualsExactPrefill) {
  const int T = 301, c = model_->ced_layer();
  SequenceState a, b;
  ForwardResult r;
  const auto lc = ced(T, T, a, nullptr, &r);
  const auto le = exact(T, b);
  EXPECT_EQ(r.replay_start, T - 128);
  EXPECT_EQ(r.decoder_rows, 128);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.logits_first_pos, T - 1);
  // global rows of every source (encoder sources and the candidate source) + tails + history
  expect_same_global(a, b);
  EXPECT_EQ(a.compressed[size_t(c)].n_rows, T);
  EXPECT_EQ(a.compressed[2].n_tail, 1);
  // encoder rings equal; the decoder saw a truncated window, so its rings (and logits) differ
  for (int l = 0; l < c; ++l) EXPECT_TRUE(same_ring(a, b, size_t(l))) << "layer " << l;
  bool dec_differs = false;
  for (int l = c; l < model_->config().num_hidden_layers; ++l)
    dec_differs = dec_differs || !same_ring(a, b, size_t(l));
  EXPECT_TRUE(dec_differs);
  EXPECT_FALSE(bit_equal(lc, le));
  double num = 0, den = 0;
  for (size_t i = 0; i < lc.size(); ++i) {
    ASSERT_TRUE(std::isfinite(lc[i]));
    num += double(lc[i] - le[i]) * double(lc[i] - le[i]);
    den += double(le[i]) * double(le[i]);
  }
  EXPECT_GT(num, 0.0);
  EXPECT_LT(std::sqrt(num / den), 1.0);  // approximate, not unrelated
  EXPECT_EQ(a.dec_tokens, T);
  EXPECT_EQ(a.window_from, T - 128);
  EXPECT_EQ(a.ced_stream.rows, 0);
}

TEST_F(Ced, ChunkedCedEqualsOneShot) {
  const int T = 300;
  SequenceState one;
  std::vector<float> rep_one;
  const auto l_one = ced(T, T, one, &rep_one);
  for (int chunk : {1, 7, 64, 100, 128, 129, 171, 172, 173, 250, 299}) {
    SequenceState st;
    const auto l = ced(T, chunk, st);
    EXPECT_TRUE(bit_equal(l, l_one)) << "chunk " << chunk;
    expect_same_state(st, one);
  }
  // kReplay: the last row of the replay rows is the kLast row
  ASSERT_EQ(rep_one.size(), size_t(128) * size_t(V()));
  EXPECT_EQ(std::memcmp(rep_one.data() + size_t(127) * V(), l_one.data(), size_t(V()) * 4), 0);
}

TEST_F(Ced, ReplayRowsOfACompletingChunkStartBeforeIt) {
  // open chunk of 250 tokens, completing chunk of 50: the decoder runs on [172, 300)
  SequenceState st = model_->new_state();
  ForwardOptions open;
  open.completes_prompt = false;
  open.logits = LogitsWanted::kNone;
  model_->forward(st, ids_->data(), 250, 0, open, nullptr);
  EXPECT_TRUE(st.prompt_open());
  EXPECT_EQ(st.dec_tokens, 0);
  EXPECT_EQ(st.ced_stream.rows, 128);
  EXPECT_EQ(st.ced_stream.first, 250 - 128);
  ForwardOptions fin;
  fin.logits = LogitsWanted::kReplay;
  std::vector<float> rep(size_t(128) * size_t(V()));
  const ForwardResult r = model_->forward(st, ids_->data() + 250, 50, 250, fin, rep.data());
  EXPECT_EQ(r.replay_start, 172);
  EXPECT_EQ(r.logits_first_pos, 172);
  EXPECT_EQ(r.logits_rows, 128);
  SequenceState one;
  std::vector<float> rep_one;
  ced(300, 300, one, &rep_one);
  EXPECT_TRUE(bit_equal(rep, rep_one));
}

TEST_F(Ced, Errors) {
  SequenceState st = model_->new_state();
  std::vector<float> out(size_t(300) * size_t(V()));
  ForwardOptions open;
  open.completes_prompt = false;
  open.logits = LogitsWanted::kLast;
  EXPECT_THROW(model_->forward(st, ids_->data(), 10, 0, open, out.data()), std::runtime_error);
  EXPECT_EQ(st.n_tokens, 0);
  open.logits = LogitsWanted::kNone;
  model_->forward(st, ids_->data(), 10, 0, open, nullptr);
  // exact mode on an open prompt
  EXPECT_THROW(model_->forward(st, ids_->data() + 10, 1, 10, LogitsWanted::kLast, out.data()),
               std::runtime_error);
  // kAll where the decoder does not cover every row
  SequenceState s2 = model_->new_state();
  ForwardOptions all;
  all.logits = LogitsWanted::kAll;
  EXPECT_THROW(model_->forward(s2, ids_->data(), 300, 0, all, out.data()), std::runtime_error);
  EXPECT_EQ(s2.n_tokens, 0);
  const ForwardResult r = model_->forward(s2, ids_->data(), 100, 0, all, out.data());
  EXPECT_EQ(r.logits_rows, 100);
}

TEST_F(Ced, DecodeAfterCedIsDeterministic) {
  auto greedy = [&](int chunk, std::vector<float>* final_logits) {
    SequenceState st;
    auto l = ced(260, chunk, st);
    std::vector<int32_t> toks;
    std::vector<float> last;
    for (int k = 0; k < 12; ++k) {
      int32_t best = 0;
      for (int64_t v = 1; v < V(); ++v)
        if (l[size_t(v)] > l[size_t(best)]) best = int32_t(v);
      toks.push_back(best);
      ForwardOptions o;
      model_->forward(st, &best, 1, st.n_tokens, o, l.data());
    }
    *final_logits = l;
    return toks;
  };
  std::vector<float> la, lb, lc;
  const auto a = greedy(260, &la), b = greedy(260, &lb), c = greedy(97, &lc);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_TRUE(bit_equal(la, lb));
  EXPECT_TRUE(bit_equal(la, lc));
}

TEST_F(Ced, ReplayWithinTheWindowRestoresTheExactState) {
  SequenceState ref;
  exact(101, ref);
  SequenceState st = ref;
  st.drop_window();
  EXPECT_EQ(st.window_from, 101);
  std::vector<float> out(static_cast<size_t>(V()));
  const int32_t next = (*ids_)[101];
  {
    SequenceState probe = st;  // a stripped window refuses to run
    EXPECT_THROW(model_->forward(probe, &next, 1, 101, LogitsWanted::kLast, out.data()),
                 std::runtime_error);
  }
  EXPECT_EQ(model_->replay(st, std::span<const int32_t>(ids_->data(), 101), 0), 0);
  expect_same_state(st, ref);
}

TEST_F(Ced, ReplayRefillsTheWindowWithoutTouchingGlobalRows) {
  const int h = 333;
  SequenceState ref;
  exact(h, ref);
  SequenceState st = ref;
  st.drop_window();
  // ids may start at s - (max_ngram - 1) = 205 - 3
  EXPECT_THROW(model_->replay(st, std::span<const int32_t>(ids_->data() + 203, h - 203), 203),
               std::runtime_error);
  const int64_t s = model_->replay(st, std::span<const int32_t>(ids_->data() + 202, h - 202), 202);
  EXPECT_EQ(s, h - 128);
  EXPECT_EQ(st.window_from, s);
  expect_same_global(st, ref);
  // layer 0's window rows depend on the token only: identical; deeper layers saw a truncated
  // window; every ring is filled for [s, h)
  EXPECT_TRUE(same_ring(st, ref, 0));
  bool differs = false;
  for (size_t l = 1; l < st.window.size(); ++l) differs = differs || !same_ring(st, ref, l);
  EXPECT_TRUE(differs);
  for (const auto& w : st.window) {
    size_t nz = 0;
    for (uint8_t v : w.scales) nz += v != 0;
    EXPECT_EQ(nz, w.scales.size());  // every slot written (UE8M0 code 0 = 2^-127 never occurs)
  }
  // the next token runs and is finite; both modes
  std::vector<float> out(static_cast<size_t>(V()));
  const int32_t next = (*ids_)[h];
  SequenceState st2 = st;
  model_->forward(st, &next, 1, h, LogitsWanted::kLast, out.data());
  for (float v : out) ASSERT_TRUE(std::isfinite(v));
  ForwardOptions o;
  std::vector<float> out2(static_cast<size_t>(V()));
  model_->forward(st2, &next, 1, h, o, out2.data());
  EXPECT_TRUE(bit_equal(out, out2));  // decode = exact arithmetic in both modes
  // ids that are not the state's tokens are refused
  SequenceState bad = ref;
  bad.drop_window();
  std::vector<int32_t> other(ids_->begin(), ids_->begin() + h);
  other[h - 1] = (other[h - 1] + 1) % 1000;
  EXPECT_THROW(model_->replay(bad, other, 0), std::runtime_error);
}

TEST_F(Ced, ReplayAfterTruncateRebuildsTailAndHistory) {
  SequenceState st;
  exact(320, st);
  SequenceState want;
  exact(251, want);
  st.truncate(251);  // odd: layer 2/3's open group (token 250) is lost
  EXPECT_EQ(st.n_tokens, 251);
  EXPECT_EQ(st.compressed[2].n_rows, 125);
  EXPECT_EQ(st.compressed[2].n_tail, 0);
  EXPECT_TRUE(st.engram_history.empty());
  std::vector<float> out(static_cast<size_t>(V()));
  {
    SequenceState probe = st;
    const int32_t next = (*ids_)[251];
    EXPECT_THROW(model_->forward(probe, &next, 1, 251, LogitsWanted::kLast, out.data()),
                 std::runtime_error);
  }
  model_->replay(st, std::span<const int32_t>(ids_->data(), 251), 0);
  EXPECT_EQ(st.compressed[2].n_tail, 1);
  EXPECT_EQ(st.engram_history, want.engram_history);
  EXPECT_EQ(st.compressed[2].kv_fp4, want.compressed[2].kv_fp4);
  EXPECT_EQ(st.compressed[4].kv_fp4, want.compressed[4].kv_fp4);
  model_->forward(st, ids_->data() + 251, 1, 251, LogitsWanted::kLast, out.data());
  EXPECT_EQ(st.compressed[2].n_rows, 126);
  for (float v : out) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace cedar
