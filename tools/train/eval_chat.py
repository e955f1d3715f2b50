#!/usr/bin/python3
"""Chat accuracy of a model on held-out synthetic conversations, through `cedar serve`'s OpenAI
API (greedy): tool selection (the right function called), argument copying (the call's arguments
equal to the expected JSON), arithmetic (the right number in the answer) and JSON mode (the
answer parses and has the expected keys).

    /usr/bin/python3 tools/train/eval_chat.py --cedar build/cedar [--model DIR] \
        --conversations DATA/heldout/synth.jsonl [--per-kind 50] [--json]

Held-out conversations use templates and values the trainer never saw (synth.py holds out every
20th of each list). Prints one line per kind and, with --json, one object.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synth import TOOL_KINDS  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def prompt_and_expected(conv):
    """The request up to the first assistant turn, and that turn."""
    req = conv["request"]
    msgs = req["messages"]
    first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    body = {k: v for k, v in req.items() if k != "messages"}
    body["messages"] = msgs[:first]
    body.update({"temperature": 0, "max_tokens": 160})
    return body, msgs[first]


def numbers(text):
    return [int(x) for x in re.findall(r"-?\d+", text or "")]


def score(kind, got, want):
    """(hit, extra): hit for the kind's main measure; extra for tool calls (argument copy)."""
    msg = got["choices"][0]["message"]
    if kind in TOOL_KINDS:
        calls = msg.get("tool_calls") or []
        exp = want["tool_calls"][0]["function"]
        if not calls:
            return False, False
        fn = calls[0]["function"]
        try:
            args_ok = json.loads(fn["arguments"]) == json.loads(exp["arguments"])
        except (ValueError, TypeError):
            args_ok = False
        return fn["name"] == exp["name"], fn["name"] == exp["name"] and args_ok
    if kind == "arithmetic":
        exp = numbers(want["content"])
        return bool(exp) and exp[-1] in numbers(msg.get("content"))[-1:], None
    if kind == "json":
        try:
            a, b = json.loads(msg.get("content") or ""), json.loads(want["content"])
        except ValueError:
            return False, None
        return isinstance(a, dict) and set(a) == set(b), None
    return (msg.get("content") or "").strip() == want["content"].strip(), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cedar", required=True)
    ap.add_argument("--model", help="model directory (default: cedar's default model)")
    ap.add_argument("--conversations", required=True)
    ap.add_argument("--per-kind", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    convs = [json.loads(l) for l in open(a.conversations, encoding="utf-8") if l.strip()]
    by_kind = {}
    for c in convs:
        by_kind.setdefault(c["kind"], [])
        if len(by_kind[c["kind"]]) < a.per_kind:
            by_kind[c["kind"]].append(c)
    port = free_port()
    cmd = [a.cedar, "serve", "--port", str(port)] + (["-m", a.model] if a.model else [])
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                if srv.poll() is not None:
                    sys.exit(f"eval_chat: cedar serve exited: {srv.stderr.read().decode()}")
                time.sleep(0.2)
        result = {}
        for kind, cs in sorted(by_kind.items()):
            hits = extra = 0
            for c in cs:
                body, want = prompt_and_expected(c)
                h, x = score(kind, post(port, body), want)
                hits += bool(h)
                extra += bool(x)
            r = {"n": len(cs), "accuracy": round(hits / len(cs), 3)}
            if kind in TOOL_KINDS:
                r["tool_accuracy"] = r.pop("accuracy")
                r["argument_accuracy"] = round(extra / len(cs), 3)
            result[kind] = r
            print(f"{kind:10s} " + " ".join(f"{k} {v}" for k, v in r.items()), flush=True)
        if a.json:
            print(json.dumps(result))
    finally:
        srv.terminate()
        srv.wait(timeout=30)


if __name__ == "__main__":
    main()
