// cedar make-model --preset tiny|small|bench|anchor --seed N --out DIR [--tokenizer tokenizer.json]
//                  [--shards K] [--force]
#include <cstdio>
#include <stdexcept>

#include "app/commands.h"
#include "base/args.h"
#include "model/make_model.h"

namespace cedar::app {

int cmd_make_model(int argc, char** argv) {
  Args args("make-model",
            {{"preset", "", true, "tiny | small | bench | anchor (docs/NUMERICS.md, Presets)"},
             {"seed", "s", true, "random seed (default 0)"},
             {"out", "o", true, "output directory (created; must be empty unless --force)"},
             {"tokenizer", "", true,
              "tokenizer.json to copy (tokenizer_config.json beside it is copied too)"},
             {"shards", "", true, "number of safetensors shards (default 1)"},
             {"force", "", false, "write into a non-empty directory"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  MakeModelOptions opt;
  opt.preset = args.require("preset");
  const long long seed = args.get_int("seed", 0);
  if (seed < 0) throw std::runtime_error("--seed must be >= 0");
  opt.seed = uint64_t(seed);
  opt.out_dir = args.require("out");
#ifdef CEDAR_DEFAULT_TOKENIZER
  opt.tokenizer = args.get("tokenizer", CEDAR_DEFAULT_TOKENIZER);
#else
  if (!args.has("tokenizer")) throw std::runtime_error("--tokenizer is required");
  opt.tokenizer = args.get("tokenizer");
#endif
  const long long shards = args.get_int("shards", 1);
  if (shards < 1 || shards > 99999) throw std::runtime_error("--shards must be in 1..99999");
  opt.shards = int(shards);
  opt.force = args.has("force");
  make_model(opt);
  std::printf("wrote %s (preset %s, seed %llu, %d shard%s)\n", opt.out_dir.c_str(),
              opt.preset.c_str(), (unsigned long long)opt.seed, opt.shards,
              opt.shards == 1 ? "" : "s");
  return 0;
}

}  // namespace cedar::app
