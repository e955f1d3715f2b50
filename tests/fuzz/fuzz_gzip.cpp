// libFuzzer: a compact.safetensors.gz's bytes -> inflate_gzip (capped at 1 MiB here) -> the
// safetensors header parser, the path `cedar expand-model` reads the default model by. A damaged
// or hostile file must be refused with an error, never crash, hang or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "base/gzip_file.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const std::vector<uint8_t> raw = cedar::inflate_gzip(data, size, 1 << 20, "fuzz.gz");
    (void)cedar::parse_safetensors_header(raw.data(), raw.size(), "fuzz.safetensors");
  } catch (const std::exception&) {
  }
  return 0;
}
