#include "app/jsonl.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace cedar::app {

void for_each_jsonl(const std::string& path,
                    const std::function<std::string(const nlohmann::ordered_json&)>& fn) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open input file '" + path + "'");
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    std::string why;
    const nlohmann::ordered_json v = parse_untrusted_json(line, &why);
    if (v.is_discarded()) throw std::runtime_error(where + ": not valid JSON: " + why);
    std::string out;
    try {
      out = fn(v);
    } catch (const std::exception& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
    out += '\n';
    if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size())
      throw std::runtime_error("cannot write to stdout");
  }
  if (f.bad()) throw std::runtime_error("cannot read input file '" + path + "'");
  if (std::fflush(stdout) != 0) throw std::runtime_error("cannot write to stdout");
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string out;
  out.reserve(ids.size() * 7 + 2);
  out += '[';
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
  return out;
}

}  // namespace cedar::app
