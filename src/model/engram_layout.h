// Engram hash layout (spec §8.2-§8.3, docs/NUMERICS.md §E): the bucket primes and offsets of every
// Engram table, the per-layer hash multipliers, and the row ids of one position.
//
// The multipliers come from numpy (`np.random.default_rng(10007 * layer_id).integers(...)`), so
// this file also carries a bit-exact re-implementation of the three numpy pieces involved:
// SeedSequence (entropy mixing), PCG64 (128-bit LCG with XSL-RR output) and Generator.integers for
// int64 (Lemire's bounded generation, numpy's default use_masked=False).
// ref: engram.py EngramLayout.from_args, compute_hash_multipliers, NgramHashState.forward
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace cedar {

// ---- numpy-compatible random numbers --------------------------------------------------------

// numpy.random.SeedSequence(entropy) for a non-negative integer entropy, pool size 4, no spawn
// key. generate_state_u64(n) equals `SeedSequence(entropy).generate_state(n, np.uint64)`.
class NumpySeedSequence {
 public:
  explicit NumpySeedSequence(uint64_t entropy);
  const uint32_t* pool() const { return pool_; }
  std::vector<uint32_t> generate_state_u32(int n_words) const;
  std::vector<uint64_t> generate_state_u64(int n_words) const;

 private:
  uint32_t pool_[4];
};

// numpy.random.PCG64 (the default bit generator of default_rng).
class NumpyPCG64 {
 public:
  explicit NumpyPCG64(uint64_t seed);  // = PCG64(SeedSequence(seed))
  NumpyPCG64(unsigned __int128 initstate, unsigned __int128 initseq);  // pcg64_srandom_r
  uint64_t next_uint64();
  uint32_t next_uint32();  // numpy buffers the high half of a 64-bit draw for the next call
  unsigned __int128 state() const { return state_; }
  unsigned __int128 inc() const { return inc_; }

 private:
  void step();
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

// Generator.integers(low, high, size=n, dtype=np.int64) with high exclusive (endpoint=False).
// Throws std::runtime_error when high <= low.
std::vector<int64_t> numpy_integers_int64(NumpyPCG64& rng, int64_t low, int64_t high, int n);

// ---- the layout -------------------------------------------------------------------------------

struct EngramLayout {
  std::vector<int> layer_ids;  // engram_layer_ids, in config order
  int max_ngram_size = 0;      // orders 2..max_ngram_size
  int n_heads = 0;
  int head_dim = 0;
  int64_t compressed_vocab_size = 0;  // V: every multiplier derives from it
  // primes[i][n-2][h]: bucket modulus of engram layer i (position in layer_ids), order n, head h
  std::vector<std::vector<std::vector<int64_t>>> primes;
  // offsets[i][col], col = (n-2)*n_heads + h: running sum of the layer's flattened primes
  std::vector<std::vector<int64_t>> offsets;
  std::vector<int64_t> num_embeddings;            // per layer: sum of its primes (table rows)
  std::vector<std::vector<int64_t>> multipliers;  // [i][s], s = 0..max_ngram_size-1, odd

  int n_cols() const { return (max_ngram_size - 1) * n_heads; }  // rows gathered per position

  // Builds everything from the config's engram_* keys (ignores cfg.engram_num_embeddings; compare
  // num_embeddings against it to validate a config). Throws std::runtime_error naming the key when
  // the engram keys are unusable. An empty engram_layer_ids gives an empty layout.
  static EngramLayout build(const ModelConfig& cfg);
};

// Primality of a non-negative 64-bit integer (deterministic Miller-Rabin).
bool is_prime_u64(uint64_t n);

// The bucket primes for `n_layers` engram layers: per layer, per order, per head, the smallest
// prime above the previous one (the search restarts at vocab_size - 1 for each order), never
// reusing a prime anywhere. ref: engram.py find_next_prime / EngramLayout.from_args
std::vector<std::vector<std::vector<int64_t>>> engram_primes(int n_layers, int max_ngram_size,
                                                             int n_heads, int64_t vocab_size);

// `2*U + 1`, U = default_rng(10007*layer_id).integers(0, max(1, (2^63-1)//V//2), size=n, int64).
std::vector<int64_t> engram_hash_multipliers(int layer_id, int64_t compressed_vocab_size, int n);

// Row ids of one position for engram layer `layer_index` (position in layer_ids): `ids[s]` is the
// mapped id t_s of token p-s (already replaced by the pad id where history is blocked),
// s = 0..max_ngram_size-1. Returns n_cols() row ids, ordered (order 2 heads 0.., order 3 ..).
// Throws std::runtime_error when an id is outside [0, compressed_vocab_size).
std::vector<int64_t> engram_hash_rows(const EngramLayout& layout, int layer_index,
                                      const int64_t* ids);

}  // namespace cedar
