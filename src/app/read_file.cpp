#include "app/read_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cedar::app {

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(what + " " + path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace cedar::app
