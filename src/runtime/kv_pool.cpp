#include "runtime/kv_pool.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/memory_plan.h"

namespace cedar::runtime {

KvPool::KvPool(const ModelConfig& cfg, int64_t ctx, int64_t capacity)
    : layout_(kv_layout(cfg)),
      ctx_(std::max<int64_t>(1, ctx)),
      capacity_(std::max<int64_t>(0, capacity)) {}

int64_t KvPool::sequence_bytes(int64_t tokens) const {
  return sequence_kv_bytes(layout_, std::clamp<int64_t>(tokens, 0, ctx_));
}

bool KvPool::take(int64_t bytes) {
  if (bytes < 0) throw std::logic_error("KvPool::take: negative size");
  if (limited() && bytes > capacity_ - used_) return false;
  used_ += bytes;
  return true;
}

void KvPool::give(int64_t bytes) {
  if (bytes < 0 || bytes > used_)
    throw std::logic_error("KvPool::give: " + std::to_string(bytes) + " bytes, " +
                           std::to_string(used_) + " in use");
  used_ -= bytes;
}

std::string KvPool::refusal(int64_t bytes, int64_t tokens, int holders) const {
  return "memory: this request needs " + format_bytes(bytes) + " of KV state for " +
         std::to_string(std::min(tokens, ctx_)) + " tokens (prompt + max_tokens) but " +
         format_bytes(std::max<int64_t>(0, free_bytes())) + " of the server's " +
         format_bytes(capacity_) + " KV pool are free (" + std::to_string(holders) +
         " requests hold the rest); retry later or ask for fewer max_tokens (the server's "
         "--kv-ram sets the pool)";
}

}  // namespace cedar::runtime
