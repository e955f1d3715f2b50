#include "model/engram_layout.h"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

namespace cedar {

namespace {

using u128 = unsigned __int128;

// numpy/random/bit_generator.pyx constants of the SeedSequence hash.
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;  // 4 bytes * 8 / 2
constexpr int kPoolSize = 4;

// All arithmetic is uint32 with wrap-around, exactly as numpy does it on np.uint32 scalars.
uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

// PCG's 128-bit default multiplier (pcg_variants.h PCG_DEFAULT_MULTIPLIER_128).
constexpr u128 kPcgMult = (u128(0x2360ED051FC65DA4ull) << 64) | u128(0x4385DF649FCCF645ull);

}  // namespace

// ---- SeedSequence ---------------------------------------------------------------------------

// ref: numpy bit_generator.pyx SeedSequence.mix_entropy (entropy words = the integer split into
// little-endian uint32 words; 0 -> one zero word).
NumpySeedSequence::NumpySeedSequence(uint64_t entropy) {
  std::vector<uint32_t> words;
  do {
    words.push_back(uint32_t(entropy & 0xffffffffu));
    entropy >>= 32;
  } while (entropy != 0);
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i)
    pool_[i] = hashmix(i < int(words.size()) ? words[size_t(i)] : 0u, hash_const);
  for (int src = 0; src < kPoolSize; ++src)
    for (int dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash_const));
  for (size_t src = kPoolSize; src < words.size(); ++src)
    for (int dst = 0; dst < kPoolSize; ++dst)
      pool_[dst] = mix(pool_[dst], hashmix(words[src], hash_const));
}

// ref: numpy SeedSequence.generate_state (cycles over the pool with the INIT_B/MULT_B hash).
std::vector<uint32_t> NumpySeedSequence::generate_state_u32(int n_words) const {
  std::vector<uint32_t> out(static_cast<size_t>(n_words));
  uint32_t hash_const = kInitB;
  for (int i = 0; i < n_words; ++i) {
    uint32_t v = pool_[i % kPoolSize];
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    out[size_t(i)] = v;
  }
  return out;
}

// uint64 words are the uint32 stream viewed little-endian (word 2k low half, 2k+1 high half).
std::vector<uint64_t> NumpySeedSequence::generate_state_u64(int n_words) const {
  auto w = generate_state_u32(2 * n_words);
  std::vector<uint64_t> out(static_cast<size_t>(n_words));
  for (int i = 0; i < n_words; ++i)
    out[size_t(i)] = uint64_t(w[size_t(2 * i)]) | (uint64_t(w[size_t(2 * i + 1)]) << 32);
  return out;
}

// ---- PCG64 ----------------------------------------------------------------------------------

// ref: numpy _pcg64.pyx PCG64._seed_seq: 4 uint64 words; state = (w0 << 64) | w1,
// increment seed = (w2 << 64) | w3.
NumpyPCG64::NumpyPCG64(uint64_t seed) {
  auto w = NumpySeedSequence(seed).generate_state_u64(4);
  *this = NumpyPCG64((u128(w[0]) << 64) | w[1], (u128(w[2]) << 64) | w[3]);
}

// ref: pcg64.h pcg_setseq_128_srandom_r
NumpyPCG64::NumpyPCG64(u128 initstate, u128 initseq) {
  state_ = 0;
  inc_ = (initseq << 1) | 1u;
  step();
  state_ += initstate;
  step();
}

void NumpyPCG64::step() { state_ = state_ * kPcgMult + inc_; }

// ref: pcg64.h pcg_setseq_128_xsl_rr_64_random_r: advance, then XSL-RR of the new state.
uint64_t NumpyPCG64::next_uint64() {
  step();
  uint64_t x = uint64_t(state_ >> 64) ^ uint64_t(state_);
  unsigned rot = unsigned(state_ >> 122);
  return (x >> rot) | (x << ((64u - rot) & 63u));
}

// ref: pcg64.h pcg64_next32
uint32_t NumpyPCG64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = uint32_t(next >> 32);
  return uint32_t(next & 0xffffffffu);
}

// ---- Generator.integers ---------------------------------------------------------------------

namespace {

// ref: numpy distributions.c buffered_bounded_lemire_uint32 (for a uint64 fill the "buffer" is
// unused; the 32-bit draws come from next_uint32, which buffers inside the bit generator).
uint32_t bounded_lemire_uint32(NumpyPCG64& g, uint32_t rng) {
  const uint32_t rng_excl = rng + 1;
  uint64_t m = uint64_t(g.next_uint32()) * rng_excl;
  uint32_t leftover = uint32_t(m & 0xffffffffu);
  if (leftover < rng_excl) {
    const uint32_t threshold = (std::numeric_limits<uint32_t>::max() - rng) % rng_excl;
    while (leftover < threshold) {
      m = uint64_t(g.next_uint32()) * rng_excl;
      leftover = uint32_t(m & 0xffffffffu);
    }
  }
  return uint32_t(m >> 32);
}

// ref: numpy distributions.c bounded_lemire_uint64
uint64_t bounded_lemire_uint64(NumpyPCG64& g, uint64_t rng) {
  const uint64_t rng_excl = rng + 1;
  u128 m = u128(g.next_uint64()) * rng_excl;
  uint64_t leftover = uint64_t(m);
  if (leftover < rng_excl) {
    const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - rng) % rng_excl;
    while (leftover < threshold) {
      m = u128(g.next_uint64()) * rng_excl;
      leftover = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

}  // namespace

// ref: numpy _bounded_integers.pyx _rand_int64 -> distributions.c random_bounded_uint64_fill
// with use_masked=False: rng = (high - 1) - low, off = low.
std::vector<int64_t> numpy_integers_int64(NumpyPCG64& g, int64_t low, int64_t high, int n) {
  if (high <= low)
    throw std::runtime_error("numpy_integers_int64: high (" + std::to_string(high) +
                             ") must be > low (" + std::to_string(low) + ")");
  const uint64_t rng = uint64_t(high - 1) - uint64_t(low);
  const uint64_t off = uint64_t(low);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    uint64_t v;
    if (rng == 0)
      v = 0;
    else if (rng <= 0xffffffffull)
      v = rng == 0xffffffffull ? g.next_uint32() : bounded_lemire_uint32(g, uint32_t(rng));
    else if (rng == std::numeric_limits<uint64_t>::max())
      v = g.next_uint64();
    else
      v = bounded_lemire_uint64(g, rng);
    out[size_t(i)] = int64_t(off + v);
  }
  return out;
}

// ---- primes, multipliers, layout ------------------------------------------------------------

bool is_prime_u64(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p :
       {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull})
    if (n % p == 0) return n == p;
  uint64_t d = n - 1;
  int r = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++r;
  }
  auto mulmod = [n](uint64_t a, uint64_t b) { return uint64_t(u128(a) * b % n); };
  auto powmod = [&](uint64_t a, uint64_t e) {
    uint64_t result = 1;
    a %= n;
    while (e) {
      if (e & 1) result = mulmod(result, a);
      a = mulmod(a, a);
      e >>= 1;
    }
    return result;
  };
  // These 12 bases make Miller-Rabin deterministic for every n < 2^64.
  for (uint64_t a :
       {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull}) {
    uint64_t x = powmod(a, d);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < r; ++i) {
      x = mulmod(x, x);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

std::vector<std::vector<std::vector<int64_t>>> engram_primes(int n_layers, int max_ngram_size,
                                                             int n_heads, int64_t vocab_size) {
  std::set<int64_t> seen;
  std::vector<std::vector<std::vector<int64_t>>> primes(static_cast<size_t>(n_layers));
  for (auto& layer : primes) {
    for (int n = 2; n <= max_ngram_size; ++n) {
      std::vector<int64_t> heads;
      int64_t current = vocab_size - 1;  // restarted for every order
      for (int h = 0; h < n_heads; ++h) {
        int64_t c = current + 1;
        while (!is_prime_u64(uint64_t(c)) || seen.count(c)) ++c;
        seen.insert(c);
        heads.push_back(c);
        current = c;
      }
      layer.push_back(std::move(heads));
    }
  }
  return primes;
}

std::vector<int64_t> engram_hash_multipliers(int layer_id, int64_t compressed_vocab_size, int n) {
  if (compressed_vocab_size <= 0)
    throw std::runtime_error("engram_compressed_vocab_size must be positive, got " +
                             std::to_string(compressed_vocab_size));
  if (layer_id < 0) throw std::runtime_error("engram layer id must be >= 0");
  const int64_t bound =
      std::max<int64_t>(1, (std::numeric_limits<int64_t>::max() / compressed_vocab_size) / 2);
  NumpyPCG64 g(uint64_t(10007) * uint64_t(layer_id));
  auto u = numpy_integers_int64(g, 0, bound, n);
  for (auto& v : u) v = 2 * v + 1;
  return u;
}

EngramLayout EngramLayout::build(const ModelConfig& cfg) {
  EngramLayout L;
  L.layer_ids = cfg.engram_layer_ids;
  if (L.layer_ids.empty()) return L;
  auto need = [](bool ok, const char* key, const std::string& what) {
    if (!ok) throw std::runtime_error(std::string("config key ") + key + ": " + what);
  };
  need(cfg.engram_max_ngram_size >= 2, "engram_max_ngram_size", "must be >= 2");
  need(cfg.engram_n_heads >= 1, "engram_n_heads", "must be >= 1");
  need(cfg.engram_head_dim >= 32 && cfg.engram_head_dim % 32 == 0, "engram_head_dim",
       "must be a positive multiple of 32");
  need(cfg.engram_vocab_size >= 2, "engram_vocab_size", "must be >= 2");
  need(cfg.engram_compressed_vocab_size >= 1, "engram_compressed_vocab_size", "must be >= 1");
  for (int id : L.layer_ids) need(id >= 0, "engram_layer_ids", "ids must be >= 0");
  L.max_ngram_size = cfg.engram_max_ngram_size;
  L.n_heads = cfg.engram_n_heads;
  L.head_dim = cfg.engram_head_dim;
  L.compressed_vocab_size = cfg.engram_compressed_vocab_size;
  L.primes =
      engram_primes(int(L.layer_ids.size()), L.max_ngram_size, L.n_heads, cfg.engram_vocab_size);
  for (size_t i = 0; i < L.layer_ids.size(); ++i) {
    std::vector<int64_t> offs;
    int64_t sum = 0;
    for (const auto& order : L.primes[i])
      for (int64_t p : order) {
        offs.push_back(sum);
        sum += p;
      }
    L.offsets.push_back(std::move(offs));
    L.num_embeddings.push_back(sum);
    L.multipliers.push_back(
        engram_hash_multipliers(L.layer_ids[i], L.compressed_vocab_size, L.max_ngram_size));
  }
  return L;
}

// ref: engram.py NgramHashState.forward (products, rolling XOR, `% prime + offset`)
std::vector<int64_t> engram_hash_rows(const EngramLayout& layout, int layer_index,
                                      const int64_t* ids) {
  if (layer_index < 0 || size_t(layer_index) >= layout.layer_ids.size())
    throw std::runtime_error("engram_hash_rows: engram layer index " + std::to_string(layer_index) +
                             " out of range");
  const auto& mu = layout.multipliers[size_t(layer_index)];
  const auto& offs = layout.offsets[size_t(layer_index)];
  for (int s = 0; s < layout.max_ngram_size; ++s)
    if (ids[s] < 0 || ids[s] >= layout.compressed_vocab_size)
      throw std::runtime_error("engram_hash_rows: mapped token id " + std::to_string(ids[s]) +
                               " outside [0, engram_compressed_vocab_size=" +
                               std::to_string(layout.compressed_vocab_size) + ")");
  // t < V and mu <= 2*((2^63-1)//V//2)+1 keep every product inside int64 and non-negative, so
  // the XOR is non-negative and C++ % equals torch's remainder.
  std::vector<int64_t> rows;
  rows.reserve(size_t(layout.n_cols()));
  int64_t rolling = ids[0] * mu[0];
  for (int n = 1; n < layout.max_ngram_size; ++n) {
    rolling ^= ids[n] * mu[size_t(n)];
    const auto& primes = layout.primes[size_t(layer_index)][size_t(n - 1)];
    for (int h = 0; h < layout.n_heads; ++h)
      rows.push_back(rolling % primes[size_t(h)] + offs[size_t((n - 1) * layout.n_heads + h)]);
  }
  return rows;
}

}  // namespace cedar
