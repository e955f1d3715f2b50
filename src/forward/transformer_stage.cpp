// Transformer split into pipeline stages (forward/stage.h): the exchange of one forward between
// the ranks. Every call goes round a ring: rank 0 announces it to every rank, then each rank
// receives the stream at its first layer from the rank before (rank 0: its embedding), runs its
// layers and hands the stream on; the last rank hands the rows whose logits are wanted back to
// rank 0. A rank that cannot run its part sends an error round instead, so that no rank waits
// for it; the error reaches rank 0, which throws it.
#include <algorithm>
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
    ci.state_id = static_cast<const StageHandle*>(st.stage.handle.get())->id;
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
  auto id_of = [](const std::shared_ptr<void>& h) {
    return static_cast<const StageHandle*>(h.get())->id;
  };
  for (Member& m : mem) {
    SequenceState& st = *m.it->state;
    if (!st.stage.handle) {
      fresh(st, st.stage.parent ? id_of(st.stage.parent) : 0);
      st.stage.parent.reset();
    } else if (st.stage.handle.use_count() > 1) {
      fresh(st, id_of(st.stage.handle));
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
  // rank 0: the batch's sequences in up to one micro-batch per rank, every one launched before
  // the first is finished, so that the stages work on different micro-batches at once
  const std::vector<std::span<Member>> groups = micro_batches(mem, split_.ranks());
  name_states(mem);
  std::vector<Tail> tails(groups.size());
  size_t launched = 0;
  int failed_step = 0;
  std::string why;
  bool link_down = false;  // then nothing more is exchanged: each try would wait out the deadline
  for (; launched < groups.size(); ++launched) {
    int step = 0;
    try {
      announce(groups[launched], launched == 0);
      run_members(groups[launched], step, &tails[launched]);
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
    for (Member& m : mem)  // where the ranks now hold each state
      static_cast<StageHandle*>(m.it->state->stage.handle.get())->at = m.it->state->n_tokens;
    return;
  }
  set_broken(why);
  if (launched < groups.size() && failed_step < 2 && !link_down) fail_call(why, failed_step);
  throw std::runtime_error(why);
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
  if (h && static_cast<const StageHandle*>(h.get())->at != st.n_tokens)
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
