// libFuzzer: config.json text -> ModelConfig::from_text (depth check, JSON parse, every key's type,
// check_limits(), validate()), and for a config that passes, what the loader derives from it
// next: the Engram layout (a prime search per hash head) and the tensor inventory (capped here as
// Checkpoint::open caps it by the file's tensors). A hostile config must be refused naming its
// key -- never a crash, a loop or an allocation sized by a claim (libFuzzer's -timeout and
// -rss_limit_mb catch those).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/engram_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const cedar::ModelConfig c = cedar::ModelConfig::from_text(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
    (void)cedar::EngramLayout::build(c);
    (void)cedar::expected_tensors(c, size_t(1) << 16);
  } catch (const std::exception&) {
  }
  return 0;
}
