// Shared helpers of the text-layer tests: where the V4.1 tokenizer.json is, running commands.
#pragma once

#include <string>

#include "text/tokenizer.h"

namespace cedar::text::testing {

// Path of the V4.1 tokenizer.json: $CEDAR_TOKENIZER_JSON, else <build dir>/tokenizer/
// tokenizer.json, else one generated once with `node tools/tokenizer/build-tokenizer.mjs` under
// <build dir>/text-test-tokenizer/. Fails the test (throws) if none can be had.
const std::string& tokenizer_json_path();

// The V4.1 tokenizer, loaded once per test process.
const Tokenizer& v41_tokenizer();

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs `cmd` through /bin/sh, capturing stdout and stderr.
CommandResult run_command(const std::string& cmd);

// A fresh empty directory under the build dir (removed at process exit is not attempted).
std::string make_temp_dir(const std::string& tag);
void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);
std::string shell_quote(const std::string& s);

// The `cedar` binary under test ($CEDAR_BIN, else the CEDAR_BIN compile definition).
std::string cedar_bin();

}  // namespace cedar::text::testing
