// libFuzzer: tokenizer.json text -> the tokenizer loader (the streamed vocab/merges, added tokens,
// validation); a tokenizer that loads then encodes and decodes a fixed text.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto tok = cedar::text::Tokenizer::from_json_text(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz tokenizer.json");
    const auto ids = tok.encode("Hello, world! 你好 <think>", /*allow_special=*/true);
    (void)tok.decode(ids);
  } catch (const std::exception&) {
  }
  return 0;
}
