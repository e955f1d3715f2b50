// Strict tool calls as a byte grammar: the DSML block V4.1 writes for tool calls
// (v41-interface.md §3.5), in the canonical spelling chat_encoder renders them
// (text/dsml.cpp render_tool_calls), restricted to the request's tools -- a declared tool name,
// its declared parameters at most once each, the required ones before the invoke closes,
// string-typed values as raw text (string="true"), other values as JSON of the parameter's
// schema (string="false", text/json_grammar.h). ToolCallMatcher has JsonMatcher's interface, so
// the same vocabulary-trie search (runtime/token_constraint.h) turns it into a token mask.
//
// A tool marked "strict": true must have a parameter schema json_grammar.h can enforce (else the
// request is refused); for the others the schema is enforced where it can be, and a parameter
// whose schema cannot be gets any value (raw text or any JSON).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/json_grammar.h"

namespace cedar::text {

class ToolGrammar {
 public:
  // From the request's OpenAI-style tools ([{type:"function", function:{name, parameters}}] or
  // the function objects alone). Throws RequestError naming an unsupported parameter schema of a
  // strict tool (json_grammar.h's subset), more than 64 parameter spellings on one tool or more
  // than 64 tools.
  static ToolGrammar compile(const ojson& tools);

  struct Entry {                         // one way to write one parameter
    int param = 0;                       // index into Tool::params
    bool raw = false;                    // string="true": the value is raw text
    const SchemaNode* schema = nullptr;  // !raw: the JSON value's schema
  };
  struct Tool {
    std::string name;
    std::vector<std::string> params;
    uint64_t required = 0;          // bit i: params[i] is required
    std::vector<Entry> entries;     // parallel to `lits`
    std::vector<std::string> lits;  // NAME" string="true|false">
  };
  const std::vector<Tool>& tools() const { return tools_; }
  const std::vector<std::string>& name_lits() const { return name_lits_; }  // NAME">\n

 private:
  std::vector<Tool> tools_;
  std::vector<std::string> name_lits_;
  std::vector<std::shared_ptr<JsonSchema>> schemas_;  // own the parameter schemas
};

// Where the output starts relative to the calls block.
enum class CallStart : uint8_t {
  kFree,         // text may come before the block, or no block at all (tool_choice "auto")
  kBlock,        // the output is the block alone
  kInsideBlock,  // the prompt opened the block ("<｜DSML｜ calls>\n", tool_choice "required" or
                 // a named function: chat_encoder's forced call): the invokes come first
};

class ToolCallMatcher {
 public:
  ToolCallMatcher(const ToolGrammar* g, CallStart start);
  bool feed(uint8_t c);  // false (state unchanged) if no text of the grammar continues with c
  bool feed(std::string_view s);
  bool step(uint8_t c);  // feed() without the undo (state garbage on false)
  // The output may end here: the block is complete, or (free start) no block has begun.
  bool done() const { return phase_ == Phase::kDone || phase_ == Phase::kFree; }
  std::string key() const;

 private:
  enum class Phase : uint8_t { kFree, kLiteral, kRawValue, kJsonValue, kDone };
  // what the literal set being matched leads to once one of its literals is complete
  enum class Then : uint8_t { kName, kInvokeBody, kParamName, kAfterParam, kAfterInvoke };
  void expect(const std::vector<std::string>* lits, uint64_t alive, Then then);
  void expect_name();
  bool literal_step(uint8_t c);
  void completed(size_t which);
  void after_param();

  const ToolGrammar* g_;
  Phase phase_;
  Then then_ = Then::kName;
  const std::vector<std::string>* lits_ = nullptr;
  uint64_t alive_ = 0;
  uint16_t pos_ = 0;
  uint16_t close_pos_ = 0;  // kFree: bytes of the calls opener matched; kRawValue: of the close
  int16_t tool_ = -1;
  uint64_t used_ = 0;
  std::optional<JsonMatcher> json_;
};

}  // namespace cedar::text
