#include "text/json_formats.h"

#include <map>

namespace cedar::text {

namespace {

// 1..12 with the days each month has in every year (February: 28).
const std::string kDate =
    "\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)"
    "|02-(?:0[1-9]|1\\d|2[0-8]))";
// RFC 3339 full-time: a time zone always, seconds below 60.
const std::string kTime =
    "(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,9})?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)";
const std::string kLabel = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const std::string kOctet = "(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const std::string kHex4 = "[0-9A-Fa-f]{1,4}";
const std::string kUriChar = "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})";

// IPv6: eight groups, or fewer around one "::" (no embedded IPv4 tail).
std::string ipv6() {
  std::string alts = "(?:" + kHex4 + ":){7}" + kHex4;
  for (int left = 0; left <= 7; ++left) {
    alts += "|";
    alts += left == 0 ? ":" : "(?:" + kHex4 + ":){" + std::to_string(left) + "}";
    alts += ":";
    if (left < 7)
      alts += "(?:" + kHex4 + "(?::" + kHex4 + "){0," + std::to_string(6 - left) + "})?";
  }
  return "(?:" + alts + ")";
}

const std::map<std::string, JsonFormat, std::less<>>& formats() {
  static const std::map<std::string, JsonFormat, std::less<>> m = {
      {"date", {"^" + kDate + "$", 10}},
      {"time", {"^" + kTime + "$", UINT32_MAX}},
      {"date-time", {"^" + kDate + "T" + kTime + "$", UINT32_MAX}},
      {"email",
       {"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:" + kLabel +
            "\\.)+" + kLabel + "$",
        UINT32_MAX}},
      {"hostname", {"^" + kLabel + "(?:\\." + kLabel + ")*$", 253}},
      {"ipv4", {"^(?:" + kOctet + "\\.){3}" + kOctet + "$", 15}},
      {"ipv6", {"^" + ipv6() + "$", 39}},
      {"uuid", {"^[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}$", 36}},
      // scheme://authority[:port][/path][?query][#fragment]
      {"uri",
       {"^[A-Za-z][A-Za-z0-9+.-]*://(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{2})+(?::\\d{1,5})?(?:/" +
            kUriChar + "*)*(?:\\?(?:" + kUriChar + "|[/?])*)?(?:#(?:" + kUriChar + "|[/?])*)?$",
        UINT32_MAX}},
  };
  return m;
}

}  // namespace

const JsonFormat* find_format(std::string_view name) {
  const auto it = formats().find(name);
  return it == formats().end() ? nullptr : &it->second;
}

}  // namespace cedar::text
