// The web chat page served at GET / (src/server/webui/index.html, embedded in the binary at build
// time: the server needs no files next to it and fetches nothing from elsewhere).
#pragma once

#include <string_view>

namespace cedar::server {

std::string_view webui_index_html();

}  // namespace cedar::server
