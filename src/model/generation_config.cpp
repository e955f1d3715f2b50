#include "model/generation_config.h"

#include <sys/stat.h>

#include <cmath>
#include <stdexcept>

#include "base/file_reader.h"
#include "base/json_limits.h"

namespace cedar {

namespace {

constexpr uint64_t kMaxGenerationConfigBytes = uint64_t(1) << 20;

// The number at `key`, if present and in [lo, hi] (lo excluded when lo_open); throws naming it.
std::optional<double> number(const nlohmann::ordered_json& j, const char* key, double lo, double hi,
                             bool lo_open) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw std::runtime_error(std::string(key) + " is not a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo))
    throw std::runtime_error(std::string(key) + " = " + it->dump() + " is out of range");
  return v;
}

}  // namespace

GenerationDefaults read_generation_config(const std::string& model_path) {
  GenerationDefaults d;
  struct stat st {};
  if (stat(model_path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return d;  // (a GGUF file)
  const std::string path = model_path + "/generation_config.json";
  if (stat(path.c_str(), &st) != 0) return d;
  try {
    std::string why;
    const auto j = parse_untrusted_json(
        read_regular_file(path, kMaxGenerationConfigBytes, "generation_config.json"), &why);
    if (j.is_discarded()) throw std::runtime_error(why);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    GenerationDefaults got;
    got.temperature = number(j, "temperature", 0.0, 1e6, false);
    got.top_p = number(j, "top_p", 0.0, 1.0, true);
    got.min_p = number(j, "min_p", 0.0, 1.0, false);
    if (const auto k = number(j, "top_k", 0.0, 1e9, false)) {
      if (*k != std::floor(*k)) throw std::runtime_error("top_k is not an integer");
      got.top_k = int(*k);
    }
    const auto ds = j.find("do_sample");
    if (ds != j.end() && ds->is_boolean() && !ds->get<bool>()) got.temperature = 0.0;
    got.source = path;
    return got;
  } catch (const std::exception& e) {
    d.warning = path + " is not used: " + e.what();
    return d;
  }
}

}  // namespace cedar
