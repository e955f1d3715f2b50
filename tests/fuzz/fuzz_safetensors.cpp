// libFuzzer: a safetensors file's bytes -> the header parser and validator (lengths, offsets,
// dtypes, shapes). Hostile checkpoints must be refused with an error naming the problem.
#include <cstddef>
#include <cstdint>
#include <exception>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)cedar::parse_safetensors_header(data, size, "fuzz.safetensors");
  } catch (const std::exception&) {
  }
  return 0;
}
