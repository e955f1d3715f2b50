#include "base/args.h"

#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace cedar {

Args::Args(std::string command, std::vector<Option> options)
    : command_(std::move(command)), options_(std::move(options)) {}

const Args::Option* Args::find(const std::string& name, bool is_short) const {
  for (const auto& o : options_) {
    if ((is_short ? o.short_name : o.long_name) == name && !name.empty()) return &o;
  }
  return nullptr;
}

void Args::parse(int argc, char** argv) {
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
      if (!o) throw std::runtime_error("unknown option '" + a + "' (see cedar " + command_ + " --help)");
      if (o->takes_value) {
        if (!has_inline) {
          if (i + 1 >= argc) throw std::runtime_error("option --" + o->long_name + " needs a value");
          value = argv[++i];
        }
        values_[o->long_name] = value;
      } else {
        if (has_inline) throw std::runtime_error("option --" + o->long_name + " takes no value");
        values_[o->long_name] = "1";
      }
    } else {
      positional_.push_back(a);
    }
  }
}

std::string Args::usage() const {
  std::string s = "usage: cedar " + command_ + " [options]\n";
  for (const auto& o : options_) {
    std::string left = "  ";
    left += o.short_name.empty() ? "    " : "-" + o.short_name + ", ";
    left += "--" + o.long_name + (o.takes_value ? " V" : "");
    if (left.size() < 28) left.resize(28, ' ');
    s += left + " " + o.help + "\n";
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
  if (it == values_.end()) throw std::runtime_error("missing required option --" + name);
  return it->second;
}

long long Args::get_int(const std::string& name, long long def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0')
    throw std::runtime_error("option --" + name + " expects an integer, got '" + it->second + "'");
  return v;
}

double Args::get_double(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    throw std::runtime_error("option --" + name + " expects a number, got '" + it->second + "'");
  return v;
}

}  // namespace cedar
