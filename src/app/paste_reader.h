// Bracketed paste for the chat's line editor: asked to (ESC[?2004h), the terminal marks pasted
// text with ESC[200~ .. ESC[201~, and the editor's input function takes the marked text out of
// the key stream, so that a pasted block with newlines is one turn instead of one turn per line.
// The byte logic (PasteFilter) is apart from the terminal so that tests can feed it.
#pragma once

#include <deque>
#include <functional>
#include <string>

namespace cedar::app {

class PasteFilter {
 public:
  // `next()` reads one byte of input (-1 at the end, on an error or a signal).
  explicit PasteFilter(std::function<int()> next) : next_(std::move(next)) {}

  // The next key byte for the editor, -1 at the end. A complete paste is taken out of the stream
  // (pending() holds it until take_paste()) and reported as one '\n', which ends the line being
  // edited; *pasted says so.
  int get(bool* pasted = nullptr);
  const std::string& pending() const { return paste_; }
  // The text pasted since the last call ('\r' as '\n'), and forget it.
  std::string take_paste();

 private:
  int raw();  // the next input byte: a held-back one first
  std::function<int()> next_;
  std::deque<int> held_;  // bytes read while matching a marker that turned out not to be one
  std::string paste_;
};

// Turns the terminal's bracketed paste on for the chat's editor (libedit reads its keys through
// a PasteFilter on stdin) and off again on destruction. One at a time.
class BracketedPaste {
 public:
  BracketedPaste();
  ~BracketedPaste();
  BracketedPaste(const BracketedPaste&) = delete;
  BracketedPaste& operator=(const BracketedPaste&) = delete;
  // The text pasted while the last line was read ("" if none), and forget it.
  std::string take_paste();
};

}  // namespace cedar::app
