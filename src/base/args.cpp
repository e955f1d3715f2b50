#include "base/args.h"

#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace cedar {

namespace {

// The placeholder a flag's help shows for its value, by the conventions of cedar's flags (the
// same name means the same kind of value in every command).
std::string value_name_for(const std::string& name) {
  static const std::map<std::string, std::string> kNames = {
      {"model", "PATH"},       {"file", "FILE"},          {"from", "PATH"},
      {"to", "FILE"},          {"out", "PATH"},           {"tokenizer", "FILE"},
      {"config", "FILE"},      {"compact", "DIR"},        {"cache-dir", "DIR"},
      {"image", "FILE"},       {"json", "FILE"},          {"prompt", "TEXT"},
      {"system", "TEXT"},      {"stop", "TEXT"},          {"host", "HOST"},
      {"api-key", "KEY"},      {"kernels", "NAME"},       {"head-type", "TYPE"},
      {"preset", "NAME"},      {"type", "TYPE"},          {"log-format", "FORMAT"},
      {"cors", "ORIGINS"},     {"allowed-hosts", "HOSTS"}, {"mem-budget", "SIZE"},
      {"kv-ram", "SIZE"},      {"temp", "T"},             {"top-p", "P"},
      {"min-p", "P"},          {"spec-confidence", "P"},  {"speculative", "MODE"},
      {"model-name", "NAME"},  {"alias", "NAME"},         {"cache-ram", "MIB"},
      {"cache-disk", "MIB"},   {"image-budget", "MPX"},   {"request-timeout", "SECONDS"},
      {"keepalive-ms", "MS"},  {"max-body", "BYTES"},     {"think", "EFFORT"},
      {"seed", "N"},           {"ranks", "N"},            {"tensor", "NAME"},
      {"ids", "IDS"},          {"plans", "LIST"},         {"batch", "LIST"},
  };
  const auto it = kNames.find(name);
  return it != kNames.end() ? it->second : "N";
}

bool env_true(const std::string& v, bool* out) {
  for (const char* t : {"1", "true", "yes", "on"})
    if (v == t) return *out = true;
  for (const char* f : {"0", "false", "no", "off", ""})
    if (v == f) return !(*out = false);
  return false;
}

}  // namespace

Args::Args(std::string command, std::vector<Option> options)
    : command_(std::move(command)), options_(std::move(options)) {}

const Args::Option* Args::find(const std::string& name, bool is_short) const {
  for (const auto& o : options_) {
    if ((is_short ? o.short_name : o.long_name) == name && !name.empty()) return &o;
  }
  return nullptr;
}

std::string Args::env_name(const std::string& long_name) const {
  if (env_prefix_.empty()) return "";
  std::string v = env_prefix_;
  for (char c : long_name) v += c == '-' ? '_' : char(std::toupper((unsigned char)c));
  return v;
}

std::string Args::source(const std::string& name) const {
  return from_env_.count(name) ? "$" + env_name(name) + " (--" + name + ")" : "option --" + name;
}

void Args::parse(int argc, char** argv, const char* env_prefix) {
  env_prefix_ = env_prefix ? env_prefix : "";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit((unsigned char)a[1]) != 0))) {
      bool is_short = a[1] != '-';
      std::string name = is_short ? a.substr(1) : a.substr(2);
      std::string value;
      bool has_inline = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_inline = true;
      }
      const Option* o = find(name, is_short);
      if (!o) throw UsageError("unknown option '" + a + "' (see cedar " + command_ + " --help)");
      if (o->takes_value) {
        if (!has_inline) {
          if (i + 1 >= argc) throw UsageError("option --" + o->long_name + " needs a value");
          value = argv[++i];
        }
        values_[o->long_name] = value;
      } else {
        if (has_inline) throw UsageError("option --" + o->long_name + " takes no value");
        values_[o->long_name] = "1";
      }
    } else {
      positional_.push_back(a);
    }
  }
  if (env_prefix_.empty()) return;
  for (const auto& o : options_) {
    if (values_.count(o.long_name)) continue;
    const std::string var = env_name(o.long_name);
    const char* v = std::getenv(var.c_str());
    if (v == nullptr) continue;
    if (o.takes_value) {
      values_[o.long_name] = v;
    } else {
      bool on = false;
      if (!env_true(v, &on))
        throw UsageError("$" + var + " must be 1/true/yes/on or 0/false/no/off, got '" +
                         std::string(v) + "'");
      if (!on) continue;
      values_[o.long_name] = "1";
    }
    from_env_.insert(o.long_name);
  }
}

std::string Args::usage() const {
  std::string s = "usage: cedar " + command_ + " [options]\n";
  for (const auto& o : options_) {
    std::string left = "  ";
    left += o.short_name.empty() ? "    " : "-" + o.short_name + ", ";
    left += "--" + o.long_name;
    if (o.takes_value) left += " " + (o.value_name.empty() ? value_name_for(o.long_name) : o.value_name);
    if (left.size() < 30) left.resize(30, ' ');
    s += left + " " + o.help;
    if (!env_prefix_.empty()) s += " [$" + env_name(o.long_name) + "]";
    s += "\n";
  }
  return s;
}

bool Args::has(const std::string& name) const { return values_.count(name) != 0; }

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

std::string Args::require(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw UsageError("missing required option --" + name);
  return it->second;
}

long long Args::get_int(const std::string& name, long long def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0')
    throw UsageError(source(name) + " expects an integer, got '" + it->second + "'");
  return v;
}

double Args::get_double(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    throw UsageError(source(name) + " expects a number, got '" + it->second + "'");
  return v;
}

}  // namespace cedar
