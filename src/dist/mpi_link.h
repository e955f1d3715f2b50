// The ranks of an MPI job (Debian's Open MPI) as the transport of a Transformer split into
// pipeline stages (forward/stage.h, docs/DISTRIBUTED.md). Rank 0 runs the command and announces
// every forward to the others; they run them (serve_stage) until rank 0 stops them.
//
// Every wait has a deadline, so that a rank that died or hangs is reported instead of waited
// for: waits poll (MPI_Iprobe / MPI_Test, backing off to sleeps of 50 us so that the ranks of
// one host leave their cores to the compute threads) and give up after the link's timeout. Errors
// of the MPI library come back as codes (MPI_ERRORS_RETURN) and throw.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "forward/stage.h"

namespace cedar {
class Transformer;
}

namespace cedar::dist {

class MpiLink final : public StageLink {
 public:
  // Initialises MPI (thread level SERIALIZED: one thread at a time calls it, not always the
  // main one) for the whole process. timeout_s: how long a hop or a send may take.
  explicit MpiLink(double timeout_s);
  ~MpiLink() override;  // stops the workers (rank 0) and finalises MPI
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  int rank() const override { return rank_; }
  int size() const { return size_; }
  void send(int to, std::vector<uint8_t> msg) override;
  std::vector<uint8_t> recv(int from) override;
  void announce(const Call& call) override;

  // Every rank's `text` (e.g. its checkpoint's fingerprint), in rank order. Collective.
  std::vector<std::string> allgather(const std::string& text);
  // Ranks > 0: the next call rank 0 announces (waits without a deadline: ranks wait for work);
  // nothing when rank 0 stops the ranks.
  std::optional<Call> next_call();
  // Rank 0: tells the other ranks to return from serve_stage (the destructor does it too).
  void stop_workers();
  // Rank 0 when the job fails before the other ranks serve (a refused start-up check): nothing
  // to stop.
  void forget_workers() { stopped_ = true; }

  // What each rank handed on in the exchanges so far (its sends to the next rank, or the last
  // rank's to rank 0), in rank order. Rank 0 only: it asks the other ranks, which answer from
  // serve_stage.
  struct Sent {
    uint64_t bytes = 0, messages = 0;
  };
  std::vector<Sent> hop_traffic();

 private:
  std::vector<uint8_t> recv_tagged(int from, int tag, bool deadline);
  void send_tagged(int to, int tag, const std::vector<uint8_t>& msg);
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 0;
  // A failed MPI call or deadline: the link is down for good (StageLinkError).
  [[noreturn]] void fail(const std::string& why);
  void check(int rc, const char* what);
  // Waits for an MPI_Request until it completes (true) or the deadline passes (false: cancelled).
  bool wait_for(void* request, const char* what);
  void take_in_hops();  // hops that arrived, into taken_ (a send's wait)
  std::map<int, std::deque<std::vector<uint8_t>>> taken_;  // by source, in arrival order
  bool stopped_ = false;
  bool failed_ = false;  // a dead or hung rank: no clean end
  Sent sent_;
  bool owns_mpi_ = false;
};

// Ranks > 0: runs the calls rank 0 announces against this rank's states until rank 0 stops the
// ranks. A call that fails here has already been reported round the ring; it is logged.
void serve_stage(MpiLink& link, const Transformer& model);

}  // namespace cedar::dist
