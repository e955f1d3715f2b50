#include "text/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace cedar::text {
namespace {

// Oniguruma's \s with a Unicode encoding: the White_Space property.
constexpr const char* kWhiteSpaceSet =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) throw std::runtime_error("regex ends with a lone backslash");
      const char e = p[++i];
      switch (e) {
        case 's':
          out += in_class ? std::string(kWhiteSpaceSet) : "[" + std::string(kWhiteSpaceSet) + "]";
          break;
        case 'S':
          if (in_class) throw std::runtime_error("regex: \\S inside a character class");
          out += "[^" + std::string(kWhiteSpaceSet) + "]";
          break;
        case 'w':
        case 'W':
        case 'd':
        case 'D':
        case 'h':
        case 'H':
        case 'b':
        case 'B':
          throw std::runtime_error(std::string("regex: escape \\") + e +
                                   " has engine-specific meaning; not supported");
        default:
          out += c;
          out += e;
      }
      continue;
    }
    if (in_class) {
      if (c == '[') throw std::runtime_error("regex: nested character classes are not supported");
      if (c == ']') in_class = false;
      out += c;
      continue;
    }
    out += c;
    if (c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
    }
  }
  if (in_class) throw std::runtime_error("regex: unterminated character class");
  return out;
}

// One Split(Regex, Isolated) step, compiled (and JIT-compiled when available) once.
class RegexSplit {
 public:
  explicit RegexSplit(const std::string& onig_pattern) : source_(onig_pattern) {
    const std::string pat = onig_to_pcre2(onig_pattern);
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), PCRE2_UTF, &err,
                          &off, nullptr);
    if (!code_) {
      throw std::runtime_error("pre_tokenizer regex '" + onig_pattern + "' does not compile (" +
                               pcre2_message(err) + " at offset " + std::to_string(off) + ")");
    }
    // JIT is an optimisation only; the interpreter gives identical matches. The JIT code runs
    // on PCRE2's default per-call stack, so one compiled regex serves concurrent callers.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  RegexSplit(const RegexSplit&) = delete;
  RegexSplit& operator=(const RegexSplit&) = delete;
  ~RegexSplit() { pcre2_code_free(code_); }

  pcre2_code* code() const { return code_; }

  // Isolated split of `piece`: matches and the gaps between them, in order. The piece is matched
  // as a subject of its own, so a lookahead at its end sees end-of-text, as in `tokenizers`.
  void split(std::string_view piece, pcre2_match_data* md,
             std::vector<std::string_view>* out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    std::size_t start = 0, last = 0;
    while (start <= piece.size()) {
      // pcre2_match runs the JIT code when there is some; should the JIT run out of its small
      // default stack, the interpreter (heap-based backtracking) redoes the same match.
      int rc = pcre2_match(code_, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(code_, subject, piece.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                         nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        throw std::runtime_error("pre_tokenizer regex '" + source_ +
                                 "' failed: " + pcre2_message(rc));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const std::size_t ms = ov[0], me = ov[1];
      if (me == ms) {  // empty match: contributes nothing; step over one character
        start = me + 1;
        while (start < piece.size() && (static_cast<unsigned char>(piece[start]) & 0xC0) == 0x80)
          ++start;
        continue;
      }
      if (ms > last) out->push_back(piece.substr(last, ms - last));
      out->push_back(piece.substr(ms, me - ms));
      last = start = me;
    }
    if (last < piece.size()) out->push_back(piece.substr(last));
  }

 private:
  std::string source_;
  pcre2_code* code_ = nullptr;
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& node) {
  PreTokenizer pt;
  if (!node.is_object()) throw std::runtime_error("tokenizer.json: pre_tokenizer is missing");
  std::vector<nlohmann::json> steps;
  if (node.value("type", "") == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
      throw std::runtime_error("tokenizer.json: pre_tokenizer Sequence without 'pretokenizers'");
    for (const auto& s : node["pretokenizers"]) steps.push_back(s);
  } else {
    steps.push_back(node);
  }
  bool saw_byte_level = false;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    const std::string where = "tokenizer.json: pre_tokenizer step " + std::to_string(i);
    const std::string type = s.is_object() ? s.value("type", "") : "";
    if (saw_byte_level) throw std::runtime_error(where + ": steps after ByteLevel");
    if (type == "Split") {
      if (s.value("behavior", "") != "Isolated" || s.value("invert", false))
        throw std::runtime_error(where + ": only Split with behavior Isolated, invert false");
      const auto& pat = s.at("pattern");
      if (!pat.contains("Regex") || !pat["Regex"].is_string())
        throw std::runtime_error(where + ": only Regex split patterns are supported");
      try {
        pt.steps_.push_back(std::make_unique<RegexSplit>(pat["Regex"].get<std::string>()));
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(where + ": " + e.what());
      }
    } else if (type == "ByteLevel") {
      if (s.value("add_prefix_space", false) || s.value("use_regex", true))
        throw std::runtime_error(where +
                                 ": only ByteLevel with add_prefix_space=false, use_regex=false");
      saw_byte_level = true;
    } else {
      throw std::runtime_error(where + ": unsupported type '" + type + "'");
    }
  }
  if (!saw_byte_level) throw std::runtime_error("tokenizer.json: pre_tokenizer lacks ByteLevel");
  return pt;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>* pieces) const {
  std::vector<std::string_view> cur{text}, next;
  if (text.empty()) return;
  for (const auto& step : steps_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(step->code(), nullptr);
    if (!md) throw std::bad_alloc();
    next.clear();
    try {
      for (std::string_view piece : cur) step->split(piece, md, &next);
    } catch (...) {
      pcre2_match_data_free(md);
      throw;
    }
    pcre2_match_data_free(md);
    cur.swap(next);
  }
  pieces->insert(pieces->end(), cur.begin(), cur.end());
}

}  // namespace cedar::text
