// `cedar render REQUEST.json`: prints exactly the V4.1 prompt text (UTF-8, nothing appended) for
// an OpenAI Chat Completions request body, or for a completions body with "prompt"/"suffix" (FIM).
// Other tooling depends on this output byte for byte; errors go to stderr with exit status 1.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "base/args.h"
#include "base/json_limits.h"
#include "text/chat_encoder.h"

namespace cedar::app {

int cmd_render(int argc, char** argv) {
  Args args("render", {});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s  REQUEST.json   OpenAI Chat Completions request body\n", args.usage().c_str());
    return 0;
  }
  if (args.positional().size() != 1)
    throw std::runtime_error("expected exactly one REQUEST.json, got " +
                             std::to_string(args.positional().size()));
  const std::string& path = args.positional()[0];
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open request file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string why;
  const text::ojson body = parse_untrusted_json(ss.str(), &why);
  if (body.is_discarded())
    throw std::runtime_error("request file '" + path + "' is not valid JSON: " + why);
  const text::RenderResult r = text::ChatEncoder().render_request(body);
  if (std::fwrite(r.prompt.data(), 1, r.prompt.size(), stdout) != r.prompt.size() ||
      std::fflush(stdout) != 0)
    throw std::runtime_error("cannot write to stdout");
  return 0;
}

}  // namespace cedar::app
