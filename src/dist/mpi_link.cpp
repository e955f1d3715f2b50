#include "dist/mpi_link.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "forward/transformer.h"

namespace cedar::dist {

namespace {

enum Tag : int { kHop = 1, kCall = 2, kStop = 3, kTraffic = 4 };

// Polling with back-off: spins (yielding) for the first ~100 us, then sleeps growing to 50 us.
// (Measured on `cedar bench --ranks`, small preset, 2 ranks x 1 thread: a 500 us cap cost a single
// stream 154 -> 120 tok/s; a hop wakes up to one sleep late.)
class Poll {
 public:
  explicit Poll(double timeout_s) : t0_(clock::now()), timeout_s_(timeout_s) {}
  // false once the deadline passed (timeout_s <= 0: never)
  bool wait() {
    const double el = std::chrono::duration<double>(clock::now() - t0_).count();
    if (timeout_s_ > 0 && el > timeout_s_) return false;
    if (el < 1e-4) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
      sleep_us_ = std::min(50, sleep_us_ * 2);
    }
    return true;
  }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point t0_;
  double timeout_s_;
  int sleep_us_ = 10;
};

}  // namespace

MpiLink::MpiLink(double timeout_s) : timeout_s_(timeout_s) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
    owns_mpi_ = true;
    if (provided < MPI_THREAD_SERIALIZED)
      throw std::runtime_error("MPI: the library does not support calls from several threads");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "size");
}

MpiLink::~MpiLink() {
  // After a failed exchange another rank is dead or hung: MPI_Finalize would wait for it. The
  // process ends without it, and mpirun ends the other ranks.
  if (failed_) return;
  try {
    stop_workers();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cedar rank %d: stopping the ranks: %s\n", rank_, e.what());
    return;
  }
  if (owns_mpi_) MPI_Finalize();
}

void MpiLink::check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(std::string("MPI ") + what + ": " + std::string(text, size_t(len)));
}

bool MpiLink::wait_for(void* request, const char* what) {
  MPI_Request& req = *static_cast<MPI_Request*>(request);
  Poll poll(timeout_s_);
  for (;;) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return true;
    if (!poll.wait()) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
      return false;
    }
  }
}

void MpiLink::fail(const std::string& why) {
  failed_ = true;
  throw StageLinkError(why);
}

void MpiLink::send_tagged(int to, int tag, const std::vector<uint8_t>& msg) {
  if (msg.size() > size_t(INT_MAX))
    throw std::runtime_error("MPI: a message of " + std::to_string(msg.size()) +
                             " bytes is too large (a smaller prefill chunk passes)");
  MPI_Request req;
  check(MPI_Isend(msg.data(), int(msg.size()), MPI_BYTE, to, tag, MPI_COMM_WORLD, &req), "send");
  // While it waits, the hops arriving here are taken in: with several calls in flight the
  // ranks' sends form a ring, and a rank that only sent would wait for itself through it.
  Poll poll(timeout_s_);
  for (;;) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "send");
    if (done) return;
    take_in_hops();
    if (!poll.wait()) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
      fail("rank " + std::to_string(to) + " did not take a message within " +
           std::to_string(int(timeout_s_)) + " s (it died or hangs)");
    }
  }
}

void MpiLink::take_in_hops() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    check(MPI_Iprobe(MPI_ANY_SOURCE, kHop, MPI_COMM_WORLD, &flag, &st), "probe");
    if (!flag) return;
    int count = 0;
    check(MPI_Get_count(&st, MPI_BYTE, &count), "count");
    std::vector<uint8_t> msg(static_cast<size_t>(count));
    check(MPI_Recv(msg.data(), count, MPI_BYTE, st.MPI_SOURCE, kHop, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "recv");
    taken_[st.MPI_SOURCE].push_back(std::move(msg));
  }
}

std::vector<uint8_t> MpiLink::recv_tagged(int from, int tag, bool deadline) {
  Poll poll(deadline ? timeout_s_ : 0);
  MPI_Status st;
  for (;;) {
    int flag = 0;
    check(MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &st), "probe");
    if (flag) break;
    if (!poll.wait())
      fail("no answer from rank " + std::to_string(from) + " within " +
           std::to_string(int(timeout_s_)) + " s (it died or hangs)");
  }
  int count = 0;
  check(MPI_Get_count(&st, MPI_BYTE, &count), "count");
  std::vector<uint8_t> msg(static_cast<size_t>(count));
  check(MPI_Recv(msg.data(), count, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "recv");
  return msg;
}

void MpiLink::send(int to, std::vector<uint8_t> msg) {
  send_tagged(to, kHop, msg);
  sent_.bytes += msg.size();
  ++sent_.messages;
}

std::vector<uint8_t> MpiLink::recv(int from) {
  auto it = taken_.find(from);
  if (it != taken_.end() && !it->second.empty()) {
    std::vector<uint8_t> msg = std::move(it->second.front());
    it->second.pop_front();
    return msg;
  }
  return recv_tagged(from, kHop, true);
}

void MpiLink::announce(const Call& call) {
  const std::vector<uint8_t> msg = encode_call(call);
  for (int r = 1; r < size_; ++r) send_tagged(r, kCall, msg);
}

std::vector<std::string> MpiLink::allgather(const std::string& text) {
  const int n = int(text.size());
  const std::string late = "the ranks did not all reach the start-up check within " +
                           std::to_string(int(timeout_s_)) + " s (one died or hangs)";
  std::vector<int> lens(static_cast<size_t>(size_));
  MPI_Request req;
  check(MPI_Iallgather(&n, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req),
        "start-up check");
  if (!wait_for(&req, "start-up check")) fail(late);
  std::vector<int> offs(static_cast<size_t>(size_));
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offs[size_t(r)] = total;
    total += lens[size_t(r)];
  }
  std::string all(size_t(total), '\0');
  check(MPI_Iallgatherv(text.data(), n, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR,
                        MPI_COMM_WORLD, &req),
        "start-up check");
  if (!wait_for(&req, "start-up check")) fail(late);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r)
    out.push_back(all.substr(size_t(offs[size_t(r)]), size_t(lens[size_t(r)])));
  return out;
}

std::optional<Call> MpiLink::next_call() {
  Poll poll(0);
  for (;;) {
    int flag = 0;
    MPI_Status st;
    check(MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st), "probe");
    if (flag && st.MPI_TAG == kStop) {
      recv_tagged(0, kStop, false);
      stopped_ = true;
      return std::nullopt;
    }
    if (flag && st.MPI_TAG == kCall) return decode_call(recv_tagged(0, kCall, false));
    if (flag && st.MPI_TAG == kTraffic) {  // rank 0 asks what this rank handed on
      recv_tagged(0, kTraffic, false);
      WireWriter w;
      w.put(sent_);
      send_tagged(0, kTraffic, w.take());
      continue;
    }
    poll.wait();
  }
}

void MpiLink::stop_workers() {
  if (rank_ != 0 || stopped_) return;
  stopped_ = true;
  for (int r = 1; r < size_; ++r) send_tagged(r, kStop, {});
}

std::vector<MpiLink::Sent> MpiLink::hop_traffic() {
  std::vector<Sent> all{sent_};
  for (int r = 1; r < size_; ++r) {
    send_tagged(r, kTraffic, {});
    const std::vector<uint8_t> msg = recv_tagged(r, kTraffic, true);
    WireReader rd(msg);
    all.push_back(rd.get<Sent>());
  }
  return all;
}

void serve_stage(MpiLink& link, const Transformer& model) {
  std::map<uint64_t, SequenceState> states;
  while (std::optional<Call> call = link.next_call()) {
    try {
      model.run_announced(*call, states);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cedar rank %d: %s\n", link.rank(), e.what());
    }
  }
}

}  // namespace cedar::dist
