// Structured output against the JSON Schema Test Suite (and files in its format): a test-only
// tool that tests/server/schema_suite.test.mjs runs and checks with ajv.
//
//   cedar_schema_suite suite FILE... [--samples K] [--max-tokens N] [--threads T]
//     For every schema of the files ([{description, schema, tests: [{data, valid}]}]): whether it
//     compiles (or the refusal), which test instances the matcher accepts (each fed as compact
//     JSON text), and K answers sampled from random logits through the real mask code over the
//     real vocabulary (greedy, biased towards structural tokens so that runs finish). One JSON
//     line per schema on stdout.
//   cedar_schema_suite bench FILE...
//     Mask cost per constrained token for each schema (a bare schema or the suite's format):
//     answers are sampled once, then replayed on a fresh constraint timing every mask(); a mask
//     whose matcher state was seen before in the replay is a cache hit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/token_constraint.h"
#include "text/chat_request.h"
#include "text/json_grammar.h"
#include "text/tokenizer.h"

namespace {

using cedar::runtime::JsonConstraint;
using cedar::runtime::TokenTrie;
using cedar::text::JsonMatcher;
using cedar::text::JsonSchema;
using cedar::text::ojson;

constexpr int32_t kEos = 1;  // <｜end▁of▁sentence｜>

struct Options {
  int samples = 4;
  int max_tokens = 96;
  int threads = 2;
};

struct Vocab {
  const cedar::text::Tokenizer& tok;
  const TokenTrie& trie;
  std::vector<float> structural;  // tokens that end a string (1) or close / separate JSON (0.5)
};

ojson read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ojson::parse(ss.str());
}

struct Sample {
  std::string text;
  std::vector<int32_t> ids;
  bool complete = false;
};

// Greedy over random normal logits plus a per-answer push towards structural tokens.
Sample sample(const Vocab& v, const cedar::text::SchemaNode* root, unsigned seed, int max_tokens) {
  JsonConstraint c(v.trie, v.tok, JsonMatcher(root), {kEos});
  JsonMatcher shadow(root);  // a top-level number may end without a byte after it
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  const float push = 1.5f + float(seed % 4) * 0.8f;
  std::vector<float> logits(size_t(v.trie.vocab_size()));
  Sample s;
  for (int step = 0; step < max_tokens; ++step) {
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = nd(rng) + push * v.structural[i];
    logits[kEos] += 4.0f;  // where the end is allowed, take it
    c.mask(logits);
    const int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (!std::isfinite(logits[size_t(best)])) break;
    if (best == kEos) {
      s.complete = c.complete() || shadow.can_end();
      break;
    }
    c.accept(best);
    s.ids.push_back(best);
    const size_t at = s.text.size();
    v.tok.append_token_bytes(best, &s.text);
    shadow.feed(std::string_view(s.text).substr(at));
  }
  return s;
}

std::string run_group(const Vocab& v, const ojson& g, const std::string& file, size_t index,
                      const Options& o) {
  ojson out = {{"file", file}, {"index", index}, {"description", g.value("description", "")}};
  try {
    const JsonSchema s = JsonSchema::compile_value(g.at("schema"), "schema");
    out["compiled"] = true;
    ojson tests = ojson::array();
    for (const auto& t : g.value("tests", ojson::array())) {
      const std::string text = t.at("data").dump(-1, ' ', false, ojson::error_handler_t::replace);
      JsonMatcher m(s.root());
      const bool accepted = m.feed(text) && m.can_end();
      tests.push_back({{"description", t.value("description", "")},
                       {"valid", t.value("valid", false)},
                       {"accepted", accepted}});
    }
    out["tests"] = tests;
    ojson samples = ojson::array();
    for (int k = 0; k < o.samples; ++k) {
      const Sample r = sample(v, s.root(), unsigned(1000 * index + k + 1), o.max_tokens);
      JsonMatcher m(s.root());  // every answer, complete or cut, is a prefix the schema allows
      samples.push_back(
          {{"text", r.text}, {"complete", r.complete}, {"prefix_ok", m.feed(r.text)}});
    }
    out["samples"] = samples;
  } catch (const cedar::text::RequestError& e) {
    out["compiled"] = false;
    out["error"] = e.what();
  }
  return out.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

int suite(const Vocab& v, const std::vector<std::string>& files, const Options& o) {
  std::vector<std::pair<std::string, size_t>> work;
  std::vector<ojson> docs;
  for (const auto& f : files) docs.push_back(read_json(f));
  std::vector<std::pair<size_t, size_t>> jobs;  // (doc, group)
  for (size_t d = 0; d < docs.size(); ++d)
    for (size_t g = 0; g < docs[d].size(); ++g) jobs.emplace_back(d, g);
  std::vector<std::string> lines(jobs.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next++) < jobs.size();) {
      const auto [d, g] = jobs[j];
      const std::string name = files[d].substr(files[d].find_last_of('/') + 1);
      lines[j] = run_group(v, docs[d][g], name, g, o);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, o.threads); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (const auto& l : lines) std::cout << l << "\n";
  return 0;
}

// ---- bench ------------------------------------------------------------------------------------

int bench(const Vocab& v, const std::vector<std::string>& files, const Options& o) {
  using Clock = std::chrono::steady_clock;
  std::printf("%-28s %7s %6s %10s %10s %10s\n", "schema", "tokens", "hits", "miss ms", "hit ms",
              "ms/token");
  for (const auto& f : files) {
    ojson doc = read_json(f);
    std::vector<std::pair<std::string, ojson>> schemas;
    const std::string name = f.substr(f.find_last_of('/') + 1);
    if (doc.is_array())
      for (size_t i = 0; i < doc.size(); ++i)
        schemas.emplace_back(name + "#" + std::to_string(i), doc[i].at("schema"));
    else
      schemas.emplace_back(name, doc);
    for (const auto& [label, schema] : schemas) {
      const JsonSchema s = JsonSchema::compile_value(schema, "schema");
      // answers sampled once, then each replayed on a fresh constraint (one per request, as in
      // the server): a state seen earlier in the same answer is served from the mask cache
      double cold = 0, hit = 0;
      size_t n_cold = 0, n_hit = 0, tokens = 0;
      std::vector<float> logits(size_t(v.trie.vocab_size()), 0.0f);
      for (int k = 0; k < o.samples; ++k) {
        const Sample a = sample(v, s.root(), unsigned(k + 1), o.max_tokens);
        JsonConstraint c(v.trie, v.tok, JsonMatcher(s.root()), {kEos});
        JsonMatcher shadow(s.root());
        std::set<std::string> seen;
        std::string bytes;
        for (const int32_t id : a.ids) {
          const bool known = !seen.insert(shadow.key()).second;
          const auto t0 = Clock::now();
          c.mask(logits);
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          (known ? hit : cold) += ms;
          ++(known ? n_hit : n_cold);
          ++tokens;
          c.accept(id);
          bytes.clear();
          v.tok.append_token_bytes(id, &bytes);
          shadow.feed(bytes);
        }
      }
      std::printf("%-28s %7zu %6zu %10.2f %10.3f %10.2f\n", label.c_str(), tokens, n_hit,
                  n_cold ? cold / double(n_cold) : 0.0, n_hit ? hit / double(n_hit) : 0.0,
                  tokens ? (cold + hit) / double(tokens) : 0.0);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::string(argv[1]) != "suite" && std::string(argv[1]) != "bench")) {
    std::fprintf(stderr,
                 "usage: %s suite|bench FILE... [--samples K] [--max-tokens N] "
                 "[--threads T]\n",
                 argv[0]);
    return 2;
  }
  Options o;
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--samples" && i + 1 < argc)
      o.samples = std::atoi(argv[++i]);
    else if (a == "--max-tokens" && i + 1 < argc)
      o.max_tokens = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      o.threads = std::atoi(argv[++i]);
    else
      files.push_back(a);
  }
  const auto tok = cedar::text::Tokenizer::load(CEDAR_DEFAULT_TOKENIZER);
  const TokenTrie trie(tok);
  Vocab v{tok, trie, std::vector<float>(size_t(trie.vocab_size()), 0.0f)};
  std::string b;
  for (int32_t id = 0; id < trie.vocab_size(); ++id) {
    if (tok.is_added(id)) continue;
    b.clear();
    tok.append_token_bytes(id, &b);
    if (b.find('"') != std::string::npos)
      v.structural[size_t(id)] = 1.0f;
    else if (b.find_first_of("}],") != std::string::npos)
      v.structural[size_t(id)] = 0.5f;
  }
  return std::string(argv[1]) == "suite" ? suite(v, files, o) : bench(v, files, o);
}
