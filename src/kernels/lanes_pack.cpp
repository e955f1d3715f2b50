// pack_bf16_lanes (kernel_table.h): the layout of the bf16_lanes product, the same for every
// table.
#include <cstring>

#include "kernels/kernel_table.h"

namespace cedar {

size_t lanes_packed_words(int N, int K) { return size_t((N + 15) / 16) * 16 * size_t(K / 2); }

void pack_bf16_lanes(const uint16_t* w, int N, int K, uint32_t* out) {
  const int P = K / 2, groups = (N + 15) / 16;
  std::memset(out, 0, lanes_packed_words(N, K) * sizeof(uint32_t));
  for (int g = 0; g < groups; ++g)
    for (int l = 0; l < 16 && 16 * g + l < N; ++l) {
      const uint16_t* row = w + size_t(16 * g + l) * size_t(K);
      uint32_t* dst = out + size_t(g) * size_t(P) * 16 + size_t(l);
      for (int j = 0; j < P; ++j)
        dst[size_t(j) * 16] = uint32_t(row[2 * j]) | (uint32_t(row[2 * j + 1]) << 16);
    }
}

}  // namespace cedar
