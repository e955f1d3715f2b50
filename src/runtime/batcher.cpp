#include "runtime/batcher.h"

#include <algorithm>
#include <exception>
#include <vector>

namespace cedar::runtime {

struct ForwardBatcher::Call {
  BatchItem item;
  bool done = false;
};

ForwardBatcher::ForwardBatcher(const Transformer& model, std::mutex& forward_mu, BatcherOptions opt)
    : model_(model), forward_mu_(forward_mu), opt_(opt) {
  opt_.max_rows = std::max(1, opt_.max_rows);
  thread_ = std::thread([this] { worker(); });
}

ForwardBatcher::~ForwardBatcher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

BatcherStats ForwardBatcher::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

ForwardResult ForwardBatcher::forward(SequenceState& state, const int32_t* ids, int n,
                                      int64_t first_pos, const ForwardOptions& opt, float* logits) {
  Call call;
  call.item.state = &state;
  call.item.ids = ids;
  call.item.n = n;
  call.item.first_pos = first_pos;
  call.item.opt = opt;
  call.item.logits = logits;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (stop_) throw std::runtime_error("forward: the batcher is shutting down");
    queue_.push_back(&call);
    cv_work_.notify_one();
    cv_done_.wait(lk, [&] { return call.done; });
  }
  if (call.item.error) std::rethrow_exception(call.item.error);
  return call.item.result;
}

void ForwardBatcher::worker() {
  std::vector<Call*> pass;
  std::vector<BatchItem> items;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left to serve
      // Short calls (decode steps) first, in arrival order, then the longer ones in arrival
      // order while the row budget lasts; the oldest call always gets in.
      pass.clear();
      int64_t rows = 0;
      auto take = [&](bool short_pass) {
        for (auto it = queue_.begin(); it != queue_.end();) {
          Call* c = *it;
          const bool is_short = c->item.n <= opt_.short_rows;
          if (is_short != short_pass || (!pass.empty() && rows + c->item.n > opt_.max_rows)) {
            ++it;
            continue;
          }
          pass.push_back(c);
          rows += c->item.n;
          it = queue_.erase(it);
        }
      };
      // The oldest call leads, so a long prefill waiting behind a stream of decode steps is not
      // starved.
      pass.push_back(queue_.front());
      rows = queue_.front()->item.n;
      queue_.pop_front();
      take(true);
      take(false);
      stats_.passes++;
      stats_.calls += pass.size();
      stats_.rows += uint64_t(rows);
      stats_.max_calls = std::max<uint64_t>(stats_.max_calls, pass.size());
    }
    items.clear();
    for (Call* c : pass) items.push_back(c->item);
    std::exception_ptr failure;
    try {
      std::lock_guard<std::mutex> fl(forward_mu_);
      model_.forward_batch(std::span<BatchItem>(items));
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (size_t i = 0; i < pass.size(); ++i) {
        pass[i]->item.result = items[i].result;
        pass[i]->item.error = failure ? failure : items[i].error;
        pass[i]->done = true;
      }
    }
    cv_done_.notify_all();
  }
}

}  // namespace cedar::runtime
