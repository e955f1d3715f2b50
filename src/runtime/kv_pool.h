// KvPool: the KV memory a server's sequences may hold, when it is smaller than every slot's
// full context (`cedar serve --kv-ram`, issue "Beyond RAM"; docs/MEMORY.md). A request reserves
// the KV of its whole sequence (prompt + max_tokens, at most the context) when it is admitted;
// one that does not fit is refused at once (HTTP 503 with the numbers), never swapped and never
// failed half-way. The pool only counts: the state it stands for lives in the slots'
// generators. Not thread-safe: the scheduler calls it under its lock.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/param_count.h"

namespace cedar::runtime {

class KvPool {
 public:
  // `capacity` <= 0: unlimited (each slot can hold a full context; nothing is refused).
  KvPool(const ModelConfig& cfg, int64_t ctx, int64_t capacity);

  bool limited() const { return capacity_ > 0; }
  int64_t capacity() const { return capacity_; }
  int64_t used() const { return used_; }
  int64_t free_bytes() const { return limited() ? capacity_ - used_ : INT64_MAX; }
  // runtime::sequence_kv_bytes of min(tokens, ctx) tokens
  int64_t sequence_bytes(int64_t tokens) const;

  // Takes `bytes` if they fit (always when unlimited); false leaves the pool unchanged.
  bool take(int64_t bytes);
  // Gives back what take() took (throws std::logic_error on more than is in use).
  void give(int64_t bytes);

  // The refusal of a request that needs `bytes` for `tokens` tokens, with the pool's numbers and
  // what the client or the operator can change.
  std::string refusal(int64_t bytes, int64_t tokens, int holders) const;

 private:
  KvLayout layout_;
  int64_t ctx_;
  int64_t capacity_;
  int64_t used_ = 0;
};

}  // namespace cedar::runtime
