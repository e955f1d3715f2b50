#include "text/chat_encoder.h"

#include <algorithm>
#include <map>

namespace cedar::text {

namespace {

const std::map<std::string, std::string>& task_tokens() {
  static const std::map<std::string, std::string> k = {
      {"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
      {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"}};
  return k;
}

bool has_tools(const Message& m) { return m.tools.is_array() && !m.tools.empty(); }

// ref: encoding.py merge_tool_messages. V4.1 has no tool turn: each tool message becomes a
// tool_result block of a user turn, and consecutive user/tool messages share one user turn
// (a user message does not merge into one that carries a task; tool results always do).
std::vector<Message> merge_tool_messages(const std::vector<Message>& in) {
  std::vector<Message> out;
  for (const auto& m : in) {
    const bool prev_user = !out.empty() && out.back().role == Role::kUser;
    if (m.role == Role::kTool) {
      if (prev_user) {
        out.back().blocks.push_back(m.blocks[0]);
      } else {
        Message u;
        u.role = Role::kUser;
        u.blocks = m.blocks;
        u.task = m.task;
        out.push_back(std::move(u));
      }
    } else if (m.role == Role::kUser && prev_user && out.back().task.empty()) {
      auto& blocks = out.back().blocks;
      blocks.insert(blocks.end(), m.blocks.begin(), m.blocks.end());
      out.back().task = m.task;  // the release drops a task here; keeping it is our choice
    } else {
      out.push_back(m);
    }
  }
  return out;
}

// ref: encoding.py sort_tool_results_by_call_order. Within a user turn the tool_result blocks
// take the order of the calls of the most recent assistant message with tool calls (stable;
// unknown ids rank 0); other blocks keep their slots.
void sort_tool_results_by_call_order(std::vector<Message>* msgs) {
  std::map<std::string, int> order;
  for (auto& m : *msgs) {
    if (m.role == Role::kAssistant && !m.tool_calls.empty()) {
      order.clear();
      for (std::size_t k = 0; k < m.tool_calls.size(); ++k)
        if (!m.tool_calls[k].id.empty()) order.emplace(m.tool_calls[k].id, static_cast<int>(k));
    } else if (m.role == Role::kUser && !order.empty()) {
      std::vector<ContentBlock> results;
      for (const auto& b : m.blocks)
        if (b.kind == ContentBlock::Kind::kToolResult) results.push_back(b);
      if (results.size() < 2) continue;
      auto rank = [&](const ContentBlock& b) {
        const auto it = order.find(b.tool_call_id);
        return it == order.end() ? 0 : it->second;
      };
      std::stable_sort(
          results.begin(), results.end(),
          [&](const ContentBlock& a, const ContentBlock& c) { return rank(a) < rank(c); });
      std::size_t k = 0;
      for (auto& b : m.blocks)
        if (b.kind == ContentBlock::Kind::kToolResult) b = results[k++];
    }
  }
}

// ref: encoding.py find_last_user_index. A system message after index 0 counts as a user turn.
int find_last_user_index(const std::vector<Message>& msgs) {
  for (int i = static_cast<int>(msgs.size()) - 1; i >= 0; --i) {
    const Role r = msgs[static_cast<std::size_t>(i)].role;
    if (r == Role::kUser || (r == Role::kSystem && i > 0)) return i;
  }
  return -1;
}

class Renderer {
 public:
  Renderer(const std::vector<Message>& msgs, bool thinking, int effort, RenderResult* out)
      : msgs_(msgs), thinking_(thinking), effort_(effort), out_(out) {
    last_user_ = find_last_user_index(msgs_);
    // Drop rule (§3.3 step 5): with tools anywhere in the conversation nothing is dropped.
    drop_ = thinking_ && std::none_of(msgs_.begin(), msgs_.end(), has_tools);
  }

  void run() {
    b_.tmpl(kBos);
    for (std::size_t i = 0; i < msgs_.size(); ++i) render_message(static_cast<int>(i));
    out_->prompt = b_.take_text();
    out_->segments = b_.take_segments();
  }

 private:
  void image(const std::string& url) {
    b_.tmpl(kImagePlaceholder);
    out_->images.push_back(url);
  }

  // Text and image blocks joined by "\n\n".
  void render_parts(const std::vector<ContentBlock>& parts) {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (k) b_.tmpl("\n\n");
      const ContentBlock& p = parts[k];
      if (p.kind == ContentBlock::Kind::kImage) {
        image(p.text);
      } else if (p.kind == ContentBlock::Kind::kToolResult) {
        b_.tmpl(kToolResultOpen);
        render_parts(p.parts);
        b_.tmpl(kToolResultClose);
      } else {
        b_.content(p.text);
      }
    }
  }

  // ref: encoding.py render_message (V4.1).
  void render_message(int i) {
    const Message& m = msgs_[static_cast<std::size_t>(i)];
    if (i == 0 && (thinking_ || m.role == Role::kSystem)) b_.tmpl(kSystemTok);
    if (i == 0 && thinking_) b_.tmpl(effort_line(effort_));
    out_->start = GenerationStart::kContent;

    switch (m.role) {
      case Role::kSystem:
        if (i > 0) b_.tmpl(kSystemTok);
        b_.content(m.content);
        if (has_tools(m)) {
          b_.tmpl("\n\n");
          render_tools_prompt(m.tools, &b_);
        }
        if (m.response_format.is_object()) {
          b_.tmpl(
              "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
              "reply:\n");
          b_.content(py_json_dumps(m.response_format));
        }
        break;
      case Role::kUser:
        b_.tmpl(kUserTok);
        render_parts(m.blocks);
        break;
      case Role::kLatestReminder:
        b_.tmpl(kLatestReminderTok);
        b_.content(m.content);
        break;
      case Role::kAssistant:
        render_assistant(i, m);
        break;
      case Role::kTool:
        break;  // merged into user turns before rendering
    }

    // Transition: the generation header follows a user-like turn when the next message is an
    // assistant / latest_reminder turn or there is none.
    const bool next_takes_header =
        i + 1 == static_cast<int>(msgs_.size()) ||
        msgs_[static_cast<std::size_t>(i + 1)].role == Role::kAssistant ||
        msgs_[static_cast<std::size_t>(i + 1)].role == Role::kLatestReminder;
    if (!next_takes_header) return;
    header_ = false;
    if (!m.task.empty()) {
      if (m.task == "action") {
        b_.tmpl(kAssistantTok);
        b_.tmpl(thinking_ ? kThinkStart : kThinkEnd);
      }
      b_.tmpl(task_tokens().at(m.task));
    } else if (m.role == Role::kUser || (m.role == Role::kSystem && i > 0)) {
      b_.tmpl(kAssistantTok);
      const bool open_think = thinking_ && (!drop_ || i >= last_user_);
      b_.tmpl(open_think ? kThinkStart : kThinkEnd);
      out_->start = open_think ? GenerationStart::kReasoning : GenerationStart::kContent;
      header_ = true;
    }
  }

  void render_assistant(int i, const Message& m) {
    const bool prev_has_task = i > 0 && !msgs_[static_cast<std::size_t>(i - 1)].task.empty();
    const bool with_thinking = thinking_ && !prev_has_task && (!drop_ || i > last_user_);
    if (with_thinking) {
      b_.content(m.reasoning_content.value_or(""));
      // Prefix completion with reasoning but no content continues the reasoning itself
      // (§3.10, UNCONFIRMED; docs/CHAT_TEMPLATE.md).
      if (m.prefix && m.content.empty() && m.reasoning_content && !m.reasoning_content->empty()) {
        out_->start = GenerationStart::kReasoning;
        return;
      }
      b_.tmpl(kThinkEnd);
    }
    b_.content(m.content);
    if (!m.tool_calls.empty()) {
      b_.tmpl("\n\n");
      render_tool_calls(m.tool_calls, &b_);
    }
    if (!m.prefix) b_.tmpl(kEos);
    out_->start = GenerationStart::kContent;
  }

 public:
  bool ended_with_header() const { return header_; }

 private:
  const std::vector<Message>& msgs_;
  bool thinking_;
  int effort_;
  RenderResult* out_;
  PromptBuilder b_;
  int last_user_ = -1;
  bool drop_ = false;
  bool header_ = false;
};

}  // namespace

RenderResult ChatEncoder::render(const ChatRequest& req) const {
  if (req.messages.empty()) throw RequestError("messages must be a non-empty array", "messages");
  std::vector<Message> msgs = merge_tool_messages(req.messages);
  sort_tool_results_by_call_order(&msgs);

  RenderResult out;
  out.thinking = req.thinking;
  Renderer r(msgs, req.thinking, req.reasoning_effort, &out);
  r.run();
  const bool forced =
      req.tool_choice == ToolChoice::kRequired || req.tool_choice == ToolChoice::kNamed;
  if (!forced) return out;
  // Forced tool call (§3.6, recipe): the prompt opens the calls block for the model.
  if (!r.ended_with_header())
    throw RequestError(
        "tool_choice \"required\" or a named tool needs the conversation to end "
        "with a user or tool message",
        "tool_choice");
  const std::string tail = "\n\n" + std::string(kDsmlCallsOpen) + "\n";
  out.prompt += tail;
  if (!out.segments.empty() && out.segments.back().is_template)
    out.segments.back().text += tail;
  else
    out.segments.push_back({tail, true});
  out.start = GenerationStart::kToolCalls;
  return out;
}

RenderResult ChatEncoder::render_fim(const FimRequest& req) const {
  PromptBuilder b;
  b.tmpl(kBos);
  if (req.suffix) {
    b.tmpl(kFimBegin);
    b.content(req.prompt);
    b.tmpl(kFimHole);
    b.content(*req.suffix);
    b.tmpl(kFimEnd);
  } else {
    b.content(req.prompt);
  }
  RenderResult out;
  out.prompt = b.take_text();
  out.segments = b.take_segments();
  out.thinking = false;
  out.start = GenerationStart::kContent;
  return out;
}

RenderResult ChatEncoder::render_request(const ojson& body) const {
  if (body.is_object() && !body.contains("messages") && body.contains("prompt"))
    return render_fim(parse_completion_request(body));
  return render(parse_chat_request(body));
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok,
                                   const std::vector<PromptSegment>& segments) {
  const AddedTokenMatcher matcher(tok.added_tokens());
  std::vector<int32_t> ids;
  std::string run;  // text since the last added token
  std::vector<Segment> pieces;
  for (const auto& seg : segments) {
    if (!seg.is_template) {
      run += seg.text;
      continue;
    }
    pieces.clear();
    matcher.segment(seg.text, &pieces);
    for (const auto& p : pieces) {
      if (p.id < 0) {
        run.append(p.text);
        continue;
      }
      tok.encode_append(run, /*allow_special=*/false, &ids);
      run.clear();
      ids.push_back(p.id);
    }
  }
  tok.encode_append(run, /*allow_special=*/false, &ids);
  return ids;
}

}  // namespace cedar::text
