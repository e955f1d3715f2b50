// `cedar run` as a user runs it (the real binary, CEDAR_BIN) on a generated tiny model: greedy
// output identical across runs and thread counts, the stats line, raw prompts, stop strings,
// chat over stdin (-i), chat turns reusing the prompt-end state in thinking mode, piped stdin as
// one prompt, the chat's commands, and exit status 2 with a message for bad flags.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace {

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

struct RunResult {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class RunCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/cedar-run-cli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    model_ = root_ + "/tiny";
    ASSERT_EQ(std::system((cedar_bin() + " make-model --preset tiny --seed 1 --out " + model_ +
                           " > /dev/null 2>&1")
                              .c_str()),
              0);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(root_); }

  // Runs `cedar run ARGS` with stdin from `input`; captures stdout, stderr and the exit status.
  static RunResult cedar_run(const std::string& args, const std::string& input = "") {
    const std::string in = root_ + "/stdin.txt", out = root_ + "/stdout.txt",
                      err = root_ + "/stderr.txt";
    std::ofstream(in, std::ios::binary) << input;
    const std::string cmd = cedar_bin() + " run " + args + " < " + in + " > " + out + " 2> " + err;
    const int st = std::system(cmd.c_str());
    RunResult r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  static std::string root_, model_;
};
std::string RunCli::root_, RunCli::model_;

const std::regex kStats(
    R"(cedar run: prompt (\d+) tokens \((\d+) cached\), prefill [0-9.]+ tok/s, decode [0-9.]+ tok/s, (\d+) tokens, finish (\w+))");

TEST_F(RunCli, GreedyOutputIsIdenticalAcrossRunsAndThreadCounts) {
  const RunResult a = cedar_run("-m " + model_ + " -p Hello -n 8 --temp 0");
  ASSERT_EQ(a.status, 0) << a.err;
  const RunResult b = cedar_run("-m " + model_ + " -p Hello -n 8 --temp 0");
  const RunResult t1 = cedar_run("-m " + model_ + " -p Hello -n 8 --temp 0 -t 1");
  const RunResult t2 = cedar_run("-m " + model_ + " -p Hello -n 8 --temp 0 -t 2");
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(t1.out, t2.out);
  EXPECT_EQ(a.out, t1.out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(a.err, m, kStats)) << a.err;
  EXPECT_EQ(m[3].str(), "8");
  EXPECT_EQ(m[4].str(), "length");
  // thinking is on by default: the answer starts in the reasoning block
  EXPECT_EQ(a.out.rfind("<think>\n", 0), 0u) << a.out;
  // with --nothink the prompt is shorter (no effort line) and there is no reasoning block
  const RunResult n =
      cedar_run("-m " + model_ + " -p Hello -n 8 --temp 0 --nothink --exact-prefill");
  ASSERT_EQ(n.status, 0) << n.err;
  std::smatch mn;
  ASSERT_TRUE(std::regex_search(n.err, mn, kStats));
  EXPECT_LT(std::stoi(mn[1].str()), std::stoi(m[1].str()));
  EXPECT_EQ(n.out.find("<think>"), std::string::npos);
}

TEST_F(RunCli, RawPromptsAndStopStrings) {
  const RunResult a = cedar_run("-m " + model_ + " -p 'The weather today' --raw -n 12 --temp 0");
  ASSERT_EQ(a.status, 0) << a.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(a.err, m, kStats)) << a.err;
  EXPECT_EQ(m[1].str(), "4");  // BOS + "The weather today" (3 BPE tokens)
  ASSERT_GT(a.out.size(), 4u);
  // stop on the first ASCII letter after the first byte (a one-byte stop string)
  std::string body = a.out.substr(0, a.out.size() - 1);  // drop the final newline
  size_t at = body.find_first_of("abcdefghijklmnopqrstuvwxyz", 1);
  if (at == std::string::npos) GTEST_SKIP() << "no ASCII letter in the random output";
  const std::string stop = body.substr(at, 1);
  const RunResult s =
      cedar_run("-m " + model_ + " -p 'The weather today' --raw -n 12 --temp 0 --stop '" + stop +
                "' --stop zzzzzz");
  ASSERT_EQ(s.status, 0) << s.err;
  // the printer ends the output with a newline unless it is empty or ends with one already
  const std::string cut = body.substr(0, body.find(stop));
  EXPECT_EQ(s.out, cut.empty() || cut.back() == '\n' ? cut : cut + "\n");
  ASSERT_TRUE(std::regex_search(s.err, m, kStats));
  EXPECT_EQ(m[4].str(), "stop");
}

TEST_F(RunCli, InteractiveChatKeepsTheHistory) {
  const RunResult r = cedar_run("-m " + model_ + " -i -n 4 --temp 0 --nothink --exact-prefill",
                                "Hello\n/think 0\n/bogus\nAnd again\n/exit\nnot read\n");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::smatch> stats;
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), kStats);
       it != std::sregex_iterator(); ++it)
    stats.push_back(*it);
  ASSERT_EQ(stats.size(), 2u) << r.err;  // two turns; the line after /exit is not read
  // the second prompt holds the first turn: longer than the first
  EXPECT_GT(std::stoi(stats[1][1].str()), std::stoi(stats[0][1].str()) + 4);
  EXPECT_NE(r.err.find("/think takes an effort between 1 and 100"), std::string::npos);
  EXPECT_NE(r.err.find("unknown command /bogus"), std::string::npos);
}

// Multi-line turns: a trailing backslash continues the line, a """ block is one message. The
// prompt of a two-line turn is longer than that of the same words on one line would be by the
// newline's token at least, and a block's lines all reach the model as one turn (one stats line).
TEST_F(RunCli, MultiLineTurnsAndHelp) {
  const std::string flags = "-m " + model_ + " -i -n 2 --temp 0 --nothink --exact-prefill";
  const RunResult one = cedar_run(flags, "alpha beta gamma\n/exit\n");
  const RunResult cont = cedar_run(flags, "alpha \\\nbeta \\\ngamma\n/help\n/exit\n");
  const RunResult block = cedar_run(flags, "\"\"\"\nalpha\nbeta\ngamma\n\"\"\"\n/exit\n");
  for (const RunResult* r : {&one, &cont, &block}) ASSERT_EQ(r->status, 0) << r->err;
  auto prompts = [](const std::string& err) {
    std::vector<int> n;
    for (auto it = std::sregex_iterator(err.begin(), err.end(), kStats);
         it != std::sregex_iterator(); ++it)
      n.push_back(std::stoi((*it)[1].str()));
    return n;
  };
  const auto p1 = prompts(one.err), pc = prompts(cont.err), pb = prompts(block.err);
  ASSERT_EQ(p1.size(), 1u) << one.err;
  ASSERT_EQ(pc.size(), 1u) << cont.err;  // three lines, one turn
  ASSERT_EQ(pb.size(), 1u) << block.err;
  EXPECT_GE(pc[0], p1[0]);  // the line breaks are in the message
  EXPECT_GE(pb[0], p1[0]);
  EXPECT_NE(cont.err.find("/reset             forget the conversation"), std::string::npos)
      << cont.err;
}

// The stats lines' (prompt tokens, cached tokens) per turn.
std::vector<std::pair<int, int>> turns(const std::string& err) {
  std::vector<std::pair<int, int>> t;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), kStats); it != std::sregex_iterator();
       ++it)
    t.emplace_back(std::stoi((*it)[1].str()), std::stoi((*it)[2].str()));
  return t;
}

// A long first message (past the model's window, so that a state cut before the answer is
// worth restoring), then two short ones.
std::string long_conversation() {
  std::string first;
  for (int i = 0; i < 40; ++i) first += "The river number " + std::to_string(i) + " runs east. ";
  return first + "\nName a tree.\nAnd a bird?\n";
}

// In thinking mode the template drops the last answer's reasoning, so a follow-up prompt does not
// extend the generated state; the prompt-end state in the chat's prefix cache serves it (the
// server's path). Without the cache (--cache-ram 0) every turn starts over; with thinking off
// the session state alone serves it.
TEST_F(RunCli, ChatTurnsReuseThePromptEndStateInBothThinkingModes) {
  const std::string flags = "-m " + model_ + " -i -n 6 --temp 0";
  for (const char* mode : {"", " --nothink"}) {
    const RunResult r = cedar_run(flags + mode, long_conversation());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto t = turns(r.err);
    ASSERT_EQ(t.size(), 3u) << r.err;
    EXPECT_EQ(t[0].second, 0);
    for (size_t i = 1; i < t.size(); ++i) {
      // all of the previous prompt but its last few tokens (the assistant's opening) is reused
      EXPECT_GE(t[i].second, t[i - 1].first - 4) << mode << "\n" << r.err;
      EXPECT_LT(t[i].second, t[i].first);
    }
  }
  const RunResult off = cedar_run(flags + " --cache-ram 0", long_conversation());
  ASSERT_EQ(off.status, 0) << off.err;
  for (const auto& [prompt, cached] : turns(off.err)) EXPECT_EQ(cached, 0) << off.err;
}

// stdin that is not a terminal is one prompt (as -f - and -p with the same text); the reasoning
// is left out with --hide-thinking and counted; an answer cut inside its reasoning says so.
TEST_F(RunCli, PipedStdinIsOnePromptAndThinkingCanBeHidden) {
  const std::string text = "line one\nline two\n";
  const RunResult piped = cedar_run("-m " + model_ + " -n 6 --temp 0", text);
  const RunResult dash = cedar_run("-m " + model_ + " -n 6 --temp 0 -f -", text);
  const RunResult arg = cedar_run("-m " + model_ + " -n 6 --temp 0 -p '" + text + "'");
  for (const RunResult* r : {&piped, &dash, &arg}) ASSERT_EQ(r->status, 0) << r->err;
  ASSERT_EQ(turns(piped.err).size(), 1u) << piped.err;
  EXPECT_EQ(turns(piped.err), turns(dash.err));
  EXPECT_EQ(turns(piped.err), turns(arg.err));
  EXPECT_EQ(piped.out, arg.out);
  EXPECT_EQ(piped.out.rfind("<think>\n", 0), 0u) << piped.out;

  const RunResult hidden = cedar_run("-m " + model_ + " -n 6 --temp 0 --hide-thinking", text);
  ASSERT_EQ(hidden.status, 0) << hidden.err;
  EXPECT_EQ(hidden.out.find("<think>"), std::string::npos) << hidden.out;
  EXPECT_NE(hidden.err.find(" reasoning)"), std::string::npos) << hidden.err;
  // the visible answer is what follows the reasoning block
  const size_t close = piped.out.find("</think>\n");
  ASSERT_NE(close, std::string::npos) << piped.out;
  EXPECT_EQ(hidden.out, piped.out.substr(close + 9));

  // stop strings match the answer, not the reasoning (the server's rule: one output pipeline)
  const std::string reasoning = piped.out.substr(8, close - 8),
                    answer = piped.out.substr(close + 9);
  std::string stop;
  for (size_t i = 0; i + 3 <= reasoning.size() && stop.empty(); ++i) {
    const std::string c = reasoning.substr(i, 3);
    if (c.find_first_of("'\\\n") == std::string::npos && answer.find(c) == std::string::npos &&
        (uint8_t(c[0]) & 0x80) == 0 && (uint8_t(c[2]) & 0x80) == 0)
      stop = c;
  }
  if (!stop.empty()) {
    const RunResult s = cedar_run("-m " + model_ + " -n 6 --temp 0 --stop '" + stop + "'", text);
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_EQ(s.out, piped.out) << "stop '" << stop << "'";
  }

  const RunResult cut = cedar_run("-m " + model_ + " -p Hello -n 2 --temp 0");
  ASSERT_EQ(cut.status, 0) << cut.err;
  EXPECT_NE(cut.err.find("cut off inside its reasoning at 2 tokens"), std::string::npos) << cut.err;
}

// /set changes the sampling for the next turns, /show prints it, /save writes the conversation
// and /load continues it in another session (its prompt holds the loaded turns).
TEST_F(RunCli, ChatCommandsSetShowSaveAndLoad) {
  const std::string flags = "-m " + model_ + " -i -n 3 --temp 0 --nothink";
  const std::string file = root_ + "/conv.json";
  const RunResult a =
      cedar_run(flags, "Hello\n/set top-k 7\n/set top-p 2\n/save " + file + "\n/bye\n");
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_NE(a.err.find("top-k 7"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("/set top-p: bad value '2'"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("saved 2 messages"), std::string::npos) << a.err;
  const RunResult fresh = cedar_run(flags, "Again\n");
  const RunResult loaded = cedar_run(flags, "/load " + file + "\nAgain\n/load /nonexistent\n");
  ASSERT_EQ(loaded.status, 0) << loaded.err;
  EXPECT_NE(loaded.err.find("loaded 2 messages"), std::string::npos) << loaded.err;
  EXPECT_NE(loaded.err.find("/load: /load /nonexistent: cannot open"), std::string::npos)
      << loaded.err;
  ASSERT_EQ(turns(fresh.err).size(), 1u);
  ASSERT_EQ(turns(loaded.err).size(), 1u);
  EXPECT_GT(turns(loaded.err)[0].first, turns(fresh.err)[0].first + 4);
}

// On a terminal (a pseudo-terminal from util-linux's `script`, fed as if typed): Ctrl-C drops
// the line being typed, a bracketed paste of two lines is one turn with its newline (the prompt
// -p gives the same text), typed UTF-8 reaches the model as typed, /bye leaves.
TEST_F(RunCli, ATerminalChatTakesABracketedPasteAsOneTurn) {
  if (std::system("command -v script > /dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1)";
  const std::string flags = "-m " + model_ + " -n 2 --temp 0 --nothink --exact-prefill";
  auto typed = [&](const std::string& keys) {
    const std::string in = root_ + "/tty_in.txt", out = root_ + "/tty_out.txt";
    std::ofstream(in, std::ios::binary) << keys;
    const std::string cmd = "script -qfec \"" + cedar_bin() + " run " + flags + "\" /dev/null < " +
                            in + " > " + out + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return slurp(out);
  };
  const std::string paste = typed("dropped line\x03\x1b[200~line one\nline two\x1b[201~/bye\r");
  const RunResult p = cedar_run(flags + " -p 'line one\nline two'");
  ASSERT_EQ(turns(paste).size(), 1u) << paste;  // one turn: the paste, not the dropped line
  ASSERT_EQ(turns(p.err).size(), 1u) << p.err;
  EXPECT_EQ(turns(paste)[0].first, turns(p.err)[0].first) << paste;  // the same message
  EXPECT_NE(paste.find("line two"), std::string::npos) << paste;     // the paste is shown
  const std::string utf8 = typed("caf\xc3\xa9\r/bye\r");
  const RunResult u = cedar_run(flags + " -p 'caf\xc3\xa9'");
  ASSERT_EQ(turns(utf8).size(), 1u) << utf8;
  EXPECT_EQ(turns(utf8)[0].first, turns(u.err)[0].first) << utf8;
}

TEST_F(RunCli, BadFlagsExitWithStatus2AndAMessage) {
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"-m M -p Hello --bogus", "unknown option '--bogus'"},
      {"-m M -p Hello --temp -1", "--temp"},
      {"-m M -p Hello --temp abc", "--temp"},
      {"-m M -p Hello --top-p 0", "--top-p"},
      {"-m M -p Hello --top-p 1.5", "--top-p"},
      {"-m M -p Hello --min-p 2", "--min-p"},
      {"-m M -p Hello --top-k -3", "--top-k"},
      {"-m M -p Hello -n 0", "--n-predict"},
      {"-m M -p Hello -c -5", "--ctx-size"},
      {"-m M -p Hello -t -1", "--threads"},
      {"-m M -p Hello --think 101", "--think"},
      {"-m M -p Hello --think 50 --nothink", "--nothink"},
      {"-m M -p Hello --stop ''", "--stop"},
      {"-m M -p Hello --kernels nope", "--kernels"},
      {"-m M -p Hello --chunk 0", "--chunk"},
      {"-m M -i --raw", "--raw"},
      {"-m M -p Hello extra", "unexpected argument 'extra'"},
      {"-m M -p", "needs a value"},
      {"-m M -p Hello --head-type q4", "--head-type"},
      {"-m M -p Hello -i", "-i (--interactive)"},
      {"-m M -p Hello --cache-ram -1", "--cache-ram"},
      {"-m M", "stdin is not a terminal and holds no prompt"},  // (stdin: an empty file)
  };
  for (const auto& c : cases) {
    std::string args = c.args;
    const size_t at = args.find("-m M");
    if (at != std::string::npos) args.replace(at, 4, "-m " + model_);
    const RunResult r = cedar_run(args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\n" << r.err;
  }
  // without -m: the embedded default model when the build made it, else an error naming --model
  const RunResult d = cedar_run("-p Hello -n 2 --temp 0");
  if (std::filesystem::exists(std::string(CEDAR_DEFAULT_MODEL) + "/config.json")) {
    EXPECT_EQ(d.status, 0) << d.err;
    EXPECT_NE(d.err.find("2 tokens"), std::string::npos) << d.err;
  } else {
    EXPECT_EQ(d.status, 1) << d.err;
    EXPECT_NE(d.err.find("--model"), std::string::npos) << d.err;
  }
  // a missing model directory is a runtime error (1) naming it
  const RunResult r = cedar_run("-m " + root_ + "/nope -p Hello");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(root_ + "/nope"), std::string::npos) << r.err;
}

}  // namespace
