// `mpirun -np N cedar_ranks_parity MODEL_DIR CUTS`: the logits of a model split into N pipeline
// stages at CUTS (--stage-cuts syntax) equal the one-process logits bit for bit in reference
// mode, call for call: exact one-shot and chunked prompts, CED prompts in open chunks and one
// shot, lone long prompts that rank 0 cuts into pipelined sub-chunks, decode steps, and batches
// mixing all of them (continuous batching), with states released and new ones started between
// them. Rank 0 runs each scenario on the split model and
// on a one-process model of the same checkpoint and compares; the other ranks serve their
// layers. Prints one line per check and exits non-zero on any difference.
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "dist/mpi_link.h"
#include "forward/transformer.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "runtime/model_tokenizer.h"

using namespace cedar;

namespace {

struct Step {  // one item of a batch: which sequence, how many rows, how
  int seq, n;
  PrefillMode mode;
  bool completes;
  LogitsWanted want;
};

class Parity {
 public:
  Parity(const Transformer& split, const Transformer& local, std::vector<int32_t> ids,
         dist::MpiLink& link)
      : split_(split), local_(local), ids_(std::move(ids)), link_(link) {}

  // batch() of one long item, which rank 0 cuts into sub-chunks launched together: also checks
  // that it went round as that many hops
  void cut(const std::string& label, const Step& step) {
    const uint64_t before = link_.hop_traffic()[0].messages;
    batch(label, {step});
    const uint64_t hops = link_.hop_traffic()[0].messages - before;
    const uint64_t want = uint64_t(split_.sub_chunk_count(step.n, step.mode == PrefillMode::kCed));
    if (hops != want)
      fail(label, std::to_string(hops) + " hops at the first cut, not " + std::to_string(want));
    std::printf("%s %s: as %llu sub-chunk(s)\n", hops == want ? "ok" : "FAIL", label.c_str(),
                static_cast<unsigned long long>(hops));
    failed_before_ = failed_;
  }

  // Runs one batch on both models (sequences by index, created on first use) and compares the
  // logits and results of every item.
  void batch(const std::string& label, const std::vector<Step>& steps) {
    const int64_t V = split_.config().vocab_size;
    std::vector<BatchItem> a(steps.size()), b(steps.size());
    std::vector<std::vector<float>> la(steps.size()), lb(steps.size());
    for (const Step& s : steps)  // every state first: the items point into the vectors
      while (int(sa_.size()) <= s.seq) {
        sa_.push_back(split_.new_state());
        sb_.push_back(local_.new_state());
      }
    for (size_t k = 0; k < steps.size(); ++k) {
      const Step& s = steps[k];
      const int64_t p0 = sa_[size_t(s.seq)].n_tokens;
      for (auto* it : {&a[k], &b[k]}) {
        it->ids = ids_.data() + (p0 + 97 * s.seq) % 200;  // each sequence its own text
        it->n = s.n;
        it->first_pos = p0;
        it->opt.mode = s.mode;
        it->opt.completes_prompt = s.completes;
        it->opt.logits = s.want;
      }
      a[k].state = &sa_[size_t(s.seq)];
      b[k].state = &sb_[size_t(s.seq)];
      // kReplay may return up to a window of rows before the call's own
      const size_t rows = size_t(s.n + split_.config().sliding_window);
      la[k].assign(rows * size_t(V), 0.0f);
      lb[k].assign(rows * size_t(V), 1.0f);
      a[k].logits = la[k].data();
      b[k].logits = lb[k].data();
    }
    split_.forward_batch(a);
    local_.forward_batch(b);
    for (size_t k = 0; k < steps.size(); ++k) {
      if (a[k].error || b[k].error) {
        fail(label, "item " + std::to_string(k) + " refused");
        continue;
      }
      const ForwardResult &ra = a[k].result, &rb = b[k].result;
      const size_t rows = size_t(ra.logits_rows) * size_t(V);
      if (ra.logits_rows != rb.logits_rows || ra.logits_first_pos != rb.logits_first_pos ||
          ra.decoder_rows != rb.decoder_rows || ra.replay_start != rb.replay_start)
        fail(label, "item " + std::to_string(k) + ": results differ");
      else if (std::memcmp(la[k].data(), lb[k].data(), rows * sizeof(float)) != 0)
        fail(label, "item " + std::to_string(k) + ": logits differ");
      else
        ++passed_;
    }
    std::printf("%s %s\n", failed_ == failed_before_ ? "ok" : "FAIL", label.c_str());
    failed_before_ = failed_;
  }
  void copy(int from, int to) {  // a copy of a sequence's state takes index `to`
    while (int(sa_.size()) <= to) {
      sa_.push_back(split_.new_state());
      sb_.push_back(local_.new_state());
    }
    sa_[size_t(to)] = sa_[size_t(from)];
    sb_[size_t(to)] = sb_[size_t(from)];
  }
  void release(int seq) {  // the sequence's state goes; a new one takes its index
    sa_[size_t(seq)] = split_.new_state();
    sb_[size_t(seq)] = local_.new_state();
  }
  int failed() const { return failed_; }
  int passed() const { return passed_; }

 private:
  void fail(const std::string& label, const std::string& why) {
    ++failed_;
    std::printf("  %s: %s\n", label.c_str(), why.c_str());
  }
  const Transformer &split_, &local_;
  std::vector<int32_t> ids_;
  dist::MpiLink& link_;
  std::vector<SequenceState> sa_, sb_;
  int failed_ = 0, failed_before_ = 0, passed_ = 0;
};

void scenarios(Parity& p) {
  const auto E = PrefillMode::kExact, C = PrefillMode::kCed;
  const auto All = LogitsWanted::kAll, Last = LogitsWanted::kLast, Rep = LogitsWanted::kReplay;
  const auto None = LogitsWanted::kNone;
  p.batch("exact one-shot", {{0, 150, E, true, All}});
  for (int i = 0; i < 3; ++i) p.batch("exact decode", {{0, 1, E, true, Last}});
  p.batch("exact chunk (splits a ratio-2 group)", {{1, 37, E, true, All}});
  p.batch("exact chunk", {{1, 64, E, true, All}});
  p.batch("CED open chunk", {{2, 90, C, false, None}});
  p.batch("CED open chunk", {{2, 90, C, false, None}});
  p.batch("CED completing chunk (truncated replay)", {{2, 40, C, true, Rep}});
  for (int i = 0; i < 3; ++i) p.batch("CED decode", {{2, 1, C, true, Last}});
  p.batch("CED one-shot", {{3, 100, C, true, Rep}});
  // a lone long prompt in sub-chunks (pipelined) = one shot
  p.cut("exact prompt, last row", {8, 190, E, true, Last});
  p.batch("exact decode after it", {{8, 1, E, true, Last}});
  p.cut("CED prompt, decoder rows (truncated window)", {9, 200, C, true, Rep});
  p.cut("CED open chunk", {10, 150, C, false, None});
  p.cut("CED completing chunk", {10, 130, C, true, Last});
  p.batch("CED decode after them", {{9, 1, C, true, Last}, {10, 1, C, true, Last}});
  p.release(0);
  p.release(1);
  p.batch("batch: prefills of new states, a decode, an open chunk", {{0, 60, E, true, All},
                                                                     {1, 50, C, false, None},
                                                                     {3, 1, C, true, Last},
                                                                     {4, 30, C, true, Last}});
  p.batch(
      "batch: decodes, a completing chunk",
      {{0, 1, E, true, Last}, {1, 30, C, true, Rep}, {3, 1, C, true, Last}, {2, 1, E, true, Last}});
  p.copy(0, 5);
  p.copy(5, 6);  // a copy of a copy that has not run yet
  p.batch("batch: copies of a state beside it",
          {{0, 1, E, true, Last}, {5, 1, E, true, Last}, {6, 3, C, true, Last}});
  p.copy(1, 7);
  p.batch("an original moves on before its copy runs", {{1, 1, C, true, Last}});
  p.batch("the copy runs from the copied position", {{7, 2, C, true, Last}, {1, 1, C, true, Last}});
  for (int i = 0; i < 2; ++i)
    p.batch("batch: decodes", {{0, 1, E, true, Last},
                               {1, 1, C, true, Last},
                               {2, 1, C, true, Last},
                               {3, 1, E, true, Last},
                               {4, 1, C, true, Last}});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mpirun -np N cedar_ranks_parity MODEL_DIR CUTS\n");
    return 2;
  }
  try {
    dist::MpiLink link(60);
    auto ckpt = Checkpoint::open(argv[1]);
    const ModelConfig& cfg = ckpt->config();
    std::vector<int32_t> token_map;
    if (!cfg.engram_layer_ids.empty())
      token_map = runtime::engram_token_map(*ckpt, runtime::load_tokenizer(*ckpt));
    const KernelTable& ref = choose_kernels("ref");
    ThreadPool pool(1);
    Transformer split(*ckpt, ref, pool, token_map);
    split.set_stage(StageSplit::parse(argv[2], cfg.num_hidden_layers, link.size()), &link);
    if (link.rank() > 0) {
      dist::serve_stage(link, split);
      return 0;
    }
    Transformer local(*ckpt, ref, pool, token_map);
    std::mt19937 rng(11);
    std::vector<int32_t> ids(400);
    for (int32_t& id : ids) id = int32_t(rng() % 128000);
    for (int i = 0; i < 10; ++i) ids[size_t(20 + i)] = ids[size_t(i)];  // repeated n-grams
    Parity p(split, local, ids, link);
    scenarios(p);
    std::printf("%d ranks, cuts %s: %d items equal, %d differ\n", link.size(), argv[2], p.passed(),
                p.failed());
    return p.failed() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cedar_ranks_parity: %s\n", e.what());
    return 1;
  }
}
