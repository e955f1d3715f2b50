#include "app/sampling_flags.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "model/generation_config.h"

namespace cedar::app {

namespace {

double number(const Args& a, const char* name, double def, double lo, double hi, bool lo_open,
              const char* range) {
  if (!a.has(name)) return def;
  double v;
  try {
    v = a.get_double(name, def);
  } catch (const std::exception&) {
    v = NAN;
  }
  if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo))
    throw std::invalid_argument(std::string("option --") + name + " must be " + range + ", got " +
                                a.get(name));
  return v;
}

}  // namespace

std::vector<Args::Option> with_sampling_options(std::vector<Args::Option> options) {
  options.push_back({"temp", "", true,
                     "temperature (default: the model's generation_config.json, else 1; 0 = "
                     "greedy)"});
  options.push_back({"top-p", "", true, "top-p (default: generation_config.json, else 1 = off)"});
  options.push_back({"top-k", "", true, "top-k (default: generation_config.json, else 0 = off)"});
  options.push_back({"min-p", "", true, "min-p (default: generation_config.json, else 0 = off)"});
  return options;
}

SamplingDefaults sampling_defaults(const Args& a, const std::string& model_path, const char* who) {
  SamplingDefaults d;
  const GenerationDefaults g = read_generation_config(model_path);
  if (!g.warning.empty()) std::fprintf(stderr, "%s: warning: %s\n", who, g.warning.c_str());
  if (!g.source.empty()) {
    d.temperature = g.temperature.value_or(d.temperature);
    d.top_p = g.top_p.value_or(d.top_p);
    d.top_k = g.top_k.value_or(d.top_k);
    d.min_p = g.min_p.value_or(d.min_p);
    d.from = "generation_config.json";
  }
  d.temperature = number(a, "temp", d.temperature, 0.0, 1e6, false, ">= 0");
  d.top_p = number(a, "top-p", d.top_p, 0.0, 1.0, true, "in (0, 1]");
  d.min_p = number(a, "min-p", d.min_p, 0.0, 1.0, false, "in [0, 1]");
  const double k = number(a, "top-k", d.top_k, 0.0, 1e9, false, "an integer >= 0");
  if (k != std::floor(k))
    throw std::invalid_argument("option --top-k must be an integer >= 0, got " + a.get("top-k"));
  d.top_k = int(k);
  if (a.has("temp") || a.has("top-p") || a.has("top-k") || a.has("min-p"))
    d.from += d.from.empty() ? "flags" : " and flags";
  return d;
}

}  // namespace cedar::app
