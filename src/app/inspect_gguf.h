// `cedar inspect --model FILE.gguf`: what a GGUF file is (dialect, generation, the config it
// describes, the census of its tensor types) and, with --tensor NAME --out F.npy, one tensor's
// values decoded to fp32 in the release's shape (a release name such as
// layers.0.ffn.experts.3.w1.weight selects that expert's slice of the merged tensor).
#pragma once

#include <string>

namespace cedar::app {

// Returns the exit code.
int inspect_gguf(const std::string& path, bool as_json, const std::string& tensor,
                 const std::string& out);

}  // namespace cedar::app
