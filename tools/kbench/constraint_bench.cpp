// What a decoding step pays for constrained decoding over the real V4.1 vocabulary (129,280
// tokens): the tool-call constraint every request with tools gets (free answer text, a state
// whose mask is cached after its first step; inside a raw parameter value), against the cost of a
// step that samples with no constraint at all (an argmax over the logits, the least a sampler
// does). Not a test.
//   build/cedar_constraint_bench [--benchmark_filter=Free]
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/token_constraint.h"

namespace cedar::runtime {
namespace {

using text::ojson;

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer t = text::Tokenizer::load(CEDAR_DEFAULT_TOKENIZER);
  return t;
}

const TokenTrie& trie() {
  static const TokenTrie t(tokenizer());
  return t;
}

const text::ToolGrammar& agent_tools() {
  static const text::ToolGrammar g = text::ToolGrammar::compile(ojson::parse(R"([
    {"type":"function","function":{"name":"Bash","parameters":{"type":"object","properties":{
      "command":{"type":"string"},"timeout":{"type":"number"},"description":{"type":"string"}}}}},
    {"type":"function","function":{"name":"Read","parameters":{"type":"object","properties":{
      "file_path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}}}}},
    {"type":"function","function":{"name":"Edit","parameters":{"type":"object","properties":{
      "file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}}}}}
  ])"),
                                                                /*forced=*/false);
  return g;
}

std::vector<float> random_logits() {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> l(size_t(trie().vocab_size()));
  for (auto& x : l) x = nd(rng);
  return l;
}

int32_t argmax(const std::vector<float>& l) {
  size_t best = 0;
  for (size_t i = 1; i < l.size(); ++i)
    if (l[i] > l[best]) best = i;
  return int32_t(best);
}

// The floor: choosing a token from the logits with nothing masked.
void BM_NoConstraint(benchmark::State& st) {
  const std::vector<float> base = random_logits();
  std::vector<float> l = base;
  for (auto _ : st) {
    l = base;
    benchmark::DoNotOptimize(argmax(l));
  }
}
BENCHMARK(BM_NoConstraint);

// Mask + choice for a constraint whose state was reached by feeding `prefix`.
void masked_step(benchmark::State& st, const std::string& prefix) {
  ToolCallConstraint c(trie(), tokenizer(),
                       text::ToolCallMatcher(&agent_tools(), text::CallStart::kFree), {1});
  for (const int32_t id : tokenizer().encode(prefix, /*allow_special=*/true)) c.accept(id);
  const std::vector<float> base = random_logits();
  std::vector<float> l = base;
  c.mask(l);  // the state's first step builds its mask; the others find it cached
  for (auto _ : st) {
    l = base;
    c.mask(l);
    benchmark::DoNotOptimize(argmax(l));
  }
}

void BM_FreeAnswerText(benchmark::State& st) { masked_step(st, "The file has three lines"); }
BENCHMARK(BM_FreeAnswerText);

void BM_InsideARawValue(benchmark::State& st) {
  masked_step(st,
              "Running it.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"Bash\">\n<｜DSML｜ "
              "parameter name=\"command\" string=\"true\">ls -la /tmp");
}
BENCHMARK(BM_InsideARawValue);

// A state seen for the first time: the whole vocabulary trie is searched.
void BM_FirstStepOfAState(benchmark::State& st) {
  const std::vector<float> base = random_logits();
  std::vector<float> l = base;
  for (auto _ : st) {
    ToolCallConstraint c(trie(), tokenizer(),
                         text::ToolCallMatcher(&agent_tools(), text::CallStart::kFree), {1});
    l = base;
    c.mask(l);
    benchmark::DoNotOptimize(argmax(l));
  }
}
BENCHMARK(BM_FirstStepOfAState)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace cedar::runtime

BENCHMARK_MAIN();
