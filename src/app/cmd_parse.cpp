#include <cstdio>

#include "app/commands.h"

namespace cedar::app {

int cmd_parse(int, char**) {
  std::fprintf(stderr, "cedar: this command is not built yet\n");
  return 2;
}

}  // namespace cedar::app
