#include "app/paste_reader.h"

#include <editline/readline.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <utility>

namespace cedar::app {

namespace {

constexpr const char kStart[] = "\x1b[200~";
constexpr const char kEnd[] = "\x1b[201~";
constexpr size_t kMarker = 6;  // both markers' length

}  // namespace

int PasteFilter::raw() {
  if (!held_.empty()) {
    const int c = held_.front();
    held_.pop_front();
    return c;
  }
  return next_();
}

int PasteFilter::get(bool* pasted) {
  if (pasted) *pasted = false;
  const int c = raw();
  if (c != 0x1b) return c;
  // ESC: the start of a paste, or of another key sequence (an arrow...), given back untouched
  std::string seen(1, '\x1b');
  while (seen.size() < kMarker && seen.compare(0, seen.size(), kStart, seen.size()) == 0) {
    const int d = raw();
    if (d < 0) break;
    seen += char(d);
  }
  if (seen != kStart) {
    for (size_t i = 1; i < seen.size(); ++i) held_.push_back(static_cast<unsigned char>(seen[i]));
    return 0x1b;
  }
  // the paste: everything up to the end marker (or the end of the input)
  std::string text;
  for (int d; (d = raw()) >= 0;) {
    text += d == '\r' ? '\n' : char(d);
    if (text.size() >= kMarker && text.compare(text.size() - kMarker, kMarker, kEnd) == 0) {
      text.resize(text.size() - kMarker);
      break;
    }
  }
  paste_ += text;
  if (pasted) *pasted = true;
  return '\n';
}

std::string PasteFilter::take_paste() { return std::exchange(paste_, std::string()); }

namespace {

std::unique_ptr<PasteFilter> g_filter;  // what libedit's input function reads through

int (*g_saved_getc)(FILE*) = nullptr;  // what the editor read with before

// libedit's input function: one character (libedit takes the int as a wide character, so UTF-8
// is decoded here), or a paste shown and reported as the end of the line.
int filtered_getc(FILE*) {
  bool pasted = false;
  const int c = g_filter->get(&pasted);
  if (c >= 0xC0 && c < 0xF8) {  // a UTF-8 lead byte: its continuation bytes make one character
    const int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    int cp = c & (0x3F >> more);
    for (int i = 0; i < more; ++i) {
      const int d = g_filter->get();
      if (d < 0) return EOF;
      cp = (cp << 6) | (d & 0x3F);
    }
    return cp;
  }
  if (pasted) {
    // the terminal does not echo a paste: show it under the prompt's line (raw mode: \r\n)
    std::string shown = "\r\n";
    for (char ch : g_filter->pending())
      shown += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    std::fwrite(shown.data(), 1, shown.size(), stdout);
    std::fflush(stdout);
  }
  return c < 0 ? EOF : c;
}

}  // namespace

BracketedPaste::BracketedPaste() {
  g_filter = std::make_unique<PasteFilter>([]() -> int {
    unsigned char b;
    // a signal (Ctrl-C) ends the read, as libedit's own input function does
    return ::read(STDIN_FILENO, &b, 1) == 1 ? int(b) : -1;
  });
  g_saved_getc = rl_getc_function;
  rl_getc_function = filtered_getc;
  std::fputs("\x1b[?2004h", stdout);
  std::fflush(stdout);
}

BracketedPaste::~BracketedPaste() {
  std::fputs("\x1b[?2004l", stdout);
  std::fflush(stdout);
  rl_getc_function = g_saved_getc;
  g_filter.reset();
}

std::string BracketedPaste::take_paste() { return g_filter ? g_filter->take_paste() : ""; }

}  // namespace cedar::app
