// ForwardBatcher: continuous batching of forward calls. Any number of threads (one per request
// being generated) call forward() and block; one worker thread gathers the calls waiting at that
// moment into a single Transformer::forward_batch pass and wakes every caller with its own
// result. While a pass runs, the callers of the previous one sample their next token and queue
// again, so in steady state every decoding request is a row of every pass: the weights are read
// once per pass instead of once per request.
//
// A pass holds at most max_rows rows (its first call is always taken, whatever its size):
// decode steps and other short calls go first, then prefill chunks in arrival order, so a long
// prompt fed in chunks shares passes with the decoders instead of stalling them. Results equal
// those of forward() on each state alone, bit for bit (forward_batch's contract), so batching
// changes speed only, never output.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "forward/transformer.h"

namespace cedar::runtime {

struct BatcherOptions {
  int max_rows = 512;   // rows per pass (the first call of a pass is taken regardless)
  int short_rows = 16;  // calls of at most this many rows count as decode-like (served first)
};

struct BatcherStats {
  uint64_t passes = 0;     // forward_batch calls
  uint64_t calls = 0;      // forward() calls served
  uint64_t rows = 0;       // rows over all passes
  uint64_t max_calls = 0;  // the most calls one pass served
};

class ForwardBatcher {
 public:
  // forward_mu is held around every pass (other users of the model, e.g. a prefix-cache replay,
  // take it too).
  ForwardBatcher(const Transformer& model, std::mutex& forward_mu, BatcherOptions opt = {});
  ~ForwardBatcher();  // finishes the queued calls, joins the worker
  ForwardBatcher(const ForwardBatcher&) = delete;
  ForwardBatcher& operator=(const ForwardBatcher&) = delete;

  // Transformer::forward through the next pass; blocks until it ran. Throws what forward()
  // would throw (the state unchanged) or the pass's failure.
  ForwardResult forward(SequenceState& state, const int32_t* ids, int n, int64_t first_pos,
                        const ForwardOptions& opt, float* logits);

  BatcherStats stats() const;

 private:
  struct Call;
  void worker();

  const Transformer& model_;
  std::mutex& forward_mu_;
  BatcherOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::deque<Call*> queue_;
  BatcherStats stats_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cedar::runtime
