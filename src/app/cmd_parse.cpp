// `cedar parse [--thinking] [--tools TOOLS.json] [--forced] FILE`: reads raw generated text (the
// decoded completion, special tokens included) and prints the OpenAI assistant message JSON
// {"role", "content", "reasoning_content", "tool_calls"} on stdout. Malformed DSML is reported on
// stderr (the text is then kept as content); the exit status stays 0.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "app/read_file.h"
#include "base/args.h"
#include "base/json_limits.h"
#include "text/output_parser.h"
#include "text/utf8.h"

namespace cedar::app {

int cmd_parse(int argc, char** argv) {
  Args args("parse",
            {{"thinking", "", false, "the text starts inside <think> (thinking-mode prompt)"},
             {"tools", "", true,
              "JSON file: the request's \"tools\" array (or a request body holding it); types "
              "the arguments"},
             {"forced", "", false,
              "the prompt ended with a forced \"<｜DSML｜ calls>\" (tool_choice required)"},
             {"no-tool-calls", "", false, "leave DSML as plain content (tool_choice none)"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s  FILE   raw generated text (UTF-8)\n", args.usage().c_str());
    return 0;
  }
  if (args.positional().size() != 1)
    throw std::runtime_error("expected exactly one input FILE, got " +
                             std::to_string(args.positional().size()));
  const std::string text = read_file(args.positional()[0], "input file");
  std::size_t bad = 0;
  if (!text::utf8_valid(text, &bad))
    throw std::runtime_error("input file '" + args.positional()[0] +
                             "' is not valid UTF-8 (bad byte at offset " + std::to_string(bad) +
                             ")");

  text::ParserOptions opts;
  opts.start = args.has("forced")     ? text::GenerationStart::kToolCalls
               : args.has("thinking") ? text::GenerationStart::kReasoning
                                      : text::GenerationStart::kContent;
  opts.parse_tool_calls = !args.has("no-tool-calls");
  if (args.has("tools")) {
    const std::string path = args.get("tools");
    std::string why;
    text::ojson tools = parse_untrusted_json(read_file(path, "tools file"), &why);
    if (tools.is_discarded())
      throw std::runtime_error("tools file '" + path + "' is not valid JSON: " + why);
    if (tools.is_object() && tools.contains("tools")) tools = tools["tools"];
    if (!tools.is_array())
      throw std::runtime_error("tools file '" + path +
                               "' must hold a JSON array of tools (or an object with \"tools\")");
    opts.tools = tools;
  }

  const text::ParsedMessage msg = text::OutputParser::parse(text, opts);
  if (msg.malformed)
    std::fprintf(stderr, "cedar parse: warning: malformed DSML (%s); kept as content\n",
                 msg.problem.c_str());
  const std::string out = msg.to_openai().dump(2) + "\n";
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    throw std::runtime_error("cannot write to stdout");
  return 0;
}

}  // namespace cedar::app
