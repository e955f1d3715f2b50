// `cedar render REQUEST.json`: prints exactly the V4.1 prompt text (UTF-8, nothing appended) for
// an OpenAI Chat Completions request body, or for a completions body with "prompt"/"suffix" (FIM).
// Other tooling depends on this output byte for byte; errors go to stderr with exit status 1.
// `--ids -t tokenizer.json` prints the prompt's token ids instead (the engine's encode_prompt:
// added tokens recognised in template segments only), as a JSON array. `--jsonl`: the file holds
// one request body per line, and each gives one output line (the prompt as a JSON string, or the
// ids array).
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "app/jsonl.h"
#include "base/args.h"
#include "base/json_limits.h"
#include "text/chat_encoder.h"
#include "text/tokenizer.h"

namespace cedar::app {

int cmd_render(int argc, char** argv) {
  Args args("render", {{"ids", "", false, "print token ids (needs --tokenizer)"},
                       {"tokenizer", "", true, "path to tokenizer.json (with --ids)"},
                       {"jsonl", "", false, "one request body per line"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s  REQUEST.json   OpenAI Chat Completions request body\n", args.usage().c_str());
    return 0;
  }
  if (args.positional().size() != 1)
    throw std::runtime_error("expected exactly one REQUEST.json, got " +
                             std::to_string(args.positional().size()));
  const std::string& path = args.positional()[0];
  const bool want_ids = args.has("ids");
  std::optional<text::Tokenizer> tok;
  if (want_ids) tok = text::Tokenizer::load(args.require("tokenizer"));
  const text::ChatEncoder encoder;
  auto render = [&](const text::ojson& body) {
    const text::RenderResult r = encoder.render_request(body);
    if (want_ids) return ids_json(text::encode_prompt(*tok, r.segments));
    return r.prompt;
  };
  if (args.has("jsonl")) {
    for_each_jsonl(path, [&](const text::ojson& body) {
      return want_ids ? render(body) : text::ojson(render(body)).dump();
    });
    return 0;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open request file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string why;
  const text::ojson body = parse_untrusted_json(ss.str(), &why);
  if (body.is_discarded())
    throw std::runtime_error("request file '" + path + "' is not valid JSON: " + why);
  std::string out = render(body);
  if (want_ids) out += '\n';
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    throw std::runtime_error("cannot write to stdout");
  return 0;
}

}  // namespace cedar::app
