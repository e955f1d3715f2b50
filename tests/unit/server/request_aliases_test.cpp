// Other servers' spellings of a Chat Completions request, the ignored-field warnings, the request
// log's two formats and the latency histograms.
#include "server/request_aliases.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "server/field_warnings.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "text/chat_request.h"

namespace cedar::server {
namespace {

TEST(RequestAliases, DeveloperRoleReasoningAndTemplateKwargs) {
  const ojson body = ojson::parse(R"({
    "model": "m",
    "chat_template_kwargs": {"thinking": false, "reasoning_effort": "max"},
    "messages": [{"role": "developer", "content": "be brief"},
                 {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "yo", "reasoning": "said hi"},
                 {"role": "user", "content": "again"}]})");
  const ojson b = apply_chat_aliases(body);
  EXPECT_EQ(b["messages"][0]["role"], "system");
  EXPECT_EQ(b["messages"][2]["reasoning_content"], "said hi");
  EXPECT_FALSE(b["messages"][2].contains("reasoning"));
  EXPECT_EQ(b["thinking"]["type"], "disabled");
  EXPECT_EQ(b["reasoning_effort"], "max");
  EXPECT_FALSE(b.contains("chat_template_kwargs"));
  // the parser takes the rewritten body
  const text::ChatRequest r = text::parse_chat_request(b);
  EXPECT_EQ(r.messages[0].role, text::Role::kSystem);
  EXPECT_FALSE(r.thinking);
  EXPECT_EQ(r.reasoning_effort, 100);
  // explicit fields win over the kwargs; Qwen's enable_thinking is understood too
  const ojson c = apply_chat_aliases(ojson::parse(
      R"({"thinking": {"type": "enabled"}, "chat_template_kwargs": {"enable_thinking": false}})"));
  EXPECT_EQ(c["thinking"]["type"], "enabled");
  EXPECT_EQ(apply_chat_aliases(ojson::parse(
                R"({"chat_template_kwargs": {"enable_thinking": true}})"))["thinking"]["type"],
            "enabled");
  // not an object: unchanged (the parser reports it)
  EXPECT_EQ(apply_chat_aliases(ojson::parse("[1]")), ojson::parse("[1]"));
}

TEST(FieldWarnings, IgnoredFieldsAreWarnedOncePerProcess) {
  std::vector<std::string> w;
  auto warn = [&](const std::string& m) { w.push_back(m); };
  const ojson body = ojson::parse(R"({"model": "m", "messages": [], "user": "u1",
    "logit_bias": {"5": 1}, "zz_test_field": 1, "chat_template_kwargs": {"zz_kw": 1}})");
  warn_ignored_fields(body, RequestApi::kChat, warn);
  ASSERT_EQ(w.size(), 2u);  // one line for the body's fields, one for the template's
  EXPECT_NE(w[0].find("\"logit_bias\", \"zz_test_field\""), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("chat_template_kwargs \"zz_kw\""), std::string::npos) << w[1];
  warn_ignored_fields(body, RequestApi::kChat, warn);  // the same fields again: no new warning
  EXPECT_EQ(w.size(), 2u);
}

// A body of thousands of invented names: one short line names a few, and the process stops
// logging new names once it has warned about 256.
TEST(FieldWarnings, ManyUnknownFieldsMakeOneShortLine) {
  std::vector<std::string> w;
  auto warn = [&](const std::string& m) { w.push_back(m); };
  ojson body = {{"model", "m"}, {"messages", ojson::array()}};
  for (int i = 0; i < 1000; ++i) body["zz_many_" + std::to_string(i) + std::string(200, 'x')] = 1;
  warn_ignored_fields(body, RequestApi::kChat, warn);
  ASSERT_GE(w.size(), 1u);
  ASSERT_LE(w.size(), 2u);  // the names, and (the set filling up) that no more are logged
  EXPECT_NE(w[0].find(" more: cedar does not support them"), std::string::npos) << w[0];
  for (const std::string& line : w) EXPECT_LT(line.size(), 1000u) << line;
  for (int i = 0; i < 1000; ++i) body["zz_later_" + std::to_string(i)] = 1;
  w.clear();
  warn_ignored_fields(body, RequestApi::kChat, warn);
  EXPECT_LE(w.size(), 1u);
  for (const std::string& line : w) EXPECT_LT(line.size(), 1000u) << line;
}

std::string read_all(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

TEST(RequestLog, TextAndJsonLines) {
  RequestRecord r;
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.remote = "127.0.0.1";
  r.status = 200;
  r.seconds = 1.5;
  r.ttft_seconds = 0.25;
  r.prompt_tokens = 12;
  r.cached_tokens = 4;
  r.completion_tokens = 7;
  r.finish = "stop";
  FILE* t = std::tmpfile();
  ASSERT_NE(t, nullptr);
  RequestLog(LogFormat::kText, t).request(r);
  const std::string line = read_all(t);
  std::fclose(t);
  EXPECT_NE(line.find("POST /v1/chat/completions 200 1.500s ttft 0.250s prompt 12 (cached 4) "
                      "completion 7 stop from 127.0.0.1\n"),
            std::string::npos)
      << line;
  FILE* j = std::tmpfile();
  RequestLog log(LogFormat::kJson, j);
  log.request(r);
  log.warn("a \"quoted\" warning");
  ASSERT_TRUE(log.flush());
  const std::string text = read_all(j);
  std::fclose(j);
  const size_t nl = text.find('\n');
  ASSERT_NE(nl, std::string::npos);
  const ojson a = ojson::parse(text.substr(0, nl)), b = ojson::parse(text.substr(nl + 1));
  EXPECT_EQ(a["status"], 200);
  EXPECT_EQ(a["completion_tokens"], 7);
  EXPECT_EQ(a["finish"], "stop");
  EXPECT_DOUBLE_EQ(a["ttft_seconds"].get<double>(), 0.25);
  EXPECT_EQ(b["level"], "warning");
  EXPECT_EQ(b["message"], "a \"quoted\" warning");
  EXPECT_THROW(parse_log_format("xml"), std::runtime_error);
}

// A log whose reader never reads (a full pipe): logging returns at once, the lines past the
// pipe and the queue are dropped and counted, and the sink goes away without waiting for good.
TEST(RequestLog, AFullPipeNeverBlocksTheCaller) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  FILE* w = fdopen(fds[1], "w");
  ASSERT_NE(w, nullptr);
  const std::string line = std::string(99, 'x') + "\n";
  int accepted = 0;
  {
    LogSink sink(w, 64 << 10);
    int refused = 0;
    for (int i = 0; i < 5000; ++i) (sink.write(line) ? accepted : refused) += 1;
    EXPECT_GT(refused, 0);
    EXPECT_EQ(sink.dropped(), uint64_t(refused));
    EXPECT_FALSE(sink.flush(std::chrono::milliseconds(10)));  // the writer is stuck in write()
  }  // the destructor gives up after its bound
  // the reader wakes up: every accepted line reaches it, whole and in order
  std::string got;
  char buf[1 << 16];
  while (got.size() < size_t(accepted) * line.size()) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    ASSERT_GT(n, 0);
    got.append(buf, size_t(n));
  }
  EXPECT_EQ(got.size(), size_t(accepted) * line.size());
  EXPECT_EQ(got.find_first_not_of(line), std::string::npos);
  std::fclose(w);
  close(fds[0]);
}

TEST(Metrics, LatencyAndTtftHistograms) {
  Metrics m;
  m.observe_generation(0.2, 0.04);
  m.observe_generation(3.0, -1);  // no token: latency only
  m.observe_generation(1000, 700);
  const std::string p = m.prometheus();
  EXPECT_NE(p.find("# TYPE cedar_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(p.find("cedar_request_duration_seconds_bucket{le=\"0.25\"} 1\n"), std::string::npos);
  EXPECT_NE(p.find("cedar_request_duration_seconds_bucket{le=\"5\"} 2\n"), std::string::npos);
  EXPECT_NE(p.find("cedar_request_duration_seconds_bucket{le=\"600\"} 2\n"), std::string::npos);
  EXPECT_NE(p.find("cedar_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(p.find("cedar_request_duration_seconds_count 3\n"), std::string::npos);
  EXPECT_NE(p.find("cedar_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"), std::string::npos);
  EXPECT_NE(p.find("cedar_time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(p.find("cedar_time_to_first_token_seconds_sum 700.040000\n"), std::string::npos);
}

}  // namespace
}  // namespace cedar::server
