// libFuzzer: a GGUF file's bytes -> the container parser and validator (counts, lengths, value
// types, tensor shapes, types, offsets, overlaps) and the typed reads of every key. Hostile files
// must be refused with an error naming the problem, never read out of bounds.
#include <cstddef>
#include <cstdint>
#include <exception>

#include "model/gguf.h"

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
  } catch (const std::exception&) {
  }
  return 0;
}
