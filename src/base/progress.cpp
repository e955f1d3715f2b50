#include "base/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace cedar {

bool styled_terminal(FILE* f) {
  if (f == nullptr || isatty(fileno(f)) == 0) return false;
  if (const char* v = std::getenv("NO_COLOR"); v != nullptr && *v != '\0') return false;
  if (const char* t = std::getenv("TERM"); t != nullptr && std::string_view(t) == "dumb")
    return false;
  for (const char* rank : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(rank) != nullptr) return false;
  return true;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit,
                         std::chrono::milliseconds delay, FILE* out)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(std::max<int64_t>(1, total)),
      delay_(delay),
      out_(out),
      enabled_(styled_terminal(out)),
      start_(std::chrono::steady_clock::now()) {}

std::string ProgressBar::render(const std::string& label, int64_t done, int64_t total,
                                const std::string& unit, double seconds, int width) {
  total = std::max<int64_t>(1, total);
  done = std::clamp<int64_t>(done, 0, total);
  const int filled = int(done * width / total);
  std::string line = label + " [" + std::string(size_t(filled), '#') +
                     std::string(size_t(width - filled), '.') + "] ";
  char tail[96];
  std::snprintf(tail, sizeof(tail), "%3d%%  %lld/%lld %s  %.1f s", int(done * 100 / total),
                static_cast<long long>(done), static_cast<long long>(total), unit.c_str(), seconds);
  return line + tail;
}

void ProgressBar::update(int64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < delay_) return;
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total_) return;
  last_draw_ = now;
  drawn_ = true;
  const double s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(out_, "\r\033[2K%s", render(label_, done, total_, unit_, s, 30).c_str());
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (!drawn_) return;
  drawn_ = false;
  std::fprintf(out_, "\r\033[2K");
  std::fflush(out_);
}

}  // namespace cedar
