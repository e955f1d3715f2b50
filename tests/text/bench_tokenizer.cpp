// Tokenizer throughput (Google Benchmark; not a test). Reports bytes/s for plain encoding of
// English prose, Chinese prose, source code and random Unicode, for special-mode encoding, for
// decoding, and the tokenizer.json load time.
//
//   cedar_text_bench --tokenizer build/tokenizer/tokenizer.json [--text FILE] [benchmark flags]
//
// Without --text the inputs are generated (about 1 MB each); with --text FILE that file is also
// measured ("file" benchmarks), e.g. the KJV bible from `bible -f Gen1:1-Rev22:21`.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>

#include "text/incremental_decoder.h"
#include "text/tokenizer.h"

namespace {

std::string g_tokenizer_path;
std::string g_text_path;
std::unique_ptr<cedar::text::Tokenizer> g_tok;

const cedar::text::Tokenizer& tok() {
  if (!g_tok)
    g_tok =
        std::make_unique<cedar::text::Tokenizer>(cedar::text::Tokenizer::load(g_tokenizer_path));
  return *g_tok;
}

std::string repeat_to(const std::string& unit, std::size_t bytes) {
  std::string s;
  while (s.size() < bytes) s += unit;
  return s;
}

std::string english() {
  return repeat_to(
      "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
      "age of foolishness, it was the epoch of belief, it was the epoch of incredulity. In 1859, "
      "Dickens wrote 45 chapters; \"A Tale of Two Cities\" sold 200,000 copies!\n",
      1 << 20);
}

std::string chinese() {
  return repeat_to(
      "人工智能正在改变世界。我们在 2024 年发布了新的模型，它能够理解中文、English 和代码。"
      "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n",
      1 << 20);
}

std::string code() {
  return repeat_to(
      "for (std::size_t i = 0; i < pieces.size(); ++i) {\n    if (pieces[i].empty()) continue;\n"
      "    out->push_back(vocab_.at(pieces[i]));  // 0x7FFF\n}\n",
      1 << 20);
}

std::string random_unicode() {
  std::mt19937 rng(1);
  std::string s;
  while (s.size() < (1 << 20)) {
    uint32_t cp = rng() % 0x30000;
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (rng() % 2) cp = 0x20 + rng() % 0x5F;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

void run_encode(benchmark::State& state, const std::string& text, bool special) {
  const auto& t = tok();
  std::size_t n = 0;
  for (auto _ : state) {
    auto ids = t.encode(text, special);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

void BM_EncodeEnglish(benchmark::State& s) {
  static const std::string t = english();
  run_encode(s, t, false);
}
void BM_EncodeChinese(benchmark::State& s) {
  static const std::string t = chinese();
  run_encode(s, t, false);
}
void BM_EncodeCode(benchmark::State& s) {
  static const std::string t = code();
  run_encode(s, t, false);
}
void BM_EncodeRandomUnicode(benchmark::State& s) {
  static const std::string t = random_unicode();
  run_encode(s, t, false);
}
void BM_EncodeSpecialMode(benchmark::State& s) {
  static const std::string t =
      repeat_to("<｜User｜>Hello there, how are you?<｜Assistant｜><think>", 1 << 20);
  run_encode(s, t, true);
}
void BM_EncodeFile(benchmark::State& s) {
  static const std::string t = [] {
    std::ifstream f(g_text_path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  run_encode(s, t, false);
}

void BM_DecodeIncremental(benchmark::State& state) {
  static const std::string text = english();
  const auto& t = tok();
  const auto ids = t.encode(text);
  for (auto _ : state) {
    cedar::text::IncrementalDecoder dec(t);
    std::size_t n = 0;
    for (int32_t id : ids) n += dec.push(id).size();
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}

void BM_Load(benchmark::State& state) {
  for (auto _ : state) {
    auto t = cedar::text::Tokenizer::load(g_tokenizer_path);
    benchmark::DoNotOptimize(t.vocab_size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--tokenizer") && i + 1 < argc) {
      g_tokenizer_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--text") && i + 1 < argc) {
      g_text_path = argv[++i];
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (g_tokenizer_path.empty()) {
    std::fprintf(stderr, "usage: %s --tokenizer tokenizer.json [--text FILE] [benchmark flags]\n",
                 argv[0]);
    return 2;
  }
  benchmark::RegisterBenchmark("encode/english", BM_EncodeEnglish)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("encode/chinese", BM_EncodeChinese)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("encode/code", BM_EncodeCode)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("encode/random_unicode", BM_EncodeRandomUnicode)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("encode/special_mode", BM_EncodeSpecialMode)
      ->Unit(benchmark::kMillisecond);
  if (!g_text_path.empty())
    benchmark::RegisterBenchmark("encode/file", BM_EncodeFile)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("decode/incremental", BM_DecodeIncremental)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("load", BM_Load)->Unit(benchmark::kMillisecond)->Iterations(3);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
