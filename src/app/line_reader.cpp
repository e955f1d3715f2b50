#include "app/line_reader.h"

#include <editline/readline.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app/paste_reader.h"

namespace cedar::app {

namespace {

constexpr int kHistoryLines = 1000;

std::string history_file() {
  if (const char* p = std::getenv("CEDAR_HISTORY"); p && *p) return p;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cedar_history";
  return {};
}

}  // namespace

LineReader::LineReader(bool terminal, std::atomic<bool>* interrupt)
    : terminal_(terminal), interrupt_(interrupt) {
  if (!terminal_) return;
  // libedit edits wide characters: under the C locale it drops every byte of typed UTF-8 beyond
  // ASCII. The user's locale, or C.UTF-8 when that one is not UTF-8 (the tokenizer reads bytes
  // and does not depend on it).
  if (std::setlocale(LC_CTYPE, "") == nullptr || MB_CUR_MAX == 1)
    std::setlocale(LC_CTYPE, "C.UTF-8");
  paste_ = std::make_unique<BracketedPaste>();  // (before libedit initialises: its input function)
  history_path_ = history_file();
  using_history();
  stifle_history(kHistoryLines);
  if (!history_path_.empty()) read_history(history_path_.c_str());
}

LineReader::~LineReader() {
  if (terminal_ && !history_path_.empty()) write_history(history_path_.c_str());
}

std::optional<std::string> LineReader::line(const char* prompt) {
  if (!terminal_) {
    std::string s;
    if (!std::getline(std::cin, s)) return std::nullopt;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
  }
  if (interrupt_ != nullptr) interrupt_->store(false);  // (a stopped answer set it)
  char* p = readline(prompt);
  if (!p && interrupt_ != nullptr && interrupt_->exchange(false)) {
    std::fputs("^C\n", stdout);  // Ctrl-C: the line is dropped, not the chat
    dropped_ = true;
    return std::string();
  }
  if (!p) return std::nullopt;  // Ctrl-D
  std::string s(p);
  std::free(p);
  if (paste_) s += paste_->take_paste();
  return s;
}

std::optional<std::string> LineReader::next() {
  dropped_ = false;
  auto first = line("> ");
  if (!first) return std::nullopt;
  std::string turn;
  if (*first == "\"\"\"") {
    // a block: everything up to the closing """ (or the end of the input)
    for (bool start = true;; start = false) {
      auto l = line("... ");
      if (dropped_) return std::string();
      if (!l || *l == "\"\"\"") break;
      if (!start) turn += '\n';
      turn += *l;
    }
  } else {
    turn = *first;
    while (!turn.empty() && turn.back() == '\\') {
      turn.back() = '\n';
      auto l = line("... ");
      if (dropped_) return std::string();
      if (!l) break;
      turn += *l;
    }
  }
  if (terminal_ && !turn.empty()) add_history(turn.c_str());
  return turn;
}

}  // namespace cedar::app
