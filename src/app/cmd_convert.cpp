// cedar convert --from MODEL --to FILE.gguf [--type bf16|q8_0|q4_k|q2_k|iq2_xxs] [--dialect a|ds4]
// [--split-max-tensors N]: a model (a release-layout directory, or a GGUF file) written as a GGUF
// of dialect A (the llama.cpp converter's layout, ../shared/spec/v41-gguf.md §3) or B (ds4's, §4)
// (model/gguf_convert.h), with the tokenizer keys of its tokenizer and the Engram token map cedar
// builds from it. `bf16` is lossless.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "base/args.h"
#include "base/progress.h"
#include "model/checkpoint.h"
#include "model/gguf_convert.h"
#include "text/engram_token_map.h"
#include "text/tokenizer.h"

namespace cedar::app {

int cmd_convert(int argc, char** argv) {
  Args args("convert",
            {{"from", "m", true, "the model: a directory in the release layout, or a GGUF file"},
             {"to", "o", true, "GGUF file to write"},
             {"type", "", true,
              "bf16 (lossless; the default), q8_0 (FP8 weights and the Engram table as Q8_0, "
              "as llama.cpp's staging file), q4_k (those and the routed experts as Q4_K), "
              "q3_k_m (as Q3_K, the experts' down projections Q5_K in layers 0-1 and Q4_K "
              "after, the head Q6_K), q2_k (as Q2_K, the experts' down projections Q3_K), "
              "iq2_xxs (ds4's Q2 recipe: the experts' gate/up IQ2_XXS, down Q2_K, the rest of "
              "q8_0) or iq1_s (the experts' gate/up IQ1_S, down IQ1_M, the rest of q8_0)"},
             {"dialect", "", true,
              "a (the llama.cpp converter's layout; the default) or ds4 (antirez/ds4's: the "
              "config as JSON, native Engram rows, llama.cpp's tokenizer keys only)"},
             {"split-max-tensors", "", true,
              "write shards of at most N tensors (FILE-00001-of-0000K.gguf ..., as llama.cpp's "
              "gguf-split does)"},
             {"ggml-tokenizer-only", "", false,
              "write only llama.cpp's tokenizer keys, not the whole tokenizer.json "
              "(tokenizer.huggingface.json), as llama.cpp's converter does"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  const std::string from = args.require("from"), to = args.require("to");
  GgufWriteOptions opt;
  const std::string type = args.get("type", "bf16");
  opt.type = parse_gguf_write_type(type);  // before the model is opened
  const std::string dialect = args.get("dialect", "a");
  if (dialect != "a" && dialect != "ds4")
    throw std::runtime_error("--dialect " + dialect + ": a or ds4");
  opt.dialect = dialect == "ds4" ? gguf::Dialect::kB : gguf::Dialect::kA;
  // the release tensors themselves: GGUF block weights re-encoded, not left in place
  const auto ck = Checkpoint::open(from, {.blocks_in_place = false});
  const std::string tok_json = ck->tokenizer_json();
  GgufTokenizerKeys keys = tokenizer_keys(tok_json, ck->config().vocab_size, from);
  if (!ck->config().engram_layer_ids.empty())
    keys.engram_map =
        text::build_engram_token_map(text::Tokenizer::from_json_text(tok_json, from)).map;
  if (args.has("ggml-tokenizer-only")) keys.hf_json.clear();
  if (args.has("split-max-tensors")) {
    const long long split = args.get_int("split-max-tensors", 0);
    if (split < 1) throw std::runtime_error("--split-max-tensors must be a positive integer");
    opt.split_max_tensors = size_t(split);
  }
  // Progress: a bar on a terminal; in a log, a line every 5% (a release takes an hour or more).
  std::optional<ProgressBar> bar;  // made at the first tensor, when the total is known
  int logged = -5;
  const auto t0 = std::chrono::steady_clock::now();
  opt.progress = [&](uint64_t done, uint64_t total) {
    if (!bar) bar.emplace("convert", int64_t(total >> 20), "MiB");
    if (bar->enabled()) return bar->update(int64_t(done >> 20));
    const int pct = total ? int(100 * done / total) : 100;
    if (pct < logged + 5 && done != total) return;
    logged = pct;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "cedar convert: %d%% (%.2f of %.2f GiB written, %.0f s)\n", pct,
                 double(done) / double(1ull << 30), double(total) / double(1ull << 30), s);
  };
  const std::vector<std::string> written = write_gguf(*ck, keys, to, opt);
  if (bar) bar->finish();
  for (const std::string& p : written)
    std::printf("wrote %s (dialect %s, %s) from %s\n", p.c_str(), dialect == "ds4" ? "B" : "A",
                type.c_str(), from.c_str());
  return 0;
}

}  // namespace cedar::app
