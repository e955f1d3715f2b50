#include <cstdlib>

#include "base/npy.h"
#include "forward/forward_pass.h"

namespace cedar {

Dumper::Dumper() {
  const char* d = std::getenv("CEDAR_DUMP_DIR");
  if (d && *d) dir_ = d;
}

void Dumper::f32(const std::string& name, int64_t first_pos, const float* data,
                 const std::vector<int64_t>& shape) const {
  if (!active()) return;
  write_npy_f32(dir_ + "/" + name + ".p" + std::to_string(first_pos) + ".npy", data, shape);
}

void Dumper::i32(const std::string& name, int64_t first_pos, const int32_t* data,
                 const std::vector<int64_t>& shape) const {
  if (!active()) return;
  write_npy_i32(dir_ + "/" + name + ".p" + std::to_string(first_pos) + ".npy", data, shape);
}

}  // namespace cedar
