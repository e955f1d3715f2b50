// KvStore: the per-sequence states of many sequences as numbered slots (EXAMPLES.md §7.3), with
// memory accounted from the real allocations (vector capacities, SequenceState::bytes()) against
// one total budget.
//
// * acquire(reserve_tokens) makes a fresh state and reserves its global rows up front, so a
//   sequence that stays within its reservation never reallocates during forward; the budget is
//   checked here and in reserve()/fork(); check_budget() re-checks after states grew.
// * fork(from, to, n_prefix) makes `to` a copy of the first n_prefix positions of `from`;
//   truncate(slot, n_keep) keeps the first n_keep positions. At the full length both are exact
//   copies. Below it the window rings (and a ratio-2 tail folded into a dropped row, and the
//   Engram history) cannot be cut out of the state: they are rebuilt by SWA Bounded Replay of the
//   last 128 kept positions (spec §9.4), which needs the slot's token ids (ids(slot), kept by the
//   caller) and a replayer (Transformer::replay, see set_replayer); without either the call
//   refuses with a clear error and changes nothing. The rebuilt state is the approximate state
//   of a prefix-cache hit, not the exact one.
// Not thread-safe: one owner (a scheduler) calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/config.h"
#include "state/sequence_state.h"

namespace cedar {

class KvStore {
 public:
  // Transformer::replay's shape: (state, ids of [ids_first, n_tokens), ids_first) -> s.
  using Replayer = std::function<int64_t(SequenceState&, std::span<const int32_t>, int64_t)>;

  KvStore(const ModelConfig& cfg, size_t budget_bytes);

  void set_replayer(Replayer r) { replay_ = std::move(r); }

  // A fresh empty state with its global rows reserved for reserve_tokens tokens. Throws
  // std::runtime_error (nothing allocated) when the budget cannot hold it.
  int acquire(int64_t reserve_tokens = 0);
  void release(int slot);
  // Grows the slot's reservation to `tokens`; throws when the budget cannot hold it.
  void reserve(int slot, int64_t tokens);

  SequenceState& state(int slot);
  const SequenceState& state(int slot) const;
  // The token ids of the slot's positions, maintained by the caller (append what it feeds to
  // forward); only fork/truncate below the full length read them.
  std::vector<int32_t>& ids(int slot);

  void fork(int from, int to, int64_t n_prefix);
  void truncate(int slot, int64_t n_keep);

  size_t budget() const { return budget_; }
  size_t bytes_used() const;  // every live slot: state + ids capacity
  size_t slot_bytes(int slot) const;
  int live_slots() const;
  // Throws when the live slots hold more than the budget (after forwards grew them beyond their
  // reservations).
  void check_budget() const;

 private:
  struct Slot {
    SequenceState st;
    std::vector<int32_t> ids;
  };
  Slot& slot(int s);
  const Slot& slot(int s) const;
  static size_t bytes_of(const Slot& s);
  // Keeps [0, n) of `st` (a copy owned by the caller), rebuilding the window by replay.
  void cut(SequenceState& st, const std::vector<int32_t>& ids, int64_t n, const char* what) const;
  void fits(size_t extra, size_t freed, const char* what) const;

  const ModelConfig& cfg_;
  size_t budget_;
  std::vector<std::unique_ptr<Slot>> slots_;  // null = free
  Replayer replay_;
};

}  // namespace cedar
