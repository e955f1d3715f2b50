#include "text_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cedar::text::testing {
namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = std::string(CEDAR_BINARY_DIR) + "/text-tests-" + tag + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    tmpl = "/tmp/cedar-text-" + tag + "-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  }
  return tmpl;
}

CommandResult run_command(const std::string& cmd) {
  const std::string dir = make_temp_dir("cmd");
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  const std::string full = "(" + cmd + ") >" + shell_quote(out) + " 2>" + shell_quote(err);
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  fs::remove_all(dir);
  return r;
}

std::string cedar_bin() {
  if (const char* e = std::getenv("CEDAR_BIN"); e && *e) return e;
  return CEDAR_BIN;
}

const std::string& tokenizer_json_path() {
  static const std::string path = [] {
    if (const char* e = std::getenv("CEDAR_TOKENIZER_JSON"); e && *e) return std::string(e);
    const std::string built = std::string(CEDAR_BINARY_DIR) + "/tokenizer/tokenizer.json";
    if (fs::exists(built)) return built;
    // Generate once per build dir. Concurrent test processes each build into their own temp dir
    // and rename into place (atomic), so a reader never sees a half-written file.
    const std::string dir = std::string(CEDAR_BINARY_DIR) + "/text-test-tokenizer";
    const std::string target = dir + "/tokenizer.json";
    if (fs::exists(target)) return target;
    fs::create_directories(dir);
    const std::string tmp = make_temp_dir("tokgen");
    const std::string script =
        std::string(CEDAR_SOURCE_DIR) + "/tools/tokenizer/build-tokenizer.mjs";
    const CommandResult r = run_command("node " + shell_quote(script) + " " + shell_quote(tmp));
    if (r.exit_code != 0)
      throw std::runtime_error("generating tokenizer.json with node failed: " + r.err);
    fs::rename(tmp + "/tokenizer.json", target);
    fs::remove_all(tmp);
    return target;
  }();
  return path;
}

const Tokenizer& v41_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(tokenizer_json_path());
  return tok;
}

}  // namespace cedar::text::testing
