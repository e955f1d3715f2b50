#include "state/kv_store.h"

#include <stdexcept>
#include <string>

namespace cedar {

KvStore::KvStore(const ModelConfig& cfg, size_t budget_bytes) : cfg_(cfg), budget_(budget_bytes) {}

KvStore::Slot& KvStore::slot(int s) {
  return const_cast<Slot&>(static_cast<const KvStore*>(this)->slot(s));
}

const KvStore::Slot& KvStore::slot(int s) const {
  if (s < 0 || size_t(s) >= slots_.size() || !slots_[size_t(s)])
    throw std::runtime_error("KV store: slot " + std::to_string(s) + " is not acquired");
  return *slots_[size_t(s)];
}

size_t KvStore::bytes_of(const Slot& s) {
  return s.st.bytes() + s.ids.capacity() * sizeof(int32_t);
}

size_t KvStore::bytes_used() const {
  size_t b = 0;
  for (const auto& s : slots_)
    if (s) b += bytes_of(*s);
  return b;
}

size_t KvStore::slot_bytes(int s) const { return bytes_of(slot(s)); }

int KvStore::live_slots() const {
  int n = 0;
  for (const auto& s : slots_) n += s ? 1 : 0;
  return n;
}

void KvStore::fits(size_t extra, size_t freed, const char* what) const {
  const size_t used = bytes_used() - freed;
  if (used + extra > budget_)
    throw std::runtime_error(std::string("KV store: ") + what + " needs " + std::to_string(extra) +
                             " B, " + std::to_string(used) + " B of the " +
                             std::to_string(budget_) + " B budget are in use");
}

void KvStore::check_budget() const {
  const size_t used = bytes_used();
  if (used > budget_)
    throw std::runtime_error("KV store: " + std::to_string(used) + " B in use exceeds the " +
                             std::to_string(budget_) + " B budget");
}

int KvStore::acquire(int64_t reserve_tokens) {
  if (reserve_tokens < 0) throw std::runtime_error("KV store: negative reservation");
  auto s = std::make_unique<Slot>();
  s->st = SequenceState(cfg_);
  s->st.reserve(reserve_tokens);
  fits(bytes_of(*s), 0, "a new sequence");
  for (size_t i = 0; i < slots_.size(); ++i)
    if (!slots_[i]) {
      slots_[i] = std::move(s);
      return int(i);
    }
  slots_.push_back(std::move(s));
  return int(slots_.size() - 1);
}

void KvStore::release(int s) {
  slot(s);  // throws on a free or unknown slot
  slots_[size_t(s)].reset();
}

void KvStore::reserve(int s, int64_t tokens) {
  Slot& sl = slot(s);
  SequenceState probe;  // what the reservation would hold: measured on a copy of the layout
  probe = SequenceState(cfg_);
  probe.reserve(tokens);
  const size_t want = probe.global_bytes(), have = sl.st.global_bytes();
  if (want > have) fits(want - have, 0, "the reservation");
  sl.st.reserve(tokens);
}

SequenceState& KvStore::state(int s) { return slot(s).st; }
const SequenceState& KvStore::state(int s) const { return slot(s).st; }
std::vector<int32_t>& KvStore::ids(int s) { return slot(s).ids; }

void KvStore::cut(SequenceState& st, const std::vector<int32_t>& ids, int64_t n,
                  const char* what) const {
  if (st.prompt_open())
    throw std::runtime_error(std::string("KV store: ") + what +
                             ": the sequence has an open prompt");
  if (n < 0 || n > st.n_tokens)
    throw std::runtime_error(std::string("KV store: ") + what + " at " + std::to_string(n) +
                             " outside [0, " + std::to_string(st.n_tokens) + "]");
  if (n == st.n_tokens) return;
  if (int64_t(ids.size()) < n)
    throw std::runtime_error(std::string("KV store: ") + what + " to " + std::to_string(n) +
                             " of " + std::to_string(st.n_tokens) +
                             " tokens must rebuild the window by bounded replay, which needs the "
                             "token ids of the prefix (the slot holds " +
                             std::to_string(ids.size()) + ")");
  if (!replay_)
    throw std::runtime_error(std::string("KV store: ") + what + " to " + std::to_string(n) +
                             " tokens must rebuild the window by bounded replay: no replayer set");
  st.truncate(n);
  replay_(st, std::span<const int32_t>(ids.data(), size_t(n)), 0);
}

void KvStore::fork(int from, int to, int64_t n_prefix) {
  const Slot& src = slot(from);
  Slot& dst = slot(to);
  if (from == to) throw std::runtime_error("KV store: fork from a slot onto itself");
  Slot copy;
  copy.st = src.st;
  copy.ids.assign(src.ids.begin(),
                  src.ids.begin() + long(std::min<int64_t>(int64_t(src.ids.size()), n_prefix)));
  cut(copy.st, copy.ids, n_prefix, "fork");
  fits(bytes_of(copy), bytes_of(dst), "the fork");
  dst.st = std::move(copy.st);
  dst.ids = std::move(copy.ids);
}

void KvStore::truncate(int s, int64_t n_keep) {
  Slot& sl = slot(s);
  if (n_keep == sl.st.n_tokens) return;
  SequenceState st = sl.st;
  cut(st, sl.ids, n_keep, "truncate");
  sl.st = std::move(st);
  if (int64_t(sl.ids.size()) > n_keep) sl.ids.resize(size_t(n_keep));
}

}  // namespace cedar
