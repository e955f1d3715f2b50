// For tests that show a hostile input is refused without a large allocation: how far the
// process's resident memory peaked above where it stood while `fn` ran. The kernel's high-water
// mark (VmHWM) is reset first (writing "5" to /proc/self/clear_refs), so that an earlier test's
// peak does not hide the one measured.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

namespace cedar::testing {

// A field of /proc/self/status in bytes (-1: not there).
inline int64_t proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  return -1;
}

// The peak growth in bytes; -1 when the peak cannot be reset or read (then nothing is shown).
inline int64_t peak_growth_bytes(const std::function<void()>& fn) {
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    if (!clear) return -1;
  }
  const int64_t before = proc_status_bytes("VmRSS");
  fn();
  const int64_t peak = proc_status_bytes("VmHWM");
  return before < 0 || peak < 0 ? -1 : peak - before;
}

}  // namespace cedar::testing
