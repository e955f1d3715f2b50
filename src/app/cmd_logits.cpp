// `cedar logits --model DIR --ids 0,5,7 --out F.npy [--chunk N | --decode] [--kernels ref]
// [--ids-file F] [--threads T]`: runs the prompt through the model and writes the FP32 logits of
// every position as a .npy [T, vocab]. --chunk N feeds the prompt N tokens per forward call,
// --decode one token per call; every split gives bit-identical logits (docs/FORWARD.md).
// --draft-out DIR [--anchor ID]: the forwards also seed the DSpark rings, then one draft cycle
// after the prompt (anchor: the target's argmax at the last position) writes DIR/tokens.npy
// (int32 [block + 1]), DIR/logits.npy (float32 [block, vocab]) and DIR/confidence.npy
// (float32 [block]) -- what tools/reference/draft.py writes. --image A.png,B.jpg: each image
// takes one image placeholder of the ids (in order), which expands to its span; T counts the
// expanded prompt (tools/reference/logits.py --image is the oracle).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/load_model.h"
#include "app/ranks.h"
#include "app/read_file.h"
#include "base/args.h"
#include "base/npy.h"
#include "base/thread_pool.h"
#include "forward/engram_store.h"
#include "forward/expert_cache.h"
#include "forward/transformer.h"
#include "forward/vision_tower.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "runtime/model_tokenizer.h"
#include "runtime/prompt_images.h"

namespace cedar::app {

namespace {

std::vector<int32_t> parse_ids(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::string tok;
  auto flush = [&] {
    if (tok.empty()) return;
    for (char c : tok)
      if (c < '0' || c > '9') throw std::runtime_error(what + ": bad token id '" + tok + "'");
    if (tok.size() > 10) throw std::runtime_error(what + ": token id '" + tok + "' is too large");
    const long long v = std::stoll(tok);
    if (v > INT32_MAX) throw std::runtime_error(what + ": token id '" + tok + "' is too large");
    ids.push_back(int32_t(v));
    tok.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')
      flush();
    else
      tok += c;
  }
  flush();
  if (ids.empty()) throw std::runtime_error(what + ": no token ids");
  return ids;
}

}  // namespace

int cmd_logits(int argc, char** argv) {
  Args args("logits",
            with_rank_options(
                {{"model", "m", true, "model directory or GGUF file (required)"},
                 {"ids", "", true, "comma-separated token ids"},
                 {"ids-file", "", true, "file of comma/whitespace-separated token ids"},
                 {"out", "o", true, "output .npy, float32 [T, vocab] (required)"},
                 {"chunk", "", true, "feed the prompt N tokens per forward call"},
                 {"decode", "", false, "feed the prompt one token per forward call"},
                 {"draft-out", "", true, "also run one DSpark draft cycle, into DIR"},
                 {"anchor", "", true, "the draft's anchor token (default: argmax)"},
                 {"kernels", "", true, kKernelsHelp},
                 {"gguf-requant", "", false, kGgufRequantHelp},
                 {"head-type", "", true, kHeadTypeHelp},
                 {"image", "", true,
                  "comma-separated image files, one per image placeholder of the ids (each "
                  "expands to its image's span)"},
                 {"expert-slots", "", true,
                  "read the routed experts from the shards into an N-slot cache instead of "
                  "mapping them (tests of the expert cache)"},
                 {"expert-policy", "", true, "--expert-slots eviction: lfu (default) or lru"},
                 {"no-expert-guess", "", false,
                  "--expert-slots: no prefetch of each next layer's guessed experts"},
                 {"engram-cache", "", true,
                  "read the Engram tables' rows from the shards through a row cache of "
                  "this many KiB instead of mapping them (tests of the Engram store)"},
                 {"threads", "t", true, "worker threads (default: all cores)"}}));
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  const std::string dir = args.require("model");
  const std::string out_path = args.require("out");
  std::vector<int32_t> ids;
  if (args.has("ids") == args.has("ids-file"))
    throw std::runtime_error("give exactly one of --ids and --ids-file");
  if (args.has("ids")) {
    ids = parse_ids(args.get("ids"), "--ids");
  } else {
    const std::string f = args.get("ids-file");
    std::ifstream in(f);
    if (!in) throw std::runtime_error("--ids-file " + f + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    ids = parse_ids(ss.str(), "--ids-file " + f);
  }
  if (args.has("chunk") && args.has("decode"))
    throw std::runtime_error("--chunk and --decode are exclusive");
  int64_t chunk = int64_t(ids.size());
  if (args.has("chunk")) {
    chunk = args.get_int("chunk", 0);
    if (chunk <= 0) throw std::runtime_error("--chunk must be a positive integer");
  }
  if (args.has("decode")) chunk = 1;
  const KernelTable& kernels = choose_kernels(args.get("kernels", ""));
  const HeadType head = parse_head_type(args.get("head-type", "stored"));
  const int threads = threads_option(args, "cedar logits");

  auto ckpt = Checkpoint::open(dir, {.blocks_in_place = !args.has("gguf-requant")});
  const ModelConfig& cfg = ckpt->config();
  for (int32_t id : ids)
    if (id >= cfg.vocab_size)
      throw std::runtime_error("token id " + std::to_string(id) +
                               " is outside the vocabulary (vocab_size " +
                               std::to_string(cfg.vocab_size) + ")");
  std::vector<int32_t> token_map;
  if (!cfg.engram_layer_ids.empty())
    token_map = runtime::engram_token_map(*ckpt, runtime::load_tokenizer(*ckpt));
  ThreadPool pool(threads);
  Transformer model(*ckpt, kernels, pool, std::move(token_map), head);
  std::unique_ptr<ExpertCache> experts;
  if (args.has("expert-slots")) {
    const long long slots = args.get_int("expert-slots", 0);
    if (slots < 1 || slots > (1 << 30))
      throw std::runtime_error("--expert-slots must be a positive integer");
    experts = std::make_unique<ExpertCache>(*ckpt, model.weights(), SIZE_MAX / 2, 1, int(slots),
                                            eviction_policy_from(args.get("expert-policy", "lfu")));
    model.set_expert_source(experts.get(), !args.has("no-expert-guess"));
  }
  std::unique_ptr<EngramStore> engram;
  if (args.has("engram-cache")) {
    const long long kib = args.get_int("engram-cache", 0);
    if (kib < 1 || kib > (1ll << 30))
      throw std::runtime_error("--engram-cache must be a positive number of KiB");
    engram = std::make_unique<EngramStore>(*ckpt, cfg, model.weights(), size_t(kib) << 10);
    model.set_engram_store(engram.get());
  }
  auto ranks = Ranks::start(args, dir, *ckpt, kernels, version_string());
  if (ranks) {
    if (!ranks->attach(model)) return 0;  // another rank: served its layers
    std::fprintf(stderr, "cedar logits: %s\n", ranks->describe(cfg).c_str());
  }
  SequenceState st = model.new_state();
  // images: each takes a placeholder of the ids, which expands to its span
  std::vector<std::string> image_files;
  for (std::stringstream ss(args.get("image", "")); ss.good();) {
    std::string f;
    std::getline(ss, f, ',');
    if (!f.empty()) image_files.push_back(f);
  }
  std::vector<vision::ImagePlan> plans;
  std::vector<std::vector<float>> rows;
  for (const std::string& f : image_files) {
    const std::string bytes = read_file(f, "image");
    const auto patches = preprocess_image_file(
        cfg, std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    plans.push_back(patches->plan);
    rows.push_back(encode_image(Ctx{kernels, pool}, cfg, model.weights().vision, *patches));
  }
  std::vector<ImageInput> images;
  if (!plans.empty()) {
    ExpandedPrompt e = expand_images(ids, int32_t(cfg.image_token_id), plans);
    ids = std::move(e.ids);
    for (size_t k = 0; k < e.spans.size(); ++k) images.push_back({e.spans[k], rows[k].data()});
  }

  const int64_t T = int64_t(ids.size()), V = cfg.vocab_size;
  NpyWriter out(out_path, {T, V});
  const bool draft = args.has("draft-out");
  if (draft && !model.dspark())
    throw std::runtime_error("--draft-out: the model has no DSpark stages");
  ForwardOptions opt;
  opt.mode = PrefillMode::kExact;
  opt.logits = LogitsWanted::kAll;
  opt.dspark_seed = draft;
  std::vector<float> logits;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t p = 0; p < T; p += chunk) {
    const int n = int(std::min<int64_t>(chunk, T - p));
    logits.resize(size_t(n) * size_t(V));
    opt.images = images_in(images, p, n);
    model.forward(st, ids.data() + p, n, p, opt, logits.data());
    out.write(logits.data(), logits.size() * sizeof(float));
  }
  out.close();
  if (draft) {
    const float* last = logits.data() + logits.size() - size_t(V);
    int32_t anchor = int32_t(std::max_element(last, last + V) - last);  // the first maximum
    if (args.has("anchor")) {
      const long long a = args.get_int("anchor", -1);
      if (a < 0 || a >= V) throw std::runtime_error("--anchor is outside the vocabulary");
      anchor = int32_t(a);
    }
    const Draft d = model.draft(st, anchor);
    const std::string ddir = args.get("draft-out");
    std::filesystem::create_directories(ddir);
    const int64_t B = int64_t(d.confidence.size());
    write_npy_i32(ddir + "/tokens.npy", d.tokens.data(), {B + 1});
    write_npy_f32(ddir + "/logits.npy", d.logits.data(), {B, V});
    write_npy_f32(ddir + "/confidence.npy", d.confidence.data(), {B});
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "cedar logits: %lld tokens in %.2f s (%.1f tok/s, %d threads)\n",
               (long long)T, secs, double(T) / secs, pool.size());
  if (ranks) std::fprintf(stderr, "cedar logits: %s\n", ranks->traffic(T).c_str());
  if (experts) {
    const ExpertCacheStats s = experts->stats();
    std::fprintf(
        stderr,
        "cedar logits: expert cache %d slots: %lld lookups, hit rate %.3f, %lld "
        "evictions, %lld prefetched (%lld guesses, %lld unused), %.1f MiB read in %lld reads, "
        "%.3f s waiting\n",
        experts->capacity(), (long long)s.lookups, s.hit_rate(), (long long)s.evictions,
        (long long)s.prefetched, (long long)s.guessed, (long long)s.guess_unused,
        double(s.bytes_read) / double(1 << 20), (long long)s.reads, s.wait_seconds);
  }
  if (engram) {
    const EngramStoreStats s = engram->stats();
    std::fprintf(stderr,
                 "cedar logits: Engram store: %lld row lookups, %lld hits, %lld prefetched, %lld "
                 "reads\n",
                 (long long)s.lookups, (long long)s.hits, (long long)s.prefetched,
                 (long long)s.reads);
  }
  return 0;
}

}  // namespace cedar::app
