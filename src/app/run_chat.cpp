#include "app/run_chat.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include "app/line_reader.h"
#include "app/read_file.h"
#include "app/run_output.h"
#include "base/json_limits.h"
#include "server/openai_api.h"
#include "text/chat_request.h"

namespace cedar::app {

namespace {

using text::ojson;

constexpr const char* kChatHelp =
    "  /think [N]         thinking on, reasoning effort N in 1..100 (default 75)\n"
    "  /nothink           thinking off\n"
    "  /set temp X | top-p X | top-k N | min-p X | seed N | n-predict N | system TEXT\n"
    "                     change a setting for the next turns (/set system clears the\n"
    "                     conversation: the system message opens it)\n"
    "  /show              the settings and the conversation's length\n"
    "  /save FILE         write the conversation (JSON: messages and settings)\n"
    "  /load FILE         continue a saved conversation\n"
    "  /reset             forget the conversation\n"
    "  /help              this list\n"
    "  /bye, /exit        leave (also Ctrl-D); Ctrl-C stops an answer, or clears the line\n"
    "  a line ending in \\ continues on the next; a line of \"\"\" starts and ends a "
    "multi-line message\n"
    "  on a terminal: arrow keys edit and recall, Ctrl-R searches the history "
    "($CEDAR_HISTORY, default ~/.cedar_history)\n";

class Chat {
 public:
  Chat(runtime::Engine& engine, runtime::PrefixCache* cache, ChatSettings s,
       std::atomic<bool>* interrupt)
      : engine_(engine),
        cache_(cache),
        s_(std::move(s)),
        interrupt_(interrupt),
        gen_(engine, cache) {
    reset();
  }

  // One line of input; false when the chat should end.
  bool line(const std::string& l) {
    if (l.empty()) return true;
    if (l[0] == '/') return command(l);
    turn(l);
    return true;
  }

 private:
  void reset() {
    history_ = ojson::array();
    if (!s_.system.empty()) history_.push_back(ojson{{"role", "system"}, {"content", s_.system}});
  }

  void turn(const std::string& text) {
    ojson next = history_;
    next.push_back(ojson{{"role", "user"}, {"content", text}});
    runtime::Prompt prompt;
    try {
      prompt = engine_.render_request(chat_body(next, s_.thinking, s_.effort));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cedar run: %s\n", e.what());
      return;
    }
    TurnOutput out;
    out.hide_thinking = s_.hide_thinking;
    out.stop = s_.stop;
    const TurnResult r =
        run_turn(gen_, cache_, prompt, s_.gen, out, interrupt_, "/set n-predict N, -n N");
    // a stopped answer stays in the conversation as far as it went (the user saw it)
    history_ = std::move(next);
    history_.push_back(server::openai_message(r.outcome));
  }

  bool command(const std::string& l) {
    std::istringstream cmd(l);
    std::string word;
    cmd >> word;
    std::string rest;
    std::getline(cmd >> std::ws, rest);
    if (word == "/exit" || word == "/quit" || word == "/bye") return false;
    if (word == "/help" || word == "/?") {
      std::fprintf(stderr, "%s", kChatHelp);
    } else if (word == "/nothink") {
      s_.thinking = false;
      std::fprintf(stderr, "thinking off\n");
    } else if (word == "/think") {
      const std::optional<long long> e = rest.empty() ? 75 : integer(rest);
      if (!e || *e < 1 || *e > 100) {
        std::fprintf(stderr, "/think takes an effort between 1 and 100\n");
      } else {
        s_.thinking = true;
        s_.effort = int(*e);
        std::fprintf(stderr, "thinking on, effort %d\n", s_.effort);
      }
    } else if (word == "/set") {
      set(rest);
    } else if (word == "/show") {
      show();
    } else if (word == "/save") {
      save(rest);
    } else if (word == "/load") {
      load(rest);
    } else if (word == "/reset") {
      reset();
      gen_.reset();
      std::fprintf(stderr, "history cleared\n");
    } else {
      std::fprintf(stderr, "unknown command %s (/help lists them)\n", word.c_str());
    }
    return true;
  }

  static std::optional<long long> integer(const std::string& v) {
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') return std::nullopt;
    return x;
  }
  static std::optional<double> number(const std::string& v) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x)) return std::nullopt;
    return x;
  }

  void set(const std::string& args) {
    std::istringstream in(args);
    std::string key, value;
    in >> key;
    std::getline(in >> std::ws, value);
    runtime::SamplingParams& sp = s_.gen.sampling;
    auto num = [&](double lo, double hi, double* to) {
      const auto x = number(value);
      if (!x || *x < lo || *x > hi) return false;
      *to = *x;
      return true;
    };
    auto whole = [&](long long lo, long long hi, auto* to) {
      const auto x = integer(value);
      if (!x || *x < lo || *x > hi) return false;
      *to = decltype(+*to)(*x);
      return true;
    };
    bool ok = true;
    if (key == "temp" || key == "temperature") {
      ok = num(0.0, 1e6, &sp.temperature);
    } else if (key == "top-p") {
      ok = num(1e-9, 1.0, &sp.top_p);
    } else if (key == "top-k") {
      ok = whole(0, 1 << 30, &sp.top_k);
    } else if (key == "min-p") {
      ok = num(0.0, 1.0, &sp.min_p);
    } else if (key == "seed") {
      ok = whole(0, (1ll << 62), &sp.seed);
    } else if (key == "n-predict") {
      ok = whole(-1, 1ll << 40, &s_.gen.max_tokens) && s_.gen.max_tokens != 0;
    } else if (key == "system") {
      s_.system = value;
      reset();
      gen_.reset();
      std::fprintf(stderr, "system message %s; history cleared\n",
                   value.empty() ? "removed" : "set");
      return;
    } else {
      std::fprintf(stderr,
                   "/set takes temp, top-p, top-k, min-p, seed, n-predict or system (/help)\n");
      return;
    }
    if (!ok) {
      std::fprintf(stderr, "/set %s: bad value '%s'\n", key.c_str(), value.c_str());
      return;
    }
    show();
  }

  void show() const {
    const runtime::SamplingParams& sp = s_.gen.sampling;
    std::fprintf(stderr,
                 "thinking %s (effort %d), temp %g, top-p %g, top-k %d, min-p %g, seed %llu, "
                 "n-predict %lld\n",
                 s_.thinking ? "on" : "off", s_.effort, sp.temperature, sp.top_p, sp.top_k,
                 sp.min_p, (unsigned long long)sp.seed, (long long)s_.gen.max_tokens);
    std::fprintf(stderr, "system: %s\nconversation: %zu messages, %zu tokens in the state\n",
                 s_.system.empty() ? "(none)" : s_.system.c_str(), history_.size(),
                 gen_.tokens().size());
  }

  void save(const std::string& path) const {
    if (path.empty()) {
      std::fprintf(stderr, "/save takes a file name\n");
      return;
    }
    ojson doc = {
        {"messages", history_}, {"thinking", s_.thinking}, {"reasoning_effort", s_.effort}};
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << doc.dump(1) << "\n";
    f.close();
    if (!f)
      std::fprintf(stderr, "/save %s: cannot write\n", path.c_str());
    else
      std::fprintf(stderr, "saved %zu messages to %s\n", history_.size(), path.c_str());
  }

  // A saved conversation replaces this one when the engine can render it (the template checks
  // every message); anything else leaves the chat as it was.
  void load(const std::string& path) {
    if (path.empty()) {
      std::fprintf(stderr, "/load takes a file name\n");
      return;
    }
    try {
      std::string error;
      const ojson doc = parse_untrusted_json(read_file(path, "/load"), &error);
      if (doc.is_discarded()) throw std::runtime_error(path + ": " + error);
      if (!doc.is_object() || !doc.contains("messages") || !doc["messages"].is_array())
        throw std::runtime_error(path + ": not a saved conversation (no \"messages\" array)");
      const bool thinking = doc.value("thinking", s_.thinking);
      const int effort = doc.contains("reasoning_effort")
                             ? text::parse_reasoning_effort(doc["reasoning_effort"])
                             : s_.effort;
      (void)engine_.render_request(chat_body(doc["messages"], thinking, effort));
      history_ = doc["messages"];
      s_.thinking = thinking;
      s_.effort = effort;
      s_.system.clear();
      if (!history_.empty() && history_[0].value("role", "") == "system" &&
          history_[0]["content"].is_string())
        s_.system = history_[0]["content"].get<std::string>();
      std::fprintf(stderr, "loaded %zu messages from %s\n", history_.size(), path.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "/load: %s\n", e.what());
    }
  }

  runtime::Engine& engine_;
  runtime::PrefixCache* cache_;
  ChatSettings s_;
  std::atomic<bool>* interrupt_;
  runtime::Generator gen_;
  ojson history_;
};

}  // namespace

// The request body the engine renders: the conversation and the thinking switch.
text::ojson chat_body(const ojson& messages, bool thinking, int effort) {
  text::ojson body = text::ojson::object();
  body["messages"] = messages;
  body["thinking"] = text::ojson{{"type", thinking ? "enabled" : "disabled"}};
  body["reasoning_effort"] = effort;
  return body;
}

int run_chat(runtime::Engine& engine, runtime::PrefixCache* cache, ChatSettings s,
             bool terminal_input, std::atomic<bool>* interrupt) {
  std::fprintf(stderr, "cedar run: chat with %s (%d threads). /help for commands\n",
               s.model_name.c_str(), engine.threads());
  Chat chat(engine, cache, std::move(s), interrupt);
  LineReader reader(terminal_input, interrupt);
  while (const std::optional<std::string> got = reader.next())
    if (!chat.line(*got)) break;
  return 0;
}

}  // namespace cedar::app
