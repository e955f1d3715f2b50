// The whole of a file the user named on the command line, as bytes.
#pragma once

#include <string>

namespace cedar::app {

// Throws std::runtime_error "<what> <path>: cannot open" when it cannot be read.
std::string read_file(const std::string& path, const std::string& what);

}  // namespace cedar::app
