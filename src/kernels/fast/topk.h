// Top-k by radix select, bit-exact with the reference rule (torch.topk on CUDA, canonical rule
// 5): the k largest keys in the radix order of the fp32 bit patterns (fmath::radix_key), ties
// at the k-th key to the lower index, the chosen indices written in ascending order.
//
// O(n): the keys are computed once; byte histograms, most significant byte first, narrow the
// k-th key down to a prefix P of (32 - s) bits that either is the whole key (s = 0) or whose
// every key is chosen; candidates with the current prefix are compacted between levels. One
// final scan in index order takes the keys above P and the first `need` keys equal to P.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace cedar::kernels::fast {
namespace {

// Per-thread key storage: [2n] uint32 (keys, then compacted candidates); grows, freed at exit.
struct KeyBuffer {
  uint32_t* p = nullptr;
  size_t n = 0;
  ~KeyBuffer() { std::free(p); }
  uint32_t* get(size_t words) {
    if (words > n) {
      std::free(p);
      p = static_cast<uint32_t*>(std::malloc(words * sizeof(uint32_t)));
      if (!p) std::abort();
      n = words;
    }
    return p;
  }
};
inline uint32_t* key_buffer(size_t words) {
  static thread_local KeyBuffer b;
  return b.get(words);
}

// ref: fmath::radix_key on eight lanes: negative values bit-inverted, others with the sign set.
inline __m256i radix_keys8(const float* v) {
  const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(v));
  const __m256i neg = _mm256_srai_epi32(u, 31);  // all ones where the sign is set
  const __m256i top = _mm256_set1_epi32(int32_t(0x80000000u));
  return _mm256_xor_si256(u, _mm256_or_si256(neg, top));
}
inline uint32_t radix_key1(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Keys of v[0..n) into key[], with the histogram of their top byte (four interleaved copies, so
// runs of equal bytes do not wait on one counter).
inline void keys_and_top_histogram(const float* v, int n, uint32_t* key, uint32_t* hist) {
  uint32_t h4[4][256];
  std::memset(h4, 0, sizeof h4);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(key + i), radix_keys8(v + i));
    for (int j = 0; j < 8; ++j) ++h4[j & 3][key[i + j] >> 24];
  }
  for (; i < n; ++i) {
    key[i] = radix_key1(v[i]);
    ++h4[0][key[i] >> 24];
  }
  for (int b = 0; b < 256; ++b) hist[b] = h4[0][b] + h4[1][b] + h4[2][b] + h4[3][b];
}

// The bin holding the need-th largest key (counting from bin 255 down); need becomes its rank
// within that bin.
inline int find_bin(const uint32_t* hist, int* need) {
  int b = 255;
  while (int(hist[b]) < *need) *need -= int(hist[b--]);
  return b;
}

// ref: kernel_table.h topk (torch.topk on CUDA)
void topk(const float* v, int n, int k, int* out) {
  if (k > n) k = n;
  if (k <= 0) return;
  if (k == n) {
    for (int i = 0; i < n; ++i) out[i] = i;
    return;
  }
  uint32_t* key = key_buffer(2 * size_t(n));
  uint32_t* cand = key + n;
  uint32_t hist[256];
  keys_and_top_histogram(v, n, key, hist);
  int need = k, shift = 24;
  uint32_t prefix = uint32_t(find_bin(hist, &need));  // key >> shift of the k-th key
  const uint32_t* src = key;
  int m = n;
  while (shift > 0 && int(hist[prefix & 255]) != need) {
    // keep the candidates with this prefix and histogram their next byte
    std::memset(hist, 0, sizeof hist);
    int c = 0;
    for (int i = 0; i < m; ++i) {
      const uint32_t x = src[i];
      if ((x >> shift) == prefix) {
        cand[c++] = x;
        ++hist[(x >> (shift - 8)) & 255];
      }
    }
    shift -= 8;
    prefix = (prefix << 8) | uint32_t(find_bin(hist, &need));
    src = cand;
    m = c;
  }
  // every key whose prefix is above P, and the first `need` keys equal to P, in index order
  const __m128i sh = _mm_cvtsi32_si128(shift);
  const __m256i pv = _mm256_set1_epi32(int32_t(prefix));
  int o = 0, i = 0;
  for (; i + 8 <= n && o < k; i += 8) {
    const __m256i x =
        _mm256_srl_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + i)), sh);
    // x >= P (unsigned) <=> max(x, P) == x
    const __m256i ge = _mm256_cmpeq_epi32(_mm256_max_epu32(x, pv), x);
    unsigned mask = unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(ge)));
    while (mask) {
      const int j = __builtin_ctz(mask);
      mask &= mask - 1;
      if ((key[i + j] >> shift) != prefix) {
        out[o++] = i + j;
      } else if (need > 0) {
        out[o++] = i + j;
        --need;
      }
    }
  }
  for (; i < n && o < k; ++i) {
    const uint32_t x = key[i] >> shift;
    if (x > prefix || (x == prefix && need-- > 0)) out[o++] = i;
  }
}

}  // namespace
}  // namespace cedar::kernels::fast
