// libFuzzer: a GGUF file's bytes -> the container parser and validator (counts, lengths, value
// types, tensor shapes, types, offsets, overlaps), the typed reads of every key, and the model
// config derived from the keys (config_from_gguf: the dialect, the bounds every count must pass
// before the layers are walked or the Engram primes searched, the tensor-presence roles,
// validate()). Hostile files must be refused with an error naming the problem -- never read out
// of bounds, never a loop or an allocation sized by a claim (libFuzzer's -timeout and
// -rss_limit_mb catch those).
#include <cstddef>
#include <cstdint>
#include <exception>

#include "model/gguf.h"
#include "model/gguf_dialect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const cedar::gguf::Header h = cedar::gguf::parse_header(data, size, "fuzz.gguf");
    for (const auto& [key, v] : h.kv) {
      // every typed read either returns or throws; none may read outside the file
      for (auto read : {+[](const cedar::gguf::Header&hh, std::string_view k) {
                          (void)cedar::gguf::get_int_array(hh, k, "f");
                        },
                        +[](const cedar::gguf::Header&hh, std::string_view k) {
                          (void)cedar::gguf::get_uint_array(hh, k, "f");
                        },
                        +[](const cedar::gguf::Header&hh, std::string_view k) {
                          (void)cedar::gguf::get_float_array(hh, k, "f");
                        },
                        +[](const cedar::gguf::Header&hh, std::string_view k) {
                          (void)cedar::gguf::get_uint(hh, k, "f");
                        },
                        +[](const cedar::gguf::Header&hh, std::string_view k) {
                          (void)cedar::gguf::get_float(hh, k, "f");
                        },
                        +[](const cedar::gguf::Header&hh, std::string_view k) {
                          (void)cedar::gguf::get_bool(hh, k, "f");
                        }}) {
        try {
          read(h, key);
        } catch (const std::exception&) {
        }
      }
    }
    (void)cedar::gguf::config_from_gguf(h, "fuzz.gguf");
  } catch (const std::exception&) {
  }
  return 0;
}
