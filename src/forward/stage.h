// Pipeline stages (docs/DISTRIBUTED.md): the backbone's layers cut into contiguous ranges, one
// per rank, each rank running only its range of every forward. What one forward hands from a
// stage to the next at a cut before layer `cut`:
//  * the mHC stream (h [rows, hc, D] as bf16 bits -- its values are bf16 values, so this is
//    lossless -- and the fp32 pre-mix [rows, hc]) of the rows the next layer runs on;
//  * the new compressed rows (main rows + index keys) of every KV source below the cut that a
//    layer at or above it reads (its consumers: plan(m).kv_source == source). The receiving rank
//    keeps a copy of those sources' rows in its own SequenceState ("held" layers);
//  * the Top-K lists of every index source below the cut that a Reuse layer at or above it
//    reads, and the candidate pool when the candidate source is below the cut and a Reindex
//    layer at or above it;
// Engram hashes do not travel: every rank computes them from the ids (a few integer ops per
// row), and the Engram history is mirrored on every rank like the counters.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "forward/forward_pass.h"
#include "model/config.h"
#include "state/sequence_state.h"

namespace cedar {

// The layer ranges of the ranks: rank r runs layers [begin(r), end(r)). Rank 0 also holds the
// embedding, the head and everything outside the backbone (it runs the front end).
class StageSplit {
 public:
  StageSplit() = default;
  // first[r]: the first layer of rank r; first[0] = 0, strictly ascending, below `layers`.
  StageSplit(std::vector<int> first, int layers);

  // Cuts balancing the bytes of the layers' weights (layer_bytes[l]; rank 0's share counts
  // `head_bytes` too: the embedding and head it holds): each rank's range ends at the layer
  // where the running total first reaches its share. Throws when ranks > layers.
  static StageSplit by_bytes(const std::vector<uint64_t>& layer_bytes, uint64_t head_bytes,
                             int ranks);
  // "--stage-cuts 2,5": the first layers of ranks 1..N-1, comma-separated. Throws naming the
  // option on a malformed or out-of-range list or one whose length is not ranks - 1.
  static StageSplit parse(const std::string& cuts, int layers, int ranks);

  int ranks() const { return int(first_.size()); }
  int layers() const { return layers_; }
  int begin(int r) const { return first_.at(size_t(r)); }
  int end(int r) const { return r + 1 < ranks() ? first_[size_t(r) + 1] : layers_; }
  int owner(int layer) const;    // the rank whose range holds layer (layers(): the last rank)
  std::string describe() const;  // "0-1|2-6"

 private:
  std::vector<int> first_;
  int layers_ = 0;
};

// What crosses a cut before layer `cut` (see the file comment).
struct Crossing {
  std::vector<int> kv_sources;    // KV sources below the cut with a consumer at or above it
  std::vector<int> topk_sources;  // index sources below the cut whose Top-K a layer above reuses
  bool candidates = false;        // the candidate pool
};
Crossing crossing(const ModelConfig& cfg, int cut);

// Whether a rank running layers [begin, end) keeps layer l's state: its own layers, and the KV
// sources below begin that a layer at or above begin reads (their rows arrive with the stream,
// and the rank passes them on to later ranks).
bool holds_layer(const ModelConfig& cfg, int begin, int end, int l);

// Byte strings of the messages: appended values in the host's byte order (all ranks run the
// same build: the version check at start-up refuses any other).
class WireWriter {
 public:
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
  }
  template <class T>
  void put_array(const T* v, size_t n) {
    put<uint64_t>(n);
    const auto* p = reinterpret_cast<const uint8_t*>(v);
    b_.insert(b_.end(), p, p + n * sizeof(T));
  }
  void put_string(const std::string& s) { put_array(s.data(), s.size()); }
  std::vector<uint8_t> take() { return std::move(b_); }

 private:
  std::vector<uint8_t> b_;
};

// Reads what WireWriter wrote; throws on a message shorter than what it is read as.
class WireReader {
 public:
  explicit WireReader(const std::vector<uint8_t>& b) : b_(b) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  template <class T>
  std::vector<T> get_array(size_t max_n = SIZE_MAX) {
    const uint64_t n = get<uint64_t>();
    if (n > max_n || n > (b_.size() - at_) / sizeof(T)) throw std::runtime_error(bad());
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
  }
  std::string get_string() {
    const std::vector<char> c = get_array<char>();
    return std::string(c.begin(), c.end());
  }
  bool done() const { return at_ == b_.size(); }

 private:
  const uint8_t* take(size_t n) {
    if (n > b_.size() - at_) throw std::runtime_error(bad());
    const uint8_t* p = b_.data() + at_;
    at_ += n;
    return p;
  }
  static std::string bad() { return "pipeline: a message from another rank is malformed"; }
  const std::vector<uint8_t>& b_;
  size_t at_ = 0;
};

// One sequence's part of a hop (the message handed across a cut in one forward).
struct HopMember {
  SequenceState* st = nullptr;
  const std::vector<int64_t>* rows_before = nullptr;  // every layer's compressed rows at the
                                                      // call's start
  ForwardPass* fp = nullptr;  // the pass of its rows in the hop's stream (null: none)
  int64_t n_tokens = 0;       // the state's tokens after the call
};

// The stream rows [row0, row0 + rows) of h [*, hc, D] and pre [*, hc].
void put_stream(WireWriter& w, const ModelConfig& cfg, const float* h, const float* pre, int row0,
                int rows);
void get_stream(WireReader& r, const ModelConfig& cfg, float* h, float* pre, int row0, int rows);

// Everything crossing the cut before layer `cut` (see the file comment) but the stream: per
// member, the Top-K lists and candidate pool of its pass and the compressed rows its crossing
// sources gained in this call. unpack_hop appends those rows to the receiver's copies (their
// parked-token count follows n_tokens: only the source itself reads a tail).
void pack_hop(WireWriter& w, const ModelConfig& cfg, int cut, std::span<const HopMember> mem);
void unpack_hop(WireReader& r, const ModelConfig& cfg, int cut, std::span<const HopMember> mem);

// The forward calls rank 0 announces (Transformer::forward_batch): per item the state's id, its
// first position and ids, and the options the other ranks need.
struct CallItem {
  uint64_t state_id = 0;
  int64_t first_pos = 0;
  std::vector<int32_t> ids;
  uint8_t mode = 0, completes = 1, logits = 0;  // PrefillMode, completes_prompt, LogitsWanted
};
struct Call {
  std::vector<uint64_t> released;  // states whose parts the ranks drop (after the copies)
  // states copied on rank 0 since the last call: (the copy's id, the original's id); the ranks
  // copy their parts of the original first
  struct Copy {
    uint64_t copy = 0, original = 0;
    bool operator==(const Copy&) const = default;
  };
  std::vector<Copy> copies;
  std::vector<CallItem> items;
};
std::vector<uint8_t> encode_call(const Call& c);
Call decode_call(const std::vector<uint8_t>& b);

// The transport between ranks (dist/ implements it over MPI). Messages are byte strings; a
// receive that does not complete in the link's timeout throws (the other rank died or hangs).
class StageLink {
 public:
  virtual ~StageLink() = default;
  virtual int rank() const = 0;
  virtual void send(int to, std::vector<uint8_t> msg) = 0;
  virtual std::vector<uint8_t> recv(int from) = 0;
  // Rank 0, before each forward runs: the call to every other rank.
  virtual void announce(const Call& call) = 0;
};

// An error that another rank reported through the exchange (its text names that rank).
class RemoteStageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The link itself failed (a rank died or hangs, or the transport broke): no further exchange is
// tried, since each would wait out the link's deadline again.
class StageLinkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace cedar
