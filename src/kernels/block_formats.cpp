// The GGUF block formats' WeightFormat <-> ggml type id mapping (kernel_table.h).
#include "kernels/ggml_blocks.h"
#include "kernels/kernel_table.h"

namespace cedar {

namespace {

// in WeightFormat order from kQ8_0
constexpr uint32_t kTypes[] = {ggml::kQ8_0,    ggml::kQ4_0,  ggml::kQ5_0,  ggml::kQ2_K,
                               ggml::kQ3_K,    ggml::kQ4_K,  ggml::kQ5_K,  ggml::kQ6_K,
                               ggml::kIQ2_XXS, ggml::kIQ1_S, ggml::kIQ1_M, ggml::kMXFP4};
static_assert(sizeof(kTypes) / sizeof(kTypes[0]) == kBlockFormatsEnd - int(WeightFormat::kQ8_0));

}  // namespace

bool block_format(uint32_t ggml_type, WeightFormat* f) {
  for (int i = 0; i < int(sizeof(kTypes) / sizeof(kTypes[0])); ++i)
    if (kTypes[i] == ggml_type) {
      *f = WeightFormat(int(WeightFormat::kQ8_0) + i);
      return true;
    }
  return false;
}

uint32_t ggml_type_of(WeightFormat f) {
  const int i = int(f) - int(WeightFormat::kQ8_0);
  return i >= 0 && i < kBlockFormatsEnd - int(WeightFormat::kQ8_0) ? kTypes[i] : 0;
}

}  // namespace cedar
