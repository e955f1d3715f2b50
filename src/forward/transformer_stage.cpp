// Transformer split into pipeline stages (forward/stage.h): the exchange of one forward between
// the ranks. Every call goes round a ring: rank 0 announces it to every rank, then each rank
// receives the stream at its first layer from the rank before (rank 0: its embedding), runs its
// layers and hands the stream on; the last rank hands the rows whose logits are wanted back to
// rank 0. A rank that cannot run its part sends an error round instead, so that no rank waits
// for it; the error reaches rank 0, which throws it.
#include <algorithm>
#include <deque>
#include <mutex>

#include "forward/transformer.h"

namespace cedar {

// The ids of states whose last copy went away on rank 0: sent with the next call, so that the
// other ranks drop their parts. Shared by the Transformer and the states' handles, which may
// outlive it and die on any thread.
struct ReleasedStates {
  std::mutex mu;
  std::vector<uint64_t> ids;
};

namespace {

struct StageHandle {
  uint64_t id = 0;
  int64_t at = 0;  // the position the ranks hold the state at
  std::shared_ptr<ReleasedStates> released;
  ~StageHandle() {
    std::lock_guard<std::mutex> g(released->mu);
    released->ids.push_back(id);
  }
};

StageHandle* handle_of(const std::shared_ptr<void>& h) {
  return static_cast<StageHandle*>(h.get());
}

void put_ok(WireWriter& w) { w.put<uint8_t>(1); }

}  // namespace

void Transformer::set_stage(const StageSplit& split, StageLink* link) {
  if (split.layers() != cfg_.num_hidden_layers)
    throw std::runtime_error("stage split of " + std::to_string(split.layers()) +
                             " layers for a model of " + std::to_string(cfg_.num_hidden_layers));
  if (!link || link->rank() < 0 || link->rank() >= split.ranks())
    throw std::runtime_error("stage split: this process's rank is not one of the split's " +
                             std::to_string(split.ranks()));
  split_ = split;
  link_ = split.ranks() > 1 ? link : nullptr;
  rank_ = link->rank();
  lo_ = split.begin(rank_);
  hi_ = split.end(rank_);
  released_ = std::make_shared<ReleasedStates>();
}

void Transformer::check_hop(WireReader& r) const {
  if (r.get<uint8_t>() == 1) return;
  throw RemoteStageError(r.get_string());
}

std::vector<HopMember> Transformer::hop_members(std::span<Member> mem, bool decoder) const {
  std::vector<HopMember> h;
  for (Member& m : mem) {
    ForwardPass* fp = m.fp.get();
    if (decoder) fp = m.row2 < 0 ? nullptr : m.fd ? m.fd.get() : m.fp.get();
    h.push_back({m.it->state, &m.rows_before, fp, m.it->first_pos + m.it->n});
  }
  return h;
}

void Transformer::announce(std::span<Member> mem, bool first) const {
  Call call;
  if (first) {
    std::lock_guard<std::mutex> g(released_->mu);
    call.released.swap(released_->ids);
  }
  for (Member& m : mem) {
    const SequenceState& st = *m.it->state;
    const BatchItem& it = *m.it;
    CallItem ci;
    ci.state_id = handle_of(st.stage.handle)->id;
    ci.first_pos = it.first_pos;
    ci.ids.assign(it.ids, it.ids + it.n);
    ci.mode = uint8_t(it.opt.mode);
    ci.completes = it.opt.completes_prompt;
    ci.logits = uint8_t(it.opt.logits);
    call.items.push_back(std::move(ci));
  }
  call.copies.swap(copies_);
  link_->announce(call);
}

void Transformer::name_states(std::span<Member> mem) const {
  // Every copy made since the last call is made on the ranks before this batch's first
  // micro-batch runs (a later micro-batch may hold the copy of a state an earlier one moves on).
  // A state with copies that have not run yet moves on under a new id: its old id, held by the
  // copies, names the ranks' snapshot of it until the last copy has run.
  auto fresh = [&](SequenceState& st, uint64_t from) {
    auto h = std::make_shared<StageHandle>();
    h->id = next_state_id_++;
    h->at = st.n_tokens;
    h->released = released_;
    if (from) copies_.push_back({h->id, from});
    st.stage.handle = h;
  };
  for (Member& m : mem) {
    SequenceState& st = *m.it->state;
    if (!st.stage.handle) {
      fresh(st, st.stage.parent ? handle_of(st.stage.parent)->id : 0);
      st.stage.parent.reset();
    } else if (st.stage.handle.use_count() > 1) {
      fresh(st, handle_of(st.stage.handle)->id);
    }
  }
}

void Transformer::send_hop(int cut, const Stream& s, std::span<Member> mem, bool decoder) const {
  WireWriter w;
  put_ok(w);
  put_stream(w, cfg_, s.h.data(), s.pre.data(), 0, s.n);
  const std::vector<HopMember> hm = hop_members(mem, decoder);
  pack_hop(w, cfg_, cut, hm);
  link_->send(rank_ + 1, w.take());
}

void Transformer::recv_hop(int cut, Stream& s, std::span<Member> mem, bool decoder) const {
  const std::vector<uint8_t> msg = link_->recv(rank_ - 1);
  WireReader r(msg);
  check_hop(r);
  get_stream(r, cfg_, s.h.data(), s.pre.data(), 0, s.n);
  const std::vector<HopMember> hm = hop_members(mem, decoder);
  unpack_hop(r, cfg_, cut, hm);
  if (!r.done()) throw std::runtime_error("pipeline: a message from another rank is malformed");
}

// Every rank takes part in the exchange of a call, also when it fails here (the others would
// wait for it); a failed call leaves the ranks' states apart for good.
void Transformer::run_split(std::span<BatchItem> items, std::vector<Member>& mem) const {
  if (const std::string b = stage_error(); !b.empty())
    throw std::runtime_error("pipeline stages: " + b);
  if (rank_ > 0 && mem.size() != items.size()) {
    std::string why = "rank " + std::to_string(rank_) + " refused an item of the call";
    for (BatchItem& it : items)
      if (it.error) try {
          std::rethrow_exception(it.error);
        } catch (const std::exception& e) {
          why += std::string(": ") + e.what();
          break;
        }
    set_broken(why);
    fail_call(why, 0);
  }
  if (mem.empty()) return;
  if (rank_ > 0) {
    int step = 0;
    try {
      run_members(mem, step, nullptr);
    } catch (const std::exception& e) {
      const std::string why = name_error(e);
      set_broken(why);
      if (step < 2 && !dynamic_cast<const StageLinkError*>(&e)) fail_call(why, step);
      throw std::runtime_error(why);
    }
    return;
  }
  // rank 0: the batch's sequences in up to one micro-batch per rank -- or a lone long item in
  // sub-chunks (sub_chunk_count) -- every one launched before the first is finished, so that the
  // stages work on different micro-batches at once
  std::vector<BatchItem> subs = mem.size() == 1 ? sub_chunks(mem[0]) : std::vector<BatchItem>{};
  std::deque<Member> sub_mem;  // planned one by one: each follows the state the one before left
  const std::vector<std::span<Member>> groups =
      subs.empty() ? micro_batches(mem, split_.ranks()) : std::vector<std::span<Member>>{};
  const size_t G = subs.empty() ? groups.size() : subs.size();
  name_states(mem);
  std::vector<Tail> tails(G);
  size_t launched = 0;
  int failed_step = 0;
  std::string why;
  bool link_down = false;  // then nothing more is exchanged: each try would wait out the deadline
  for (; launched < G; ++launched) {
    int step = 0;
    try {
      std::span<Member> group = subs.empty() ? groups[launched] : std::span<Member>{};
      if (!subs.empty()) {
        plan(subs[launched], sub_mem.emplace_back());
        group = std::span<Member>(&sub_mem.back(), 1);
      }
      announce(group, launched == 0);
      run_members(group, step, &tails[launched]);
      for (Member& m : group) handle_of(m.it->state->stage.handle)->at = m.it->state->n_tokens;
    } catch (const std::exception& e) {
      why = name_error(e);
      failed_step = step;
      link_down = dynamic_cast<const StageLinkError*>(&e) != nullptr;
      break;
    }
  }
  // the launched ones come round first (the ring keeps the order), then a failure's error
  for (size_t g = 0; g < launched && !link_down; ++g) try {
      finish(tails[g]);
    } catch (const std::exception& e) {
      if (why.empty()) why = name_error(e);
      link_down = dynamic_cast<const StageLinkError*>(&e) != nullptr;
    }
  if (why.empty()) {
    if (!subs.empty()) join_sub_chunks(*mem[0].it, subs);
    return;
  }
  set_broken(why);
  if (launched < G && failed_step < 2 && !link_down) fail_call(why, failed_step);
  throw std::runtime_error(why);
}

int Transformer::sub_chunk_count(int rows, bool ced) const {
  // Sub-chunks of a prompt flow through the stages like the iterations of a pipelined loop: G of
  // them on R balanced ranks take (G + R - 1) / (G R) of one process's time, so more are
  // better until the rows per GEMM get few. Measured on 2 ranks x 1 thread, small preset, exact
  // 1,024-token prompt (one process x 1 thread ~500 tok/s): 1 per rank ~630 tok/s, 2 ~810,
  // 4 ~900. A CED prompt's rows run only through the encoder (layers below the candidate
  // source), all but the last window's: only the ranks holding encoder layers share its work,
  // and where one rank holds them all, sub-chunks would only make its GEMMs smaller.
  if (!split()) return 1;
  const int R = ced && ced_layer_ > 0 ? split_.owner(ced_layer_ - 1) + 1 : split_.ranks();
  return R < 2 ? 1 : std::max(1, std::min(4 * R, rows / 64));
}

std::vector<BatchItem> Transformer::sub_chunks(const Member& m) const {
  // Chunked prefill equals one shot bit for bit (exact and CED: ChunkedPrefillAndDecodeAre-
  // BitIdenticalToOneShot, ChunkedCedEqualsOneShot), so the cut changes nothing but the overlap.
  // Rows of every sub-chunk's logits would land apart: only calls that want the last row, or
  // CED's decoder rows (all in the last sub-chunk), are cut.
  const BatchItem& it = *m.it;
  const LogitsWanted lw = it.opt.logits;
  const bool cuttable = lw == LogitsWanted::kNone || lw == LogitsWanted::kLast ||
                        (m.ced && lw == LogitsWanted::kReplay);
  const int G = cuttable ? sub_chunk_count(it.n, m.ced) : 1;
  if (G < 2) return {};
  std::vector<BatchItem> subs(static_cast<size_t>(G));
  for (int g = 0; g < G; ++g) {
    const int a = int(int64_t(it.n) * g / G), b = int(int64_t(it.n) * (g + 1) / G);
    BatchItem& s = subs[size_t(g)];
    s.state = it.state;
    s.ids = it.ids + a;
    s.n = b - a;
    s.first_pos = it.first_pos + a;
    s.opt = it.opt;
    if (g + 1 < G) {  // an open CED chunk, or an exact chunk without logits
      s.opt.completes_prompt = !m.ced;
      s.opt.logits = LogitsWanted::kNone;
    } else {
      s.logits = it.logits;
    }
  }
  return subs;
}

void Transformer::join_sub_chunks(BatchItem& it, const std::vector<BatchItem>& subs) const {
  it.result = subs.back().result;
  // an exact call's decoder rows are all its rows (CED's are the last sub-chunk's already)
  if (subs.front().opt.completes_prompt) {
    it.result.replay_start = it.first_pos;
    it.result.decoder_rows = it.n;
  }
}

void Transformer::check_stage_item(const BatchItem& it) const {
  const ForwardOptions& opt = it.opt;
  const SequenceState& st = *it.state;
  if (opt.keep_undo || opt.dspark_seed || !opt.images.empty() || !st.images.empty())
    throw std::runtime_error(
        "forward: a model split into pipeline stages runs text without speculation (no DSpark "
        "seeding, undo log or image)");
  if (rank_ != 0) return;
  // the ranks hold a state (or a copy's original) where its last forward left it: a state
  // truncated or restored on rank 0 since cannot continue there
  const std::shared_ptr<void>& h = st.stage.handle ? st.stage.handle : st.stage.parent;
  if (h && handle_of(h)->at != st.n_tokens)
    throw std::runtime_error(
        "forward: this state was truncated or restored since its last forward; on a model split "
        "into pipeline stages a state continues only from where a forward left it (start a new "
        "one)");
}

std::string Transformer::stage_error() const {
  std::lock_guard<std::mutex> g(broken_mu_);
  return broken_;
}

void Transformer::set_broken(const std::string& why) const {
  std::lock_guard<std::mutex> g(broken_mu_);
  if (broken_.empty()) broken_ = why;
}

std::string Transformer::name_error(const std::exception& e) const {
  // an error of this rank is named by it; one that came round names its own rank
  if (dynamic_cast<const RemoteStageError*>(&e)) return e.what();
  return "rank " + std::to_string(rank_) + ": " + e.what();
}

std::vector<std::span<Transformer::Member>> Transformer::micro_batches(std::span<Member> mem,
                                                                       int most) const {
  const size_t G = std::min(mem.size(), size_t(std::max(1, most)));
  int64_t total = 0;
  for (const Member& m : mem) total += m.it->n;
  std::vector<std::span<Member>> groups;
  size_t a = 0;
  int64_t acc = 0;
  for (size_t g = 0; g < G; ++g) {
    size_t b = a + 1;
    acc += mem[a].it->n;
    const int64_t target = total * int64_t(g + 1) / int64_t(G);
    // contiguous groups of about equal rows, each at least one sequence
    while (b + (G - 1 - g) < mem.size() && (g + 1 == G || acc + mem[b].it->n <= target))
      acc += mem[b++].it->n;
    groups.push_back(mem.subspan(a, b - a));
    a = b;
  }
  return groups;
}

void Transformer::send_final(const Stream& d, std::span<const Want> wants) const {
  WireWriter w;
  put_ok(w);
  for (const Want& x : wants)
    put_stream(w, cfg_, d.h.data(), d.pre.data(), x.m->row2 + x.first, x.rows);
  link_->send(0, w.take());
}

void Transformer::finish(Tail& t) const {
  const std::vector<uint8_t> msg = link_->recv(split_.ranks() - 1);
  WireReader r(msg);
  check_hop(r);
  for (const Want& x : t.wants)
    get_stream(r, cfg_, t.d.h.data(), t.d.pre.data(), x.m->row2 + x.first, x.rows);
  if (!r.done()) throw std::runtime_error("pipeline: a message from another rank is malformed");
  heads(Ctx{k_, pool_, experts_, engram_}, t.d, t.wants);
}

void Transformer::fail_call(const std::string& why, int stage_step) const {
  std::string msg = why;
  try {
    // the hop this rank waits for (its content no longer matters), then the error onward
    if (rank_ > 0 && stage_step == 0) link_->recv(rank_ - 1);
    WireWriter w;
    w.put<uint8_t>(0);
    w.put_string(why);
    const int last = split_.ranks() - 1;
    link_->send(rank_ == last ? 0 : rank_ + 1, w.take());
    if (rank_ == 0) link_->recv(last);  // the error comes round
  } catch (const std::exception& e) {
    msg += std::string(" (and the exchange failed: ") + e.what() + ")";
  }
  throw std::runtime_error(msg);
}

void Transformer::run_announced(const Call& call, std::map<uint64_t, SequenceState>& states) const {
  if (!split() || rank_ == 0) throw std::runtime_error("run_announced: not a worker rank");
  for (const auto& [copy, original] : call.copies) {
    const auto from = states.find(original);
    if (from == states.end()) {
      const std::string why = "rank " + std::to_string(rank_) + " holds no state " +
                              std::to_string(original) + " to copy";
      set_broken(why);
      fail_call(why, 0);
    }
    states.insert_or_assign(copy, from->second);
  }
  // after the copies: a copy's original may go in the same call
  for (uint64_t id : call.released) states.erase(id);
  std::vector<BatchItem> items(call.items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    const CallItem& ci = call.items[k];
    auto at = states.find(ci.state_id);
    if (at == states.end()) {
      if (ci.first_pos != 0) {
        const std::string why = "rank " + std::to_string(rank_) + " holds no state " +
                                std::to_string(ci.state_id) + " at position " +
                                std::to_string(ci.first_pos) +
                                " (a truncated or restored state cannot be used across ranks)";
        set_broken(why);
        fail_call(why, 0);
      }
      at = states.emplace(ci.state_id, new_state()).first;
    }
    BatchItem& b = items[k];
    b.state = &at->second;
    b.ids = ci.ids.data();
    b.n = int(ci.ids.size());
    b.first_pos = ci.first_pos;
    b.opt.mode = PrefillMode(ci.mode);
    b.opt.completes_prompt = ci.completes != 0;
    b.opt.logits = LogitsWanted(ci.logits);
  }
  forward_batch(items);
}

}  // namespace cedar
