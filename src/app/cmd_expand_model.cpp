// cedar expand-model --compact DIR --out DIR [--tokenizer tokenizer.json]: the compact trained
// model (model/compact_model.h; the repository's models/default/) written out in the release
// layout. The build runs it to make the embedded default model (build/models/default).
#include <cstdio>

#include "app/commands.h"
#include "base/args.h"
#include "model/compact_model.h"

namespace cedar::app {

int cmd_expand_model(int argc, char** argv) {
  Args args("expand-model",
            {{"compact", "", true, "directory with config.json and compact.safetensors[.gz]"},
             {"out", "o", true, "output model directory (replaced)"},
             {"tokenizer", "", true, "tokenizer.json to ship (default: the build's)"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  const std::string compact = args.require("compact");
  const std::string out = args.require("out");
  expand_compact_model(compact, args.get("tokenizer", CEDAR_DEFAULT_TOKENIZER), out);
  std::printf("wrote %s from %s\n", out.c_str(), compact.c_str());
  return 0;
}

}  // namespace cedar::app
