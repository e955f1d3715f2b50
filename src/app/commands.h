// The `cedar` subcommands. Each lives in its own cmd_<name>.cpp and returns a process exit code.
#pragma once

#include <string>

namespace cedar::app {

// argv here starts at the subcommand name (argv[0] == "logits", ...).
int cmd_make_model(int argc, char** argv);
int cmd_expand_model(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_image(int argc, char** argv);
int cmd_render(int argc, char** argv);
int cmd_parse(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_serve(int argc, char** argv);
// The help text of --kernels, the same in every command that runs the model.
inline constexpr const char* kKernelsHelp =
    "kernel table: auto (default: the best this CPU runs), ref, avx2, avx512, avx512bf16; env "
    "CEDAR_KERNELS";
// The help text of --gguf-requant, the same in every command that runs the model.
inline constexpr const char* kGgufRequantHelp =
    "GGUF: re-encode weights stored as Q8_0 or K-quants into the release's FP8/FP4 at load "
    "(faster kernels today; more memory for files below 8 bits; a second rounding) instead of "
    "computing them in place";
// The help text of --head-type, the same in every command that runs the model.
inline constexpr const char* kHeadTypeHelp =
    "stored | q8: the vocabulary head as the checkpoint stores it (default), or a bf16 head "
    "requantized at load to 8 bits + a bf16 scale per 32 values (about half the head's bytes per "
    "decoded token, as GGUF files ship it; perplexity change measured in docs/NUMERICS.md)";
// The help text of --mem-budget, the same in run, serve and bench.
inline constexpr const char* kMemBudgetHelp =
    "RAM for the whole process, e.g. 48G: the plan must fit (refused with its numbers "
    "otherwise); routed experts beyond it are read from storage into an expert cache "
    "(default: no budget, everything mapped)";
inline constexpr const char* kKvRamHelp =
    "KV memory shared by the slots, e.g. 4G, when every slot's full context would not fit: a "
    "request is admitted while its prompt + max_tokens fit, else answered 503 (default: each "
    "slot holds a full context)";
// "0.2.0 (<git describe>)": the project version and the commit the build was configured at.
std::string version_string();

}  // namespace cedar::app
