// KvStore: slots of sequence states with memory accounted from real allocations against a
// budget; fork/truncate copy a prefix exactly at full length and rebuild the window by bounded
// replay below it (needing the slot's ids and a replayer, else a clear refusal).
#include "state/kv_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
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

namespace cedar {
namespace {

ModelConfig released() {
  ModelConfig c = ModelConfig::from_file(std::string(CEDAR_SOURCE_DIR) +
                                         "/tests/fixtures/released-config.json");
  c.validate();
  return c;
}

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

TEST(KvStore, ReservationIs890BytesPerTokenPlusTheFixedWindow) {
  const ModelConfig c = released();
  KvStore store(c, size_t(1) << 31);
  const int a = store.acquire(4096);
  const SequenceState& st = store.state(a);
  EXPECT_EQ(st.global_bytes(), 4096u * 890u);
  EXPECT_EQ(st.window_bytes(), 2703360u);
  EXPECT_EQ(store.slot_bytes(a), st.bytes());
  EXPECT_GE(st.bytes(), 4096u * 890u + 2703360u);
  // the tails: 3 ratio-2 sources x (k + gate) x 512 fp32; the 3 DSpark stages' main_kv rings
  // (128 rows of 512 E4M3 + 16 UE8M0 each)
  EXPECT_EQ(st.bytes() - st.global_bytes() - st.window_bytes(),
            3u * 2u * 512u * 4u + 3u * 128u * 528u);
  EXPECT_EQ(store.bytes_used(), st.bytes());
  store.reserve(a, 8192);
  EXPECT_EQ(store.state(a).global_bytes(), 8192u * 890u);
}

TEST(KvStore, BudgetIsEnforcedWithAClearError) {
  const ModelConfig c = released();
  const size_t one = SequenceState(c).bytes() + 1000u * 890u;
  KvStore store(c, 2 * one + 100);
  const int a = store.acquire(1000), b = store.acquire(1000);
  EXPECT_EQ(store.live_slots(), 2);
  try {
    store.acquire(1000);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.live_slots(), 2);
  EXPECT_THROW(store.reserve(a, 100000), std::runtime_error);
  EXPECT_EQ(store.state(a).global_bytes(), 1000u * 890u);  // unchanged
  store.release(b);
  EXPECT_THROW(store.release(b), std::runtime_error);
  EXPECT_THROW(store.state(b), std::runtime_error);
  const int c2 = store.acquire(1000);  // the freed slot is reused
  EXPECT_EQ(c2, b);
  store.check_budget();
}

class KvStoreModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/cedar_kvstore_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = new std::string(tmpl);
    const std::string model = *dir_ + "/tiny";
    ASSERT_EQ(std::system((cedar_bin() + " make-model --preset tiny --seed 9 --out " + model +
                           " > /dev/null 2>&1")
                              .c_str()),
              0);
    ckpt_ = Checkpoint::open(model).release();
    const auto tok = text::Tokenizer::load(model + "/tokenizer.json");
    pool_ = new ThreadPool(2);
    model_ = new Transformer(*ckpt_, choose_kernels("ref"), *pool_,
                             text::build_engram_token_map(tok).map);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete pool_;
    delete ckpt_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string* dir_;
  static Checkpoint* ckpt_;
  static ThreadPool* pool_;
  static Transformer* model_;
};
std::string* KvStoreModel::dir_ = nullptr;
Checkpoint* KvStoreModel::ckpt_ = nullptr;
ThreadPool* KvStoreModel::pool_ = nullptr;
Transformer* KvStoreModel::model_ = nullptr;

std::vector<int32_t> random_ids(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, 127999);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = id(rng);
  return v;
}

TEST_F(KvStoreModel, ForkAndTruncate) {
  const ModelConfig& cfg = model_->config();
  const int64_t V = cfg.vocab_size;
  KvStore store(cfg, size_t(64) << 20);
  const auto ids = random_ids(300, 4);
  const int a = store.acquire(512);
  const size_t reserved = store.state(a).global_bytes();
  ForwardOptions o;
  std::vector<float> la(static_cast<size_t>(V));
  model_->forward(store.state(a), ids.data(), 300, 0, o, la.data());
  store.ids(a) = ids;
  EXPECT_EQ(store.state(a).global_bytes(), reserved);  // grew inside its reservation

  // full-length fork: an exact copy; both continue identically
  const int b = store.acquire();
  store.fork(a, b, 300);
  const int32_t next = 77;
  std::vector<float> x(static_cast<size_t>(V)), y(static_cast<size_t>(V));
  SequenceState sa = store.state(a);
  model_->forward(sa, &next, 1, 300, o, x.data());
  model_->forward(store.state(b), &next, 1, 300, o, y.data());
  EXPECT_EQ(x, y);

  // a shorter fork needs the replayer (and the ids)
  const int c = store.acquire();
  try {
    store.fork(a, c, 201);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("replay"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.state(c).n_tokens, 0);
  store.set_replayer([&](SequenceState& s, std::span<const int32_t> v, int64_t first) {
    return model_->replay(s, v, first);
  });
  store.fork(a, c, 201);
  const SequenceState& sc = store.state(c);
  EXPECT_EQ(sc.n_tokens, 201);
  EXPECT_EQ(sc.window_from, 201 - 128);
  EXPECT_EQ(store.ids(c).size(), 201u);
  // its global rows are the prefix of a's; layer 2's open group rebuilt
  SequenceState fresh = model_->new_state();
  model_->forward(fresh, ids.data(), 201, 0, LogitsWanted::kNone, nullptr);
  EXPECT_EQ(sc.compressed[2].kv_fp4, fresh.compressed[2].kv_fp4);
  EXPECT_EQ(sc.compressed[4].ik_fp4, fresh.compressed[4].ik_fp4);
  EXPECT_EQ(sc.compressed[2].n_tail, 1);
  EXPECT_EQ(sc.engram_history, fresh.engram_history);
  // it runs on
  model_->forward(store.state(c), ids.data() + 201, 20, 201, o, x.data());
  EXPECT_EQ(store.state(c).n_tokens, 221);
  // the source is untouched
  EXPECT_EQ(store.state(a).n_tokens, 300);

  // truncate without ids refuses and changes nothing
  store.ids(b).clear();
  EXPECT_THROW(store.truncate(b, 150), std::runtime_error);
  EXPECT_EQ(store.state(b).n_tokens, 301);  // it took `next` above
  store.truncate(a, 150);
  EXPECT_EQ(store.state(a).n_tokens, 150);
  EXPECT_EQ(store.ids(a).size(), 150u);
  EXPECT_EQ(store.state(a).compressed[4].n_rows, 150);
  EXPECT_LT(store.slot_bytes(a), store.slot_bytes(b));  // freed capacity is released
  EXPECT_THROW(store.truncate(a, 151), std::runtime_error);
  EXPECT_THROW(store.fork(a, a, 10), std::runtime_error);
  store.check_budget();
}

}  // namespace
}  // namespace cedar
