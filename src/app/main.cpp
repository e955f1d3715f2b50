// cedar: one binary, git-style subcommands.
#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "app/commands.h"
#include "base/args.h"

namespace {

struct Command {
  const char* name;
  int (*fn)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"make-model", cedar::app::cmd_make_model,
     "write a synthetic checkpoint in the release layout (--preset tiny|small --seed N --out DIR)"},
    {"expand-model", cedar::app::cmd_expand_model,
     "write the compact trained model in the release layout (--compact DIR --out DIR)"},
    {"convert", cedar::app::cmd_convert,
     "write a model directory as a dialect-A GGUF file (--from DIR --to FILE.gguf)"},
    {"inspect", cedar::app::cmd_inspect,
     "print layer roles, parameter counts and KV bytes/token (--model DIR|FILE.gguf | --config F)"},
    {"logits", cedar::app::cmd_logits,
     "write FP32 logits of every position as .npy (--model DIR --ids 1,2,3 --out F.npy)"},
    {"perplexity", cedar::app::cmd_perplexity,
     "perplexity of a text file, scored on the CED decoder's rows (-m DIR -f FILE [-c N])"},
    {"tokenize", cedar::app::cmd_tokenize,
     "print the token ids of a UTF-8 file (--tokenizer tokenizer.json FILE)"},
    {"image", cedar::app::cmd_image,
     "what the image processor makes of an image: size, grids, prompt tokens (FILE [--json])"},
    {"render", cedar::app::cmd_render,
     "print the V4.1 prompt for an OpenAI Chat Completions request (REQUEST.json)"},
    {"parse", cedar::app::cmd_parse,
     "parse raw generated text into an OpenAI assistant message ([--thinking] FILE)"},
    {"bench", cedar::app::cmd_bench,
     "prefill (CED, exact) and decode speed vs measured bandwidth/FLOP ceilings (-m DIR)"},
    {"run", cedar::app::cmd_run,
     "generate: one shot (-m DIR -p TEXT) or interactive chat (-m DIR)"},
    {"serve", cedar::app::cmd_serve, "OpenAI/Anthropic-compatible HTTP API (-m DIR --port N)"},
};

void usage(FILE* f) {
  std::fprintf(f, "usage: cedar <command> [options]\n       cedar --version\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(f, "  %-12s %s\n", c.name, c.help);
  std::fprintf(f, "\n`cedar <command> --help` for the options of one command.\n");
}

// The forward's working buffers come from per-thread caches (base/scratch.h), but what is left --
// per-call states, logits, the buffers of a new shape -- is megabytes at prefill. glibc would serve
// the larger ones with fresh mmaps and return freed heap tops at once, so every call paid page
// faults and kernel zeroing of the same memory (`cedar bench` on small, 4K prompt: 1.8 s of
// system time, 0.4 s with this). Keeping freed memory in the heap (up to 1 GiB, and mmap only
// above glibc's 32 MiB ceiling) makes the next call reuse the last one's pages.
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace

std::string cedar::app::version_string() {
  return std::string(CEDAR_VERSION) + " (" + CEDAR_GIT + ")";
}

int main(int argc, char** argv) {
  keep_freed_memory();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::printf("cedar %s\n", cedar::app::version_string().c_str());
    return 0;
  }
  for (const auto& c : kCommands) {
    if (name == c.name) {
      try {
        return c.fn(argc - 1, argv + 1);
      } catch (const cedar::UsageError& e) {  // what was typed: status 2
        const std::string_view msg = e.what();
        std::fprintf(stderr, "cedar %s: error: %s%s%s%s\n", c.name, e.what(),
                     msg.find("--help") == std::string_view::npos ? " (see cedar " : "",
                     msg.find("--help") == std::string_view::npos ? c.name : "",
                     msg.find("--help") == std::string_view::npos ? " --help)" : "");
        return 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "cedar %s: error: %s\n", c.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "cedar: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
