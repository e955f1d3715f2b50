// Transformer split into pipeline stages (forward/stage.h): the exchange of one forward between
// the ranks. Every call goes round a ring: rank 0 announces it to every rank, then each rank
// receives the stream at its first layer from the rank before (rank 0: its embedding), runs its
// layers and hands the stream on; the last rank hands the rows whose logits are wanted back to
// rank 0. A rank that cannot run its part sends an error round instead, so that no rank waits
// for it; the error reaches rank 0, which throws it.
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

void Transformer::announce(std::span<Member> mem) const {
  Call call;
  {
    std::lock_guard<std::mutex> g(released_->mu);
    call.released.swap(released_->ids);
  }
  for (Member& m : mem) {
    SequenceState& st = *m.it->state;
    if (!st.stage_handle) {
      auto h = std::make_shared<StageHandle>();
      h->id = next_state_id_++;
      h->released = released_;
      st.stage_handle = h;
    }
    const BatchItem& it = *m.it;
    CallItem ci;
    ci.state_id = static_cast<const StageHandle*>(st.stage_handle.get())->id;
    ci.first_pos = it.first_pos;
    ci.ids.assign(it.ids, it.ids + it.n);
    ci.mode = uint8_t(it.opt.mode);
    ci.completes = it.opt.completes_prompt;
    ci.logits = uint8_t(it.opt.logits);
    call.items.push_back(std::move(ci));
  }
  link_->announce(call);
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
  for (uint64_t id : call.released) states.erase(id);
  std::vector<BatchItem> items(call.items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    const CallItem& ci = call.items[k];
    auto at = states.find(ci.state_id);
    if (at == states.end()) {
      if (ci.first_pos != 0) {
        broken_ = "rank " + std::to_string(rank_) + " holds no state " +
                  std::to_string(ci.state_id) + " at position " + std::to_string(ci.first_pos) +
                  " (a copied or truncated state cannot be used across ranks)";
        fail_call(broken_, 0);
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
