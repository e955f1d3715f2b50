// A small command-line parser shared by the subcommands: `--name value`, `--name=value`,
// boolean `--flag`, short aliases (`-m`), and positional arguments. Unknown options are errors.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cedar {

class Args {
 public:
  struct Option {
    std::string long_name;   // "model"
    std::string short_name;  // "m" or ""
    bool takes_value;
    std::string help;
  };

  Args(std::string command, std::vector<Option> options);

  // Throws std::runtime_error with a clear message on an unknown option or a missing value.
  void parse(int argc, char** argv);

  bool help_requested() const { return help_; }
  std::string usage() const;

  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& def = "") const;
  // Required option: throws naming the option when absent.
  std::string require(const std::string& name) const;
  long long get_int(const std::string& name, long long def) const;
  double get_double(const std::string& name, double def) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  const Option* find(const std::string& name, bool is_short) const;

  std::string command_;
  std::vector<Option> options_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace cedar
