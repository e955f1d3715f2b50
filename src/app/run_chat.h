// `cedar run`'s interactive chat: turns from a LineReader, the conversation as chat messages
// rendered by the engine's template each turn, and the slash commands (/help lists them).
//
// Every turn's prompt-end state goes to the prefix cache the way the server's do, so a follow-up
// turn reuses it in both thinking modes: in thinking mode the template drops the last answer's
// reasoning, so the new prompt does not extend the generated state, but it does extend the
// previous prompt up to the assistant's opening tokens (the cache cuts the state there and
// rebuilds its window by bounded replay).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"
#include "text/chat_request.h"

namespace cedar::app {

struct ChatSettings {
  runtime::GenerationOptions gen;
  bool thinking = true;
  int effort = 75;
  std::string system;
  bool hide_thinking = false;
  std::vector<std::string> stop;  // stop strings (the answer's text)
  std::string model_name;         // for the banner
};

// The request body the engine renders for `messages`: the conversation and the thinking switch.
text::ojson chat_body(const text::ojson& messages, bool thinking, int effort);

// Runs the chat until the input ends, /exit, /bye or Ctrl-D. `interrupt` is set by SIGINT: it
// stops an answer, and at the prompt clears the line. Returns the exit status (0).
int run_chat(runtime::Engine& engine, runtime::PrefixCache* cache, ChatSettings s,
             bool terminal_input, std::atomic<bool>* interrupt);

}  // namespace cedar::app
