// Tool calls as a byte grammar: the DSML block V4.1 writes for tool calls (v41-interface.md
// §3.5), in the canonical spelling chat_encoder renders them (text/dsml.cpp render_tool_calls),
// restricted to the request's tools -- a declared tool name, its declared parameters at most once
// each, then the value. ToolCallMatcher has JsonMatcher's interface, so the same vocabulary-trie
// search (runtime/token_constraint.h) turns it into a token mask.
//
// Two strengths, chosen per tool:
//  * strict ("strict": true, or any tool when the request forces a call): the required
//    parameters before the invoke closes, string-typed values as raw text (string="true"), other
//    values as JSON of the parameter's schema (string="false", text/json_grammar.h). A strict tool
//    must have a schema json_grammar.h can enforce (else the request is refused); under a forced
//    call a non-strict tool gets its schema where it can be enforced and any value where not.
//  * names (every other tool of a request that offers tools): only the tool and parameter names
//    are held to the declared ones; a value is raw text or any JSON value.
// Before the block, free text may come (tool_choice "auto"); there the DSML tag marker may only
// open a calls block, so no stray tag reaches the visible answer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/json_grammar.h"

namespace cedar::text {

// A set of byte strings as a trie; each string carries a 64-bit tag, and every node the union of
// the tags of the strings below it, so that a walk can be limited to strings of some tags.
class LiteralTrie {
 public:
  LiteralTrie();
  void add(std::string_view s, int32_t id, uint64_t tag);
  // The child of `node` by byte c whose strings have a tag in `tags`, or -1.
  int32_t child(int32_t node, uint8_t c, uint64_t tags) const;
  // The id of the string that ends at `node`, or -1.
  int32_t id(int32_t node) const { return nodes_[size_t(node)].id; }
  bool empty() const { return nodes_.size() == 1; }

 private:
  struct Node {
    int32_t first_child = -1, next_sibling = -1;
    int32_t id = -1;
    uint64_t below = 0;
    uint8_t byte = 0;
  };
  std::vector<Node> nodes_;
};

class ToolGrammar {
 public:
  // Parameters per tool the grammar can hold (a bit each in the matcher's state).
  static constexpr size_t kMaxParams = 64;

  // From the request's OpenAI-style tools ([{type:"function", function:{name, parameters}}] or
  // the function objects alone). `forced`: the request forces a call, so every tool is held to
  // its schema where it can be; otherwise only "strict": true tools are, the others to their
  // names. Throws RequestError naming an unsupported parameter schema of a strict tool, an
  // invalid or duplicate name, or more than kMaxParams parameters on a tool.
  static ToolGrammar compile(const ojson& tools, bool forced = true);

  struct Entry {                         // one way to write one parameter
    int param = 0;                       // index into Tool::params
    bool raw = false;                    // string="true": the value is raw text
    const SchemaNode* schema = nullptr;  // !raw: the JSON value's schema (nullptr: any)
  };
  struct Tool {
    std::string name;
    std::vector<std::string> params;
    uint64_t required = 0;       // bit i: params[i] is required
    std::vector<Entry> entries;  // by the id of their spelling in `spellings`
    LiteralTrie spellings;       // NAME" string="true|false">, tagged with their param's bit
  };
  const std::vector<Tool>& tools() const { return tools_; }
  const LiteralTrie& names() const { return names_; }  // NAME">\n, by tool index

 private:
  Tool compile_tool(const ojson& fn, const std::string& at, bool forced);
  static void spell(Tool* t, int param, bool raw, const SchemaNode* schema);
  void add_schema_spellings(Tool* t, const ojson& prop, const ojson& params, const std::string& at,
                            const std::string& path, bool strict);

  std::vector<Tool> tools_;
  LiteralTrie names_;
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
  bool done() const;
  // Equal keys accept the same continuations up to the next tag marker (the mask cache's key).
  std::string key() const;
  // The key holds nothing of this grammar (free text, the inside of a raw value): a state of any
  // grammar with the same key accepts the same tokens.
  bool grammar_free_key() const { return phase_ == Phase::kFree || phase_ == Phase::kRawValue; }

 private:
  enum class Phase : uint8_t { kFree, kLiteral, kName, kSpelling, kRawValue, kJsonValue, kDone };
  // what the literal set being matched leads to once one of its literals is complete
  enum class Then : uint8_t { kName, kInvokeBody, kAfterParam, kAfterInvoke };
  void expect(const std::vector<std::string>* lits, uint64_t alive, Then then);
  void expect_name();
  bool free_step(uint8_t c);
  bool literal_step(uint8_t c);
  bool trie_step(uint8_t c);
  void completed(size_t which);
  void invoke_body();
  void after_param();
  uint64_t after_param_alive() const;

  const ToolGrammar* g_;
  Phase phase_;
  Then then_ = Then::kName;
  const std::vector<std::string>* lits_ = nullptr;
  uint64_t alive_ = 0;
  uint16_t pos_ = 0;
  uint16_t open_ = 0;    // kFree: bytes of the calls opener matched; kRawValue: of the close
  uint16_t marker_ = 0;  // kFree: bytes of the DSML tag marker matched outside the opener
  int32_t node_ = 0;     // kName / kSpelling: the trie node reached
  int16_t tool_ = -1;
  uint64_t used_ = 0;
  std::optional<JsonMatcher> json_;
};

}  // namespace cedar::text
