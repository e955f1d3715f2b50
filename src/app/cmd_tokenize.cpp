// `cedar tokenize --tokenizer PATH/tokenizer.json FILE`: prints the ids of FILE's UTF-8 text as
// one JSON array on stdout. Plain text: no BOS, no added-token recognition (v41-interface.md
// §2.4), so the output is what message content encodes to. `--jsonl`: FILE holds one JSON string
// per line (or an object with a "text" string); each gives one array line.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "app/jsonl.h"
#include "base/args.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace cedar::app {

int cmd_tokenize(int argc, char** argv) {
  Args args("tokenize", {{"tokenizer", "", true, "path to tokenizer.json (required)"},
                         {"jsonl", "", false, "FILE: one JSON string per line"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s  FILE   UTF-8 text file to tokenize\n", args.usage().c_str());
    return 0;
  }
  const std::string tok_path = args.require("tokenizer");
  if (args.positional().size() != 1)
    throw std::runtime_error("expected exactly one input FILE, got " +
                             std::to_string(args.positional().size()));
  const std::string& path = args.positional()[0];

  const text::Tokenizer tok = text::Tokenizer::load(tok_path);
  if (args.has("jsonl")) {
    for_each_jsonl(path, [&](const nlohmann::ordered_json& v) {
      const nlohmann::ordered_json* t = &v;
      if (v.is_object() && v.contains("text")) t = &v["text"];
      if (!t->is_string()) throw std::runtime_error("expected a JSON string or {\"text\": ...}");
      return ids_json(tok.encode(t->get<std::string>(), /*allow_special=*/false));
    });
    return 0;
  }

  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open input file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw std::runtime_error("cannot read input file '" + path + "'");
  const std::string text = ss.str();
  std::size_t bad = 0;
  if (!text::utf8_valid(text, &bad))
    throw std::runtime_error("input file '" + path + "' is not valid UTF-8 (bad byte at offset " +
                             std::to_string(bad) + ")");
  const std::string out = ids_json(tok.encode(text, /*allow_special=*/false)) + "\n";
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    throw std::runtime_error("cannot write to stdout");
  return 0;
}

}  // namespace cedar::app
