// data: URLs (RFC 2397) of image parts: the only image source the server reads (it never fetches
// a URL from the network or opens a local file for a client).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cedar::server {

// The bytes of `data:[<media type>][;param=value]*;base64,<data>`. Returns nullopt when url is
// not a base64 data URL or its data is not valid base64 (RFC 4648 alphabet, '=' padding optional,
// only at the end; ASCII whitespace is skipped, as browsers do).
std::optional<std::string> decode_data_url(std::string_view url);

}  // namespace cedar::server
