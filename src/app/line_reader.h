// The input side of `cedar run`'s chat: on a terminal, libedit (line editing, Ctrl-R search,
// history kept across sessions in $CEDAR_HISTORY or ~/.cedar_history); otherwise plain lines
// from stdin, so scripts can pipe a conversation in. A turn is one line, or several: a line
// ending in a backslash continues on the next, and a line of just """ opens a block that the
// next such line closes (for pasting multi-line text), and on a terminal a bracketed paste of
// several lines ends the line being typed: what was typed and the paste are one turn. Ctrl-C on a
// terminal (the caller's SIGINT handler sets `interrupt`) drops the turn being typed and starts a
// fresh prompt.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

namespace cedar::app {

class BracketedPaste;

class LineReader {
 public:
  LineReader(bool terminal, std::atomic<bool>* interrupt = nullptr);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next turn (without the continuation marks); "" when Ctrl-C dropped it; nullopt at the
  // end of the input.
  std::optional<std::string> next();

 private:
  std::optional<std::string> line(const char* prompt);
  bool terminal_;
  std::atomic<bool>* interrupt_;
  std::unique_ptr<BracketedPaste> paste_;  // on a terminal: a pasted block is one turn
  bool dropped_ = false;                   // Ctrl-C dropped the turn being read
  std::string history_path_;
};

}  // namespace cedar::app
