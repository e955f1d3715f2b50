// Transformer: the V4.1 text model over one sequence's state (NUMERICS §F): embedding, the mHC
// stream of hc copies, Engram before its blocks, the blocks, the final collapse with the last FFN
// pre-mix, the norm and the fp32 head. One forward takes a run of rows at consecutive positions
// (a whole prompt, a prefill chunk or a decode step) against the per-sequence state.
//
// Two prefill modes (docs/FORWARD.md, spec §9):
//  * exact: every layer on every row; every row's result is independent of how the sequence was
//    split into calls (bit-identical to the numpy oracle);
//  * CED (the default of ForwardOptions): the encoder (layers below the candidate source) and the
//    candidate source's global-KV projection on every row; the decoder (candidate source's query
//    side and everything above) only on the last min(window, N) prompt rows, with window
//    attention truncated at the replay start (SWA Bounded Replay, spec §9.4).
// replay() rebuilds the window rings of a state restored without them (prefix-cache hit).
// Immutable after construction; forward() may be called for different states concurrently only
// with distinct thread pools (the kernels themselves are reentrant).
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "forward/block.h"
#include "forward/dspark.h"
#include "forward/engram.h"
#include "forward/linear.h"
#include "forward/stage.h"
#include "forward/vocab_product.h"
#include "forward/weights.h"
#include "model/checkpoint.h"
#include "model/engram_layout.h"
#include "state/sequence_state.h"

namespace cedar {

enum class LogitsWanted {
  kNone,
  kLast,    // [1, vocab]: the call's last row
  kAll,     // [n, vocab]: every row of the call (CED: only when the decoder ran on all of them)
  kReplay,  // [decoder_rows, vocab]: every row the decoder ran in this call (<= window rows;
            // CED prompt completion: the replay rows, which may start before first_pos)
};

enum class PrefillMode { kCed, kExact };

// An image whose span overlaps the rows of a call (docs/VISION.md "Images in the prompt"): where
// the span lies and its aligner rows (encode_image). The call's ids must hold the image
// placeholder at every span position it covers; a span continued from an earlier call must be
// the one the state recorded then.
struct ImageInput {
  ImageSpan span;
  const float* rows = nullptr;  // [n_h * n_w, hidden_size] bf16 values, reading order
};

struct ForwardOptions {
  PrefillMode mode = PrefillMode::kCed;
  // These rows end the prompt (a whole prompt, the last chunk of one, or a decode step). Under
  // CED a call with false is an open chunk: it runs the encoder and the candidate source's
  // projection only, returns no logits, and the prompt stays open until a call with true.
  bool completes_prompt = true;
  LogitsWanted logits = LogitsWanted::kLast;
  // Record the DSpark taps of the rows the decoder ran on and seed the drafter's rings with
  // them (DSpark::seed), so that draft() can follow this call. Ignored on a model without
  // DSpark stages.
  bool dspark_seed = false;
  // Keep an undo log of this call in the state so that SequenceState::rewind can drop its last
  // rows exactly (a speculative verify pass): at most `window` rows, the prompt closed.
  bool keep_undo = false;
  // The images whose spans overlap this call's rows, ascending (empty: a text-only call).
  std::span<const ImageInput> images;
};

struct ForwardResult {
  int64_t logits_first_pos = -1;  // position of logits row 0 (-1: none written)
  int logits_rows = 0;
  int64_t replay_start = -1;  // first position the decoder ran on in this call (-1: it did not)
  int decoder_rows = 0;       // rows the decoder ran on in this call
  bool truncated = false;     // decoder window attention was truncated at replay_start
};

// One sequence's call inside a batched forward (Transformer::forward_batch): the same arguments
// as forward(), the result, and the refusal when this item could not run.
struct BatchItem {
  SequenceState* state = nullptr;
  const int32_t* ids = nullptr;
  int n = 0;
  int64_t first_pos = 0;
  ForwardOptions opt;
  float* logits = nullptr;
  ForwardResult result;      // out
  std::exception_ptr error;  // out: what forward() would have thrown (the state is unchanged)
};

// The stream of a run of rows between layers, for running the stack one layer at a time
// (Transformer::layer_input / run_layer): h [n, hc, D] bf16 values, the pre-mix [n, hc], and the
// Engram hash rows of every Engram layer.
struct LayerIO {
  int n = 0;
  int64_t p0 = 0;
  std::vector<float> h, pre;
  std::vector<std::vector<int64_t>> engram_rows;
};

struct ReleasedStates;  // forward/transformer_stage.cpp

class Transformer {
 public:
  // engram_token_map: token id -> compressed id (text::build_engram_token_map); required when the
  // config has Engram layers. head: how the vocabulary head is kept (forward/vocab_product.h).
  // Throws std::runtime_error naming the tensor/key on a mismatch.
  Transformer(const Checkpoint& ckpt, const KernelTable& kernels, ThreadPool& pool,
              std::vector<int32_t> engram_token_map, HeadType head = HeadType::kStored);
  ~Transformer();

  const ModelConfig& config() const { return cfg_; }
  const ModelWeights& weights() const { return w_; }
  const VocabProduct& head() const { return head_; }
  // From now on the routed experts come from `src` (forward/expert_source.h; nullptr: the
  // mapped weights), with each layer guessing the next one's experts for a prefetch unless
  // `guess` is false (MoE::set_next). Call before any forward; the source must outlive them.
  void set_expert_source(ExpertSource* src, bool guess = true);
  // Likewise for the Engram tables (forward/engram_store.h; nullptr: the mapped tables).
  void set_engram_store(EngramStore* store) { engram_ = store; }
  SequenceState new_state() const { return SequenceState(cfg_); }

  // Pipeline stages (forward/stage.h, docs/DISTRIBUTED.md): from now on this process runs only
  // the layers of link->rank() in `split` and exchanges the rest of every forward through
  // `link`. Rank 0 keeps the embedding and the head, announces each forward_batch to the other
  // ranks and returns its logits; the other ranks run the calls it announces (run_announced).
  // Exact in every mode: the logits equal the one-process ones bit for bit. Not with DSpark
  // seeding, undo logs, images or replay (refused). A batch of several sequences runs as up to
  // one micro-batch per rank, all in flight at once (pipelining); a lone item that wants no
  // logits, the last row or CED's decoder rows runs as sub_chunk_count sub-chunks, likewise
  // (chunked prefill equals one shot). Copies of a state work (the
  // ranks copy their parts at the copy's first forward). Call before any forward; `link` must
  // outlive this. After a failed exchange (a rank died, hung or refused) every later forward
  // throws.
  void set_stage(const StageSplit& split, StageLink* link);
  // How many sub-chunks a lone item of `rows` rows runs as (1: not cut); ced: a CED call.
  int sub_chunk_count(int rows, bool ced) const;
  const StageSplit* stage() const { return link_ ? &split_ : nullptr; }
  // Why the split stopped working ("": it works, or the model is not split). Thread-safe.
  std::string stage_error() const;
  // Ranks > 0: one call announced by rank 0 against the states this rank keeps by id (the
  // call's copies are made, then its released ids dropped; a new id at position 0 starts a
  // state). Throws after taking part in the exchange when the call cannot run here.
  void run_announced(const Call& call, std::map<uint64_t, SequenceState>& states) const;

  // The drafter (nullptr: the checkpoint has no DSpark stages) and one draft cycle after the
  // state's last position with the target's token `anchor` for the next one (DSpark::draft;
  // the state's last forward must have seeded the rings: ForwardOptions::dspark_seed).
  const DSpark* dspark() const { return dspark_.get(); }
  Draft draft(const SequenceState& state, int32_t anchor, bool with_logits = true) const;

  // True when the config has a CED split (a candidate source, no KV source and no Engram layer
  // above/at it); otherwise CED mode runs exactly like exact mode.
  bool has_ced() const { return ced_layer_ >= 0; }
  int ced_layer() const { return ced_layer_; }  // first decoder layer (-1: none)

  // Runs ids[0..n) at positions first_pos .. first_pos+n-1 (first_pos must equal
  // state.n_tokens) and appends them to `state`. Logits are fp32 rows of vocab_size floats; the
  // result says which positions they belong to. Throws std::runtime_error (state unchanged) on an
  // id outside the vocabulary, a position mismatch, an exact call on an open CED prompt, logits
  // asked of an open chunk, kAll that the decoder did not cover, or window rings that do not hold
  // the rows the first query needs (a state restored without its window: call replay() first).
  ForwardResult forward(SequenceState& state, const int32_t* ids, int n, int64_t first_pos,
                        const ForwardOptions& opt, float* logits) const;

  // Several sequences in one pass (continuous batching): every item is what forward() would do
  // with it, bit for bit -- the rows of all items go through the row-wise work together (every
  // GEMM, the MoE, mHC, the head read each weight once for the whole batch) and through the
  // per-sequence work (window ring, compressor, indexer, attention) one sequence at a time.
  // Items may mix decode steps, prefill chunks, open CED chunks and exact calls; they must name
  // distinct states. An item refused by forward()'s checks gets `error` and is left out (state
  // unchanged), the others run. Throws only on a failure during the computation itself.
  void forward_batch(std::span<BatchItem> items) const;

  // The original entry point: EXACT mode, completes the prompt. logits: kAll -> [n, vocab],
  // kLast -> [1, vocab], kNone -> untouched (kReplay -> the last min(window, n) rows).
  void forward(SequenceState& state, const int32_t* ids, int n, int64_t first_pos,
               LogitsWanted want, float* logits) const;

  // SWA Bounded Replay of a restored state (spec §9.4 use 2). `state` holds the global rows of
  // positions [0, h) (h = state.n_tokens) but its window rings are missing or stale. Recomputes
  // positions [s, h), s = max(0, h - window), through ALL layers with window attention truncated
  // at s, filling every window ring, WITHOUT appending or rewriting global rows (indexers score
  // the restored rows). ids: the token ids of positions [ids_first, h) with
  // ids_first <= max(0, s - (engram_max_ngram - 1)) (Engram hashes look back). Also:
  //  * a ratio-2 source whose tail is missing (n_tail != h % 2, e.g. after KvStore::truncate) gets
  //    it recomputed from the replayed attention input (approximate); a present tail is kept;
  //  * an empty engram_history is rebuilt from ids; a non-empty one must match ids (else throws:
  //    the ids are not this state's tokens).
  // Sets state.window_from = s. Returns s. Throws on an open prompt or inconsistent rows.
  int64_t replay(SequenceState& state, std::span<const int32_t> ids, int64_t ids_first) const;

  // Layer-by-layer execution of an exact-mode chunk, with any kernel table: what the per-layer
  // fidelity tests feed the same input to the reference and to a fast table with.
  // layer_input: the embedded rows ids[0..n) at positions p0.. (p0 = state.n_tokens; uses the
  // state's Engram history). run_layer: Engram (where the layer has it) and block l on io with
  // kernels k, reading and writing fp (its state, Top-K lists, candidates) as forward() does.
  // final_logits: collapse, norm and the fp32 head of every row of io. Neither advances
  // state.n_tokens.
  LayerIO layer_input(const int32_t* ids, int n, int64_t p0, const SequenceState& state) const;
  void run_layer(int layer, const KernelTable& k, LayerIO& io, ForwardPass& fp) const;
  void final_logits(const KernelTable& k, const LayerIO& io, float* logits) const;

 private:
  // The mHC stream of a run of rows: h [n, hc, D] (bf16 values) and the pre-mix [n, hc] that
  // the next attention site collapses with.
  struct Stream {
    int n = 0;
    std::vector<float> h, pre;
    Stream(int rows, int hc, int D) : n(rows), h(size_t(rows) * hc * D), pre(size_t(rows) * hc) {}
  };
  // The plan of one item: which rows the encoder (stage 1: layers below the CED split) and the
  // decoder (stage 2: the split and up) run on, and the passes they run with.
  struct Member {
    BatchItem* it = nullptr;
    bool ced = false;                  // CED mode on a model with a CED split
    bool completes = false;            // the call completes the prompt (always for exact calls)
    int64_t s_rep = 0;                 // first decoder position (exact: first_pos)
    bool truncated = false;            // decoder window attention truncated at s_rep
    std::unique_ptr<ForwardPass> fp;   // stage 1 (exact calls: both stages, one Top-K table)
    std::unique_ptr<ForwardPass> fd;   // stage 2 of a completing CED call
    int row1 = 0;                      // first row in the stage-1 stream
    int row2 = -1, m2 = 0;             // rows in the stage-2 stream (-1: no decoder rows)
    std::vector<float> taps;           // DSpark taps of the decoder rows (positions s_rep ..)
    std::vector<int64_t> rows_before;  // pipeline stages: every layer's compressed rows at start
  };
  void plan(BatchItem& it, Member& m) const;  // forward()'s checks; throws, changes nothing
  void embed(const int32_t* ids, int n, Stream& s, int row0 = 0) const;
  // the rows of image spans among positions p0 .. p0+n-1 of stream rows row0.. overwritten with
  // the delimiters and the aligner rows
  void embed_images(std::span<const ImageInput> images, int64_t p0, int n, Stream& s,
                    int row0) const;
  void check_images(const BatchItem& it) const;
  // the Engram ids of rows p0 .. p0+n-1 (-1 for image positions: DEAD)
  std::vector<int32_t> mapped_ids(const SequenceState& st, const int32_t* ids, int n,
                                  int64_t p0) const;
  void engram_rows(const int32_t* mapped, int n, int64_t p0, const int32_t* hist_mapped, int hist,
                   std::vector<std::vector<int64_t>>& rows) const;
  // final collapse + norm + fp32 head of m contiguous rows h [m, hc, D], pre [m, hc]; the
  // normalised rows go to xn [m, D] (for dumps)
  void head(const Ctx& ctx, const float* h, const float* pre, int m, float* logits,
            std::vector<float>& xn) const;
  void check_ids(const int32_t* ids, int n) const;
  void check_window(const SequenceState& st, int64_t first_query, int64_t trunc) const;
  bool split() const { return link_ != nullptr; }
  bool owns(int l) const { return !link_ || (l >= lo_ && l < hi_); }
  bool holds(int l) const { return !link_ || holds_layer(cfg_, lo_, hi_, l); }
  // A row range of the final stream whose logits an item wants.
  struct Want {
    Member* m;
    int first, rows;  // in the member's decoder rows
  };
  // A call's wanted rows after the stack, before the head (rank 0 of a split model launches
  // every micro-batch of a batch before it finishes the first).
  struct Tail {
    std::vector<Want> wants;
    Stream d{0, 0, 0};
  };
  // the rows of a validated batch through the stack; stage_step: the split's exchange of this
  // call (0 nothing yet, 1 received from the rank before, 2 handed on). defer (rank 0 of a
  // split model): the call's tail goes there, for finish(), instead of through the head now.
  void run_members(std::span<Member> mem, int& stage_step, Tail* defer) const;
  void heads(const Ctx& ctx, Stream& d, std::span<const Want> wants) const;
  // the split's exchange of one call (transformer_stage.cpp). fail_call: this rank cannot run
  // the call: it takes part in the exchange with an error (rank 0: waits for it to come round)
  // and throws `why`.
  [[noreturn]] void fail_call(const std::string& why, int stage_step) const;
  // the split's forward_batch after the checks (transformer_stage.cpp)
  void run_split(std::span<BatchItem> items, std::vector<Member>& mem) const;
  void check_stage_item(const BatchItem& it) const;  // plan()'s checks of a split model
  void name_states(std::span<Member> mem) const;     // rank 0: ids for new states and copies
  void announce(std::span<Member> mem, bool first) const;
  void send_hop(int cut, const Stream& s, std::span<Member> mem, bool decoder) const;
  void recv_hop(int cut, Stream& s, std::span<Member> mem, bool decoder) const;
  std::vector<HopMember> hop_members(std::span<Member> mem, bool decoder) const;
  void check_hop(WireReader& r) const;  // a hop's status; throws what another rank reported
  std::string name_error(const std::exception& e) const;  // "rank N: ..." unless it names one
  void set_broken(const std::string& why) const;          // the first failure stays
  // rank 0: contiguous groups of about equal rows, at most `most`
  std::vector<std::span<Member>> micro_batches(std::span<Member> mem, int most) const;
  // rank 0: a lone item as sub_chunk_count sub-chunks (empty: not cut, see set_stage), and the
  // item's result after them
  std::vector<BatchItem> sub_chunks(const Member& m) const;
  void join_sub_chunks(BatchItem& it, const std::vector<BatchItem>& subs) const;
  void send_final(const Stream& d, std::span<const Want> wants) const;  // the last rank's
  void finish(Tail& t) const;  // rank 0: receives a call's wanted rows and runs the head

  const ModelConfig& cfg_;
  const KernelTable& k_;
  ThreadPool& pool_;
  ModelWeights w_;
  VocabProduct head_;  // w_.lm_head
  ExpertSource* experts_ = nullptr;
  EngramStore* engram_ = nullptr;
  EngramLayout layout_;
  std::vector<int32_t> token_map_;
  int32_t engram_pad_ = 0;
  int ced_layer_ = -1;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<std::unique_ptr<Engram>> engrams_;  // per layer, null where none
  std::unique_ptr<DSpark> dspark_;
  std::vector<uint8_t> is_tap_;  // per layer: a DSpark target layer
  // pipeline stages: this rank's layers [lo_, hi_), the link (null: one process)
  StageSplit split_;
  StageLink* link_ = nullptr;
  int rank_ = 0, lo_ = 0, hi_ = 0;
  mutable uint64_t next_state_id_ = 1;
  std::shared_ptr<ReleasedStates> released_;
  mutable std::vector<Call::Copy> copies_;  // announced with the next call
  mutable std::mutex broken_mu_;            // broken_ is read by other threads (stage_error)
  mutable std::string broken_;              // why the split stopped working ("": it works)
  Dumper dump_;
};

}  // namespace cedar
