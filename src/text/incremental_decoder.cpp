#include "text/incremental_decoder.h"

#include "text/utf8.h"

namespace cedar::text {

std::string IncrementalDecoder::drain() {
  const std::size_t hold = utf8_incomplete_tail(pending_);
  const std::string_view ready(pending_.data(), pending_.size() - hold);
  std::string out = utf8_lossy(ready);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string IncrementalDecoder::push(int32_t id) {
  tok_->append_token_bytes(id, &pending_);
  return drain();
}

std::string IncrementalDecoder::push(std::span<const int32_t> ids) {
  for (int32_t id : ids) tok_->append_token_bytes(id, &pending_);
  return drain();
}

std::string IncrementalDecoder::flush() {
  std::string out = utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace cedar::text
