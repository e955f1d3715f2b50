// A small command-line parser shared by the subcommands: `--name value`, `--name=value`,
// boolean `--flag`, short aliases (`-m`, `-np`), positional arguments, and optionally an
// environment variable per option (CEDAR_CTX_SIZE for --ctx-size) under the command line.
// Unknown options are errors. Every problem with what the user typed is a UsageError: `cedar`
// exits with status 2 for it (1 for failures at run time).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace cedar {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  struct Option {
    std::string long_name;   // "model"
    std::string short_name;  // "m", "np" or ""
    bool takes_value;
    std::string help;
    std::string value_name = {};  // the help's placeholder ("N", "FILE"); "": by the name
  };

  Args(std::string command, std::vector<Option> options);

  // Throws UsageError with a clear message on an unknown option or a missing value. With
  // `env_prefix`, an option absent from argv takes the value of PREFIX + its name in capitals
  // with '_' for '-' (a boolean: 1/true/yes/on or 0/false/no/off).
  void parse(int argc, char** argv, const char* env_prefix = nullptr);
  // The variable that sets `long_name` ("" without an env prefix).
  std::string env_name(const std::string& long_name) const;

  bool help_requested() const { return help_; }
  std::string usage() const;

  bool has(const std::string& name) const;
  // The value came from the environment, not the command line.
  bool from_env(const std::string& name) const { return from_env_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  // Required option: throws naming the option when absent.
  std::string require(const std::string& name) const;
  long long get_int(const std::string& name, long long def) const;
  double get_double(const std::string& name, double def) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  const Option* find(const std::string& name, bool is_short) const;

  // "option --NAME" or, for a value from the environment, "$VAR (--NAME)": for messages.
  std::string source(const std::string& name) const;

  std::string command_;
  std::vector<Option> options_;
  std::string env_prefix_;
  std::map<std::string, std::string> values_;
  std::set<std::string> from_env_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

}  // namespace cedar
