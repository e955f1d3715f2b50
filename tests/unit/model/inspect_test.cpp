// `cedar inspect` numbers for the released configuration: 890 B/token of global KV (720 + 170),
// the parameter totals of spec §2.4, and the CLI's text/JSON output and error exits.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/param_count.h"

namespace cedar {
namespace {

using nlohmann::json;

std::string fixture() {
  return std::string(CEDAR_SOURCE_DIR) + "/tests/fixtures/released-config.json";
}

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

int run(const std::string& cmd, std::string* out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  out->clear();
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// |got - want| <= rel * want
void expect_near_rel(double got, double want, double rel, const char* what) {
  EXPECT_LE(std::abs(got - want), rel * want) << what << ": got " << got << ", spec " << want;
}

TEST(Inspect, ReleasedKvBytesPerToken) {
  ModelConfig c = ModelConfig::from_file(fixture());
  KvLayout kv = kv_layout(c);
  EXPECT_EQ(kv.main_row_bytes, 288);  // 512/2 + 512/16
  EXPECT_EQ(kv.index_row_bytes, 68);  // 128/2 + 128/32
  EXPECT_DOUBLE_EQ(kv.main_bytes_per_token, 720.0);
  EXPECT_DOUBLE_EQ(kv.index_bytes_per_token, 170.0);
  EXPECT_DOUBLE_EQ(kv.bytes_per_token(), 890.0);
  EXPECT_EQ(kv.window_row_bytes, 528);
  EXPECT_EQ(kv.window_state_bytes, 2703360);  // 40 x 128 x 528, spec §10.2
  EXPECT_EQ(kv.dspark_window_state_bytes, 3 * 128 * 528);
  // 1M tokens: ~890 MB of global KV + the rings
  EXPECT_EQ(kv.bytes_for_tokens(1048576), int64_t(1048576) * 890 + 2703360);
  // an odd count: the trailing ratio-2 token has no row yet (3 sources x 2 rows + 5 rows of r=1)
  EXPECT_EQ(kv.bytes_for_tokens(5), (3 * 2 + 5) * (288 + 68) + 2703360);
}

TEST(Inspect, ReleasedParameterCounts) {
  ModelConfig c = ModelConfig::from_file(fixture());
  const auto inv = expected_tensors(c);
  ParamCounts p = count_params(c, inv);
  // spec §2.4 / §1: backbone 551.6B, Engram tables 196.6B (2 x ~384M rows x 256)
  expect_near_rel(double(p.backbone), 551.6e9, 0.01, "backbone");
  EXPECT_EQ(p.engram_tables, (int64_t(384006168) + 384016682) * 256);
  expect_near_rel(double(p.engram_tables), 196.6e9, 0.01, "engram");
  // activated: decode 15.8B (16.5B counting the embedding table), prefill 7.6B (8.2B with head)
  expect_near_rel(double(p.active_generated), 15.8e9, 0.01, "activated per generated token");
  expect_near_rel(double(p.active_generated + p.embedding), 16.5e9, 0.01,
                  "activated per generated token with embedding");
  expect_near_rel(double(p.active_prompt), 7.6e9, 0.01, "activated per prompt token");
  expect_near_rel(double(p.active_prompt + p.head), 8.2e9, 0.01, "prompt token with head");
  EXPECT_EQ(p.embedding, int64_t(129280) * 5120);
  EXPECT_EQ(p.head, int64_t(129280) * 5120);
  EXPECT_GT(p.dspark, 0);
  EXPECT_GT(p.vision, 0);
  // the inventory they come from is the release's (spec §13 verification)
  EXPECT_EQ(p.checkpoint_tensors, 96085);
  EXPECT_EQ(p.checkpoint_bytes, int64_t(510286023000));
  // one expert = 3 * 5120 * 2304 logical weights, whatever the FP4 packing
  int found = 0;
  for (const auto& t : inv) {
    if (t.name == "layers.0.ffn.experts.0.w1" || t.name == "layers.0.ffn.experts.0.w1.weight") {
      EXPECT_EQ(tensor_params(t), int64_t(2304) * 5120);
      ++found;
    }
  }
  EXPECT_EQ(found, 1);
}

TEST(Inspect, CliOnReleasedConfig) {
  std::string out;
  ASSERT_EQ(
      run("'" + cedar_bin() + "' inspect --config '" + fixture() + "' --json --kv-tokens 1000",
          &out),
      0)
      << out;
  json j = json::parse(out);
  EXPECT_EQ(j["kv"]["bytes_per_token"], 890.0);
  EXPECT_EQ(j["kv"]["main_bytes_per_token"], 720.0);
  EXPECT_EQ(j["kv"]["index_bytes_per_token"], 170.0);
  EXPECT_EQ(j["kv"]["bytes_for_tokens"], 1000 * 890 + 2703360);
  ASSERT_EQ(j["layers"].size(), 40u);
  EXPECT_EQ(j["layers"][24]["role"], "Reindex");
  EXPECT_EQ(j["layers"][24]["kv_source"], 20);
  EXPECT_EQ(j["layers"][24]["topk_source"], 24);
  EXPECT_EQ(j["layers"][19]["part"], "enc");
  EXPECT_EQ(j["layers"][20]["part"], "dec");
  EXPECT_TRUE(j["layers"][0]["kv_source"].is_null());
  EXPECT_NE(j["layers"][14]["extras"].get<std::string>().find("Engram #1"), std::string::npos);
  EXPECT_EQ(j["role_counts"]["Reuse"], 30);
  expect_near_rel(j["params"]["backbone"].get<double>(), 551.6e9, 0.01, "json backbone");

  ASSERT_EQ(run("'" + cedar_bin() + "' inspect --config '" + fixture() + "'", &out), 0) << out;
  EXPECT_NE(out.find("bytes/token: 890 (main 720 + index 170)"), std::string::npos) << out;
  EXPECT_NE(out.find("Reindex"), std::string::npos);
  EXPECT_NE(out.find("method:"), std::string::npos);
}

// --kv-tokens allocates a real SequenceState: the bytes come from its buffers, not arithmetic.
TEST(Inspect, CliAllocatesTheStateForAMillionTokens) {
  std::string out;
  ASSERT_EQ(
      run("'" + cedar_bin() + "' inspect --config '" + fixture() + "' --json --kv-tokens 1048576",
          &out),
      0)
      << out;
  json j = json::parse(out);
  const json& a = j["kv"]["allocated"];
  EXPECT_EQ(a["global_bytes"], int64_t(1048576) * 890);
  EXPECT_EQ(a["global_bytes_per_token"], 890.0);
  EXPECT_EQ(a["window_bytes"], 2703360);
  // fp32 k + gate tails of 3 r=2 sources, the main_kv rings of the 3 DSpark stages
  const int64_t other = 3 * 2 * 512 * 4 + 3 * 128 * 528;
  EXPECT_EQ(a["other_fixed_bytes"], other);
  EXPECT_EQ(a["total_bytes"], int64_t(1048576) * 890 + 2703360 + other);
  ASSERT_EQ(
      run("'" + cedar_bin() + "' inspect --config '" + fixture() + "' --kv-tokens 1048576", &out),
      0)
      << out;
  EXPECT_NE(out.find("global KV: 933,232,640 B = 890 B/token"), std::string::npos) << out;
  EXPECT_NE(out.find("window rings (fixed): 2,703,360 B"), std::string::npos) << out;
  // an odd count: the open ratio-2 groups own no row yet
  ASSERT_EQ(
      run("'" + cedar_bin() + "' inspect --config '" + fixture() + "' --json --kv-tokens 5", &out),
      0);
  EXPECT_EQ(json::parse(out)["kv"]["allocated"]["global_bytes"], (3 * 2 + 5) * (288 + 68));
}

TEST(Inspect, CliErrors) {
  std::string out;
  EXPECT_EQ(run("'" + cedar_bin() + "' inspect", &out), 1) << out;
  EXPECT_NE(out.find("--model"), std::string::npos) << out;
  EXPECT_EQ(run("'" + cedar_bin() + "' inspect --config /nonexistent/config.json", &out), 1) << out;
  EXPECT_NE(out.find("/nonexistent/config.json"), std::string::npos) << out;
  EXPECT_EQ(run("'" + cedar_bin() + "' inspect --model /nonexistent-model-dir", &out), 1) << out;
  EXPECT_NE(out.find("/nonexistent-model-dir"), std::string::npos) << out;
  EXPECT_EQ(run("'" + cedar_bin() + "' inspect --config '" + fixture() + "' --kv-tokens -5", &out),
            1)
      << out;
}

}  // namespace
}  // namespace cedar

namespace cedar {
namespace {

// `inspect --config F --plan` plans from the config alone (the release layout's tensors) what
// `inspect --model DIR --plan` plans from the weights: the same numbers on a made model; and
// advises serve flags for a given RAM: everything mapped when it fits, a --mem-budget that
// streams the experts when it does not, a shorter context when even that is too much.
TEST(Inspect, PlanFromTheConfigAloneAndItsAdvice) {
  char tmpl[] = "/tmp/cedar-inspect-plan-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::string out;
  ASSERT_EQ(
      run("'" + cedar_bin() + "' make-model --preset small --seed 1 --out '" + dir + "/m'", &out),
      0)
      << out;
  std::string a, b;
  ASSERT_EQ(run("'" + cedar_bin() + "' inspect -m '" + dir + "/m' --plan --json -c 4096", &a), 0)
      << a;
  ASSERT_EQ(run("'" + cedar_bin() + "' inspect --config '" + dir +
                    "/m/config.json' --plan --json -c 4096",
                &b),
            0)
      << b;
  const json ja = json::parse(a), jb = json::parse(b);
  EXPECT_FALSE(ja["from_config_only"].get<bool>());
  EXPECT_TRUE(jb["from_config_only"].get<bool>());
  for (const char* k : {"checkpoint", "dense", "routed_experts", "engram_tables", "kv", "resident"})
    EXPECT_EQ(ja[k], jb[k]) << k;
  const int64_t resident = jb["resident"].get<int64_t>();
  // RAM for all of it (resident + the tenth kept back, at least 4 GiB)
  const std::string cfg = "'" + dir + "/m/config.json'";
  ASSERT_EQ(run("'" + cedar_bin() + "' inspect --config " + cfg + " --plan -c 4096 --ram " +
                    std::to_string(resident * 2 + (int64_t(5) << 30)),
                &out),
            0);
  EXPECT_NE(out.find("everything mapped fits"), std::string::npos) << out;
  EXPECT_NE(out.find("cedar serve -m " + dir + "/m -c 4096\n"), std::string::npos) << out;
  // the release on 256 GiB: experts streamed under a budget
  ASSERT_EQ(
      run("'" + cedar_bin() + "' inspect --config '" + fixture() + "' --plan -c 131072 --ram 256G",
          &out),
      0);
  EXPECT_NE(out.find("routed experts stream from storage"), std::string::npos) << out;
  EXPECT_NE(out.find("--mem-budget 230G"), std::string::npos) << out;
  // and on 8 GiB not even that: no context fits the dense weights
  ASSERT_EQ(run("'" + cedar_bin() + "' inspect --config '" + fixture() + "' --plan --ram 8G", &out),
            0);
  EXPECT_NE(out.find("no context fits"), std::string::npos) << out;
  std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
}  // namespace cedar
