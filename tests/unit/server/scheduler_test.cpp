// The scheduler on a generated tiny model: several jobs on fewer slots all complete with their
// events in order, the test hook's forced output, cancellation, the queue limit, and session
// reuse reported as cached tokens, and KV admission with a shared pool.
#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/prompt_images.h"
#include "server/api_error.h"
#include "text/chat_request.h"

namespace cedar::server {
namespace {

std::string cedar_bin() {
  const char* b = std::getenv("CEDAR_BIN");
  return b ? b : CEDAR_BIN;
}

class TinyModel : public ::testing::Environment {
 public:
  static std::string dir;
  void SetUp() override {
    char tmpl[] = "/tmp/cedar-server-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir = root_ + "/tiny";
    const std::string cmd =
        cedar_bin() + " make-model --preset tiny --seed 1 --out " + dir + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

 private:
  std::string root_;
};
std::string TinyModel::dir;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new TinyModel);

runtime::Engine& engine() {
  static std::unique_ptr<runtime::Engine> e;
  if (!e) {
    runtime::EngineOptions o;
    o.model_dir = TinyModel::dir;
    o.threads = 2;
    e = runtime::Engine::load(o);
  }
  return *e;
}

JobSpec chat_job(const std::string& user, int64_t max_tokens, bool thinking = false) {
  ojson body = {{"messages", ojson::array({{{"role", "user"}, {"content", user}}})}};
  if (!thinking) body["thinking"] = {{"type", "disabled"}};
  const runtime::Prompt p = engine().render_chat(text::parse_chat_request(body));
  JobSpec s;
  s.prompt = p.ids;
  s.setup.parser.start = p.start;
  s.sampling.temperature = 0.0;
  s.max_tokens = max_tokens;
  return s;
}

// Drains a job: all events until kDone.
std::vector<CompletionEvent> drain(Job& job) {
  std::vector<CompletionEvent> all;
  for (int i = 0; i < 6000; ++i) {  // bounded: 6000 x 100 ms
    job.wait(&all, std::chrono::milliseconds(100));
    if (!all.empty() && all.back().kind == CompletionEvent::Kind::kDone) return all;
  }
  ADD_FAILURE() << "job did not finish";
  return all;
}

TEST(Scheduler, ManyJobsOnFewSlotsAllComplete) {
  Metrics metrics;
  SchedulerOptions so;
  so.parallel = 2;
  so.prefill_chunk = 16;
  Scheduler sched(engine(), nullptr, so, &metrics);
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back(std::make_shared<Job>(chat_job("job number " + std::to_string(i), 6)));
    sched.submit(jobs.back());
  }
  for (auto& j : jobs) {
    const auto ev = drain(*j);
    ASSERT_FALSE(ev.empty());
    EXPECT_EQ(ev.front().kind, CompletionEvent::Kind::kStarted);
    EXPECT_EQ(ev.front().usage.prompt_tokens, int64_t(j->spec().prompt.size()));
    const Outcome o = j->outcome();
    EXPECT_TRUE(o.finish == Finish::kStop || o.finish == Finish::kLength) << o.error;
    EXPECT_GE(o.usage.completion_tokens, 1);
    EXPECT_LE(o.usage.completion_tokens, 6);
    std::string text;
    for (const auto& e : ev)
      if (e.kind == CompletionEvent::Kind::kContent) text += e.text;
    EXPECT_EQ(text, o.content);
  }
  EXPECT_EQ(sched.active(), 0);
  EXPECT_EQ(sched.queued(), 0);
  EXPECT_GE(metrics.completion_tokens(), 5);
}

TEST(Scheduler, GreedyResultDoesNotDependOnConcurrency) {
  SchedulerOptions so;
  so.parallel = 1;
  Scheduler one(engine(), nullptr, so, nullptr);
  auto a = std::make_shared<Job>(chat_job("same question", 8));
  one.submit(a);
  drain(*a);
  so.parallel = 3;
  so.prefill_chunk = 4;
  Scheduler three(engine(), nullptr, so, nullptr);
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 3; ++i) {
    jobs.push_back(std::make_shared<Job>(
        chat_job(i == 1 ? "same question" : "other " + std::to_string(i), 8)));
    three.submit(jobs.back());
  }
  for (auto& j : jobs) drain(*j);
  EXPECT_EQ(jobs[1]->outcome().content, a->outcome().content);
  EXPECT_EQ(jobs[1]->outcome().usage.completion_tokens, a->outcome().usage.completion_tokens);
}

TEST(Scheduler, ForcedOutputTestHook) {
  Scheduler sched(engine(), nullptr, SchedulerOptions{}, nullptr);
  JobSpec s = chat_job("hi", 0, /*thinking=*/true);
  const std::string forced = "because</think>Hello";
  s.forced = engine().tokenizer().encode(forced, true);
  s.forced->push_back(engine().stop_token_ids().at(0));
  auto job = std::make_shared<Job>(std::move(s));
  sched.submit(job);
  drain(*job);
  const Outcome o = job->outcome();
  EXPECT_EQ(o.reasoning, "because");
  EXPECT_EQ(o.content, "Hello");
  EXPECT_EQ(o.finish, Finish::kStop);
  EXPECT_EQ(o.usage.completion_tokens, int64_t(job->spec().forced->size()));
  EXPECT_GT(o.usage.reasoning_tokens, 0);
  EXPECT_LT(o.usage.reasoning_tokens, o.usage.completion_tokens);

  // max_tokens cuts the forced output too.
  JobSpec s2 = chat_job("hi", 2);
  s2.forced = engine().tokenizer().encode("one two three four", true);
  auto j2 = std::make_shared<Job>(std::move(s2));
  sched.submit(j2);
  drain(*j2);
  EXPECT_EQ(j2->outcome().finish, Finish::kLength);
  EXPECT_EQ(j2->outcome().usage.completion_tokens, 2);
}

TEST(Scheduler, CancelStopsGeneration) {
  Metrics metrics;
  Scheduler sched(engine(), nullptr, SchedulerOptions{}, &metrics);
  JobSpec s = chat_job("go on forever", 100000);
  s.sampling.temperature = 1.0;
  s.sampling.seed = 5;
  auto job = std::make_shared<Job>(std::move(s));
  sched.submit(job);
  std::vector<CompletionEvent> ev;
  while (ev.empty() || ev.size() < 3) job->wait(&ev, std::chrono::milliseconds(100));
  job->cancel();
  drain(*job);
  const Outcome o = job->outcome();
  EXPECT_TRUE(o.finish == Finish::kCancelled || o.finish == Finish::kStop);
  EXPECT_LT(o.usage.completion_tokens, 100000);
}

// The images' patches (their pixels count in the server's image budget) are freed as soon as
// the tower has read them, while the job goes on generating and its HTTP thread still holds it.
TEST(Scheduler, ImagePatchesAreFreedOnceTheTowerHasRun) {
  Scheduler sched(engine(), nullptr, SchedulerOptions{}, nullptr);
  JobSpec s = chat_job("what is this?", 0);
  s.prompt.insert(s.prompt.begin() + 2, int32_t(engine().config().image_token_id));
  std::ifstream f(std::string(CEDAR_SOURCE_DIR) + "/tests/fuzz/corpus/image/rgb.png",
                  std::ios::binary);
  const std::string png[] = {{std::istreambuf_iterator<char>(f), {}}};
  s.images = attach_images(engine().config(), &s.prompt, png);
  s.identity = identity_ids(s.prompt, s.images);
  s.forced = engine().tokenizer().encode(std::string(400, 'a'), true);  // a long answer
  s.forced->push_back(engine().stop_token_ids().at(0));
  std::weak_ptr<const vision::ImagePatches> patches = s.images[0].patches;
  auto job = std::make_shared<Job>(std::move(s));
  sched.submit(job);
  std::vector<CompletionEvent> ev;
  while (ev.empty()) job->wait(&ev, std::chrono::milliseconds(100));
  ASSERT_EQ(ev.front().kind, CompletionEvent::Kind::kStarted);  // prefilled: the tower ran
  EXPECT_TRUE(patches.expired());
  drain(*job);
  EXPECT_NE(job->outcome().finish, Finish::kError) << job->outcome().error;
  EXPECT_EQ(job->spec().images.size(), 1u);  // the span and digest stay
  EXPECT_EQ(job->spec().images[0].patches, nullptr);
}

TEST(Scheduler, QueueLimitIs503) {
  SchedulerOptions so;
  so.parallel = 1;
  so.max_queue = 1;
  Scheduler sched(engine(), nullptr, so, nullptr);
  auto busy = std::make_shared<Job>(chat_job("long", 100000));
  sched.submit(busy);
  // Wait until the slot has taken it, so the next one is queued.
  std::vector<CompletionEvent> ev;
  while (ev.empty()) busy->wait(&ev, std::chrono::milliseconds(100));
  auto queued = std::make_shared<Job>(chat_job("q", 1));
  sched.submit(queued);
  try {
    sched.submit(std::make_shared<Job>(chat_job("x", 1)));
    ADD_FAILURE() << "expected 503";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
  }
  busy->cancel();
  drain(*busy);
  drain(*queued);
  EXPECT_NE(queued->outcome().finish, Finish::kError);
}

// --kv-ram: jobs reserve their whole sequence at submit, idle sessions stay counted and are
// dropped to admit a job, and what does not fit is a 503 naming memory.
TEST(Scheduler, KvPoolAdmitsByReservationAndDropsIdleSessions) {
  const int64_t ctx = 96;
  const runtime::KvPool sizes(engine().config(), ctx, 0);
  const int64_t full = sizes.sequence_bytes(ctx);
  SchedulerOptions so;
  so.parallel = 2;
  so.ctx_size = ctx;
  so.kv_pool = full + sizes.sequence_bytes(0) / 2;  // one full sequence and a bit
  Scheduler sched(engine(), nullptr, so, nullptr);
  EXPECT_EQ(sched.kv_capacity(), so.kv_pool);

  auto first = std::make_shared<Job>(chat_job("a first turn", 2));
  sched.submit(first);
  drain(*first);
  const int64_t held = sched.kv_used();  // the idle session of `first`
  EXPECT_GT(held, sizes.sequence_bytes(0) / 2);
  EXPECT_LT(held, full);

  // a whole-context job does not fit beside that session: it is dropped to admit the job
  JobSpec big = chat_job("a second, unrelated request", 0);
  big.forced = engine().tokenizer().encode("fine", true);
  big.forced->push_back(engine().stop_token_ids().at(0));
  auto second = std::make_shared<Job>(big);
  sched.submit(second);
  EXPECT_EQ(sched.kv_used(), full);  // reserved at submit, the idle session gone
  // a third whole-context job does not fit while the second holds its reservation
  try {
    sched.submit(std::make_shared<Job>(big));
    ADD_FAILURE() << "expected 503";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(std::string(e.what()).rfind("memory: this request needs", 0), 0u) << e.what();
  }
  drain(*second);
  EXPECT_EQ(second->outcome().content, "fine");
  EXPECT_LT(sched.kv_used(), full);  // only the second's session, counted by its tokens
  EXPECT_GT(sched.kv_used(), 0);
}

TEST(Scheduler, SessionReuseIsReportedAsCachedTokens) {
  SchedulerOptions so;
  so.parallel = 2;
  Scheduler sched(engine(), nullptr, so, nullptr);
  auto first = std::make_shared<Job>(chat_job("a first turn", 1));
  sched.submit(first);
  drain(*first);
  // A prompt that extends the first prompt lands on the same slot and reuses its state.
  JobSpec s = chat_job("a first turn", 1);
  for (int32_t id : engine().tokenizer().encode(" and more text", false)) s.prompt.push_back(id);
  const int64_t first_len = int64_t(first->spec().prompt.size());
  auto second = std::make_shared<Job>(std::move(s));
  sched.submit(second);
  drain(*second);
  EXPECT_EQ(second->outcome().usage.cached_tokens, first_len);
}

}  // namespace
}  // namespace cedar::server
