// Pipeline stages (forward/stage.h): the layer split (automatic by bytes, given cuts, refusals),
// what crosses each cut of the tiny and released schedules, and the wire format's round trips
// and refusals of short messages.
#include "forward/stage.h"

#include <gtest/gtest.h>

#include "model/presets.h"

namespace cedar {
namespace {

ModelConfig validated(const std::string& preset) {
  ModelConfig c = preset_config(preset);
  c.validate();
  return c;
}

TEST(StageSplit, ByBytesBalancesAndLeavesEveryRankALayer) {
  const std::vector<uint64_t> even(8, 100);
  EXPECT_EQ(StageSplit::by_bytes(even, 0, 2).describe(), "0-3|4-7");
  EXPECT_EQ(StageSplit::by_bytes(even, 0, 4).describe(), "0-1|2-3|4-5|6-7");
  // rank 0's embedding and head count in its share
  EXPECT_EQ(StageSplit::by_bytes(even, 400, 2).describe(), "0-1|2-7");
  // a head larger than the layers still leaves one layer to each rank
  EXPECT_EQ(StageSplit::by_bytes(even, 100000, 3).describe(), "0|1|2-7");
  EXPECT_EQ(StageSplit::by_bytes(even, 0, 8).describe(), "0|1|2|3|4|5|6|7");
  EXPECT_THROW(StageSplit::by_bytes(even, 0, 9), std::runtime_error);
}

TEST(StageSplit, ParsedCutsAndOwners) {
  const StageSplit s = StageSplit::parse("2,4,5", 7, 4);
  EXPECT_EQ(s.describe(), "0-1|2-3|4|5-6");
  EXPECT_EQ(s.owner(0), 0);
  EXPECT_EQ(s.owner(3), 1);
  EXPECT_EQ(s.owner(4), 2);
  EXPECT_EQ(s.owner(6), 3);
  EXPECT_EQ(s.owner(7), 3);  // "after the last layer" (the head's rows) is the last rank's
  EXPECT_EQ(s.begin(2), 4);
  EXPECT_EQ(s.end(2), 5);
  for (const char* bad : {"", "2", "2,4,x", "4,2,5", "2,2,5", "2,4,7", "-1,2,3", "2,4,5,6"})
    EXPECT_THROW(StageSplit::parse(bad, 7, 4), std::runtime_error) << bad;
}

TEST(StageCrossing, TinyCuts) {
  const ModelConfig c = validated("tiny");
  // 2: the first KV source's boundary -- only the stream
  Crossing x = crossing(c, 2);
  EXPECT_TRUE(x.kv_sources.empty() && x.topk_sources.empty() && !x.candidates);
  // 3: inside source 2's range -- its rows and its Top-K (layer 3 reuses them)
  x = crossing(c, 3);
  EXPECT_EQ(x.kv_sources, std::vector<int>{2});
  EXPECT_EQ(x.topk_sources, std::vector<int>{2});
  EXPECT_FALSE(x.candidates);
  // 5: between the candidate source and the Reindex layer -- source 4's rows and the pool
  x = crossing(c, 5);
  EXPECT_EQ(x.kv_sources, std::vector<int>{4});
  EXPECT_TRUE(x.topk_sources.empty());
  EXPECT_TRUE(x.candidates);
  EXPECT_TRUE(holds_layer(c, 5, 7, 4));   // a mirrored source
  EXPECT_FALSE(holds_layer(c, 5, 7, 2));  // nothing at or above 5 reads layer 2
  EXPECT_TRUE(holds_layer(c, 0, 2, 1));
  EXPECT_FALSE(holds_layer(c, 0, 2, 4));
}

TEST(StageCrossing, ReleasedScheduleAtTheCandidateSource) {
  const ModelConfig c = validated("released");
  const int cs = c.candidate_source_layer_id;
  // a cut at the candidate source: the CED decoder reads no KV from below it
  const Crossing x = crossing(c, cs);
  EXPECT_TRUE(x.kv_sources.empty()) << x.kv_sources.size();
  EXPECT_FALSE(x.candidates);
}

TEST(StageWire, RoundTripsAndRefusesShortMessages) {
  const ModelConfig c = validated("tiny");
  const int hc = c.hc_mult, D = c.hidden_size;
  std::vector<float> h(size_t(3) * hc * D), pre(size_t(3) * hc);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(int(i % 97) - 48) * 0.125f;  // bf16 values
  for (size_t i = 0; i < pre.size(); ++i) pre[i] = 0.1f * float(i);
  WireWriter w;
  put_stream(w, c, h.data(), pre.data(), 1, 2);
  Call call;
  call.released = {4, 9};
  call.copies = {{8, 7}};
  call.items.push_back({7, 12, {1, 2, 3}, 1, 0, 3});
  const std::vector<uint8_t> msg = w.take();
  WireReader r(msg);
  std::vector<float> h2(h.size(), -1.0f), p2(pre.size(), -1.0f);
  get_stream(r, c, h2.data(), p2.data(), 1, 2);
  EXPECT_TRUE(r.done());
  for (size_t i = size_t(hc) * D; i < h.size(); ++i) ASSERT_EQ(h2[i], h[i]);
  for (size_t i = size_t(hc); i < pre.size(); ++i) ASSERT_EQ(p2[i], pre[i]);
  EXPECT_EQ(h2[0], -1.0f);  // row 0 untouched
  // a stream of another row count, a truncated message: refused
  WireReader r2(msg);
  EXPECT_THROW(get_stream(r2, c, h2.data(), p2.data(), 0, 3), std::runtime_error);
  const std::vector<uint8_t> cut(msg.begin(), msg.begin() + long(msg.size() / 2));
  WireReader r3(cut);
  EXPECT_THROW(get_stream(r3, c, h2.data(), p2.data(), 1, 2), std::runtime_error);

  const Call back = decode_call(encode_call(call));
  EXPECT_EQ(back.released, call.released);
  ASSERT_EQ(back.items.size(), 1u);
  EXPECT_EQ(back.items[0].state_id, 7u);
  EXPECT_EQ(back.copies, call.copies);
  EXPECT_EQ(back.items[0].first_pos, 12);
  EXPECT_EQ(back.items[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(back.items[0].logits, 3);
  std::vector<uint8_t> bad = encode_call(call);
  bad.pop_back();
  EXPECT_THROW(decode_call(bad), std::runtime_error);
  bad = encode_call(call);
  bad.push_back(0);
  EXPECT_THROW(decode_call(bad), std::runtime_error);
}

}  // namespace
}  // namespace cedar
