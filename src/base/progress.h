// ProgressBar: one line on a terminal, redrawn in place, for work that takes long enough to wonder
// about (loading a model's weights, a long prefill). It draws nothing when its stream is not a
// terminal (logs, pipes, tests) and nothing until `delay` has passed, so short work stays silent;
// redraws are limited to ten a second. finish() (or the destructor) clears the line.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cedar {

// Whether `f` is a terminal a person watches, so that escape sequences (redrawn lines, dim text)
// are welcome: a tty, unless NO_COLOR is set or TERM is "dumb", and not an MPI rank's output
// (mpirun hands its ranks a pseudo-terminal even when its own output goes to a file).
bool styled_terminal(FILE* f);

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit,
              std::chrono::milliseconds delay = std::chrono::milliseconds(500), FILE* out = stderr);
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t done);
  void finish();
  bool enabled() const { return enabled_; }

  // The line for `done` of `total` after `seconds` (exposed for tests), e.g.
  // "prefill [#######.............]  35%  1434/4096 tokens  2.1 s".
  static std::string render(const std::string& label, int64_t done, int64_t total,
                            const std::string& unit, double seconds, int width);

 private:
  std::string label_, unit_;
  int64_t total_;
  std::chrono::milliseconds delay_;
  FILE* out_;
  bool enabled_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace cedar
