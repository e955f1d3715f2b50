#include "runtime/kv_pool.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "model/presets.h"
#include "runtime/memory_plan.h"

namespace {

using cedar::runtime::KvPool;

TEST(KvPool, SequenceBytesGrowWithTokensAndStopAtTheContext) {
  const cedar::ModelConfig cfg = cedar::preset_config("small");
  const KvPool pool(cfg, 4096, 0);
  const int64_t empty = pool.sequence_bytes(0);
  EXPECT_GT(empty, 0);  // the rings and the fixed state
  EXPECT_LT(pool.sequence_bytes(1024), pool.sequence_bytes(4096));
  EXPECT_LE(empty, pool.sequence_bytes(1024));
  EXPECT_EQ(pool.sequence_bytes(4096), pool.sequence_bytes(1 << 20));  // capped at ctx
  EXPECT_EQ(pool.sequence_bytes(4096),
            cedar::runtime::sequence_kv_bytes(cedar::kv_layout(cfg), 4096));  // the plan's formula
}

TEST(KvPool, TakesWhatFitsAndRefusesTheRest) {
  const cedar::ModelConfig cfg = cedar::preset_config("small");
  KvPool pool(cfg, 4096, 1000);
  EXPECT_TRUE(pool.limited());
  EXPECT_TRUE(pool.take(600));
  EXPECT_FALSE(pool.take(401));  // would exceed: nothing changes
  EXPECT_EQ(pool.used(), 600);
  EXPECT_TRUE(pool.take(400));
  EXPECT_EQ(pool.free_bytes(), 0);
  pool.give(600);
  EXPECT_EQ(pool.used(), 400);
  EXPECT_THROW(pool.give(401), std::logic_error);  // more than is in use
  EXPECT_THROW(pool.take(-1), std::logic_error);
  const std::string why = pool.refusal(900, 5000, 3);
  EXPECT_NE(why.find("memory"), std::string::npos) << why;
  EXPECT_NE(why.find("4096 tokens"), std::string::npos) << why;  // capped at the context
  EXPECT_NE(why.find("3 requests"), std::string::npos) << why;
  EXPECT_NE(why.find("max_tokens"), std::string::npos) << why;
}

TEST(KvPool, UnlimitedTakesEverything) {
  KvPool pool(cedar::preset_config("small"), 4096, 0);
  EXPECT_FALSE(pool.limited());
  EXPECT_TRUE(pool.take(int64_t(1) << 50));
  EXPECT_EQ(pool.used(), int64_t(1) << 50);
}

}  // namespace
