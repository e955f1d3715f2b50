#!/usr/bin/env python3
"""cedar beside llama.cpp engines at equal work: one interleaved session, one table of ratios.

cedar runs `cedar bench --json` on a checkpoint of the `anchor` preset (make-model --preset
anchor); ik_llama.cpp and mainline llama.cpp, when their `llama-bench` binaries are given, run
their GGUF of the same shapes (DeepSeek-V4-Flash-shaped: 12 layers, hidden 2048, 64 experts).
Rounds alternate the engines (cedar, ik, mainline, cedar, ...) so that a machine whose bandwidth
drifts during the session moves every column alike. Before each run the script waits until the
machine is quiet, and after it measures how much CPU time others took while it ran
(contamination); a run above --max-contam is repeated. Medians over the rounds are reported.

The tests (each engine's own words for the same work):
  decode      B=1 decode steps after a 16-token prompt (ik: -gp 16,N; cedar: --prompt 16)
  pp512 ...   prefill of N tokens (cedar: exact and CED plans; ik: -p N)
  b16         cedar's batched decode of 16 sequences (aggregate tok/s; no llama-bench column)
  decode@N    a decode step after an N-token prompt (ik: -gp N,gen)

usage:
  /usr/bin/python3 tools/anchor/anchor.py --cedar build/cedar --model /path/cedar-anchor \\
      [--ik ikllama/build/bin/llama-bench --gguf dsv4-anchor-L12.gguf] \\
      [--llama llama.cpp/build/bin/llama-bench] [--tests decode,pp512,pp2048,b16] \\
      [--rounds 2] [--threads 2] [--gen 64] [--json out.json]
No timing is asserted anywhere: this is a measuring tool (docs/BENCH.md, "Side by side").
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def busy_jiffies():
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def wait_until_quiet(max_wait_s, quiet_s=3.0, busy_below=0.05):
    """Waits until the machine has been under busy_below for quiet_s; returns the seconds waited
    (or -1 when it never was within max_wait_s: the run goes ahead and contamination tells)."""
    t0, quiet = time.monotonic(), 0.0
    while time.monotonic() - t0 < max_wait_s:
        a = busy_jiffies()
        time.sleep(0.5)
        b = busy_jiffies()
        util = (b[0] - a[0]) / max(1, b[1] - a[1])
        quiet = quiet + 0.5 if util < busy_below else 0.0
        if quiet >= quiet_s:
            return time.monotonic() - t0
    return -1.0


class Meter:
    """Runs commands and measures each run's contamination: the CPU time the rest of the machine
    used meanwhile (busy jiffies minus the child's own user + system time), as a share of all CPUs
    over the run's wall time."""

    def __init__(self):
        self.children_cpu = sum(os.times()[2:4])

    def run(self, cmd):
        b0 = busy_jiffies()[0]
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t0
        busy_s = (busy_jiffies()[0] - b0) / HZ
        children_cpu = sum(os.times()[2:4])  # includes the child just reaped
        own = children_cpu - self.children_cpu
        self.children_cpu = children_cpu
        if p.returncode != 0:
            raise SystemExit(f"{cmd[0]} exited {p.returncode}:\n{p.stderr[-2000:]}")
        return p.stdout, wall, max(0.0, (busy_s - own) / (NCPU * wall))


def parse_tests(spec):
    tests = [t.strip() for t in spec.split(",") if t.strip()]
    for t in tests:
        if not (t in ("decode", "b16") or re.fullmatch(r"pp\d+", t) or
                re.fullmatch(r"decode@\d+", t)):
            raise SystemExit(f"unknown test '{t}' (decode, ppN, b16, decode@N)")
    return tests


def cedar_cmd(a, tests, extra=()):
    prompts = sorted({16} | {int(t[2:]) for t in tests if t.startswith("pp")} |
                     {int(t[7:]) for t in tests if t.startswith("decode@")})
    cmd = [a.cedar, "bench", "-m", a.model, "--json", "-t", str(a.threads),
           "--prompt", ",".join(map(str, prompts)), "--gen", str(a.gen), "--reps", "1",
           "--speculative", "off", "--vision", "off", "--probe-passes", "3",
           "--batch", "1,16" if "b16" in tests else "0"]
    if a.cedar_plans:
        cmd += ["--plans", a.cedar_plans]
    elif not any(t.startswith("pp") for t in tests):
        cmd += ["--plans", "ced"]  # the decode tests follow a CED prefill either way
    return cmd + a.cedar_arg + list(extra)


def cedar_results(out, tests):
    b = json.loads(out)
    runs = {r["prompt"]: r for r in b["runs"]}
    res = {}
    for t in tests:
        if t == "decode":
            res[t] = runs[16]["decode"]["tokens_per_s"]
        elif t.startswith("decode@"):
            res[t] = runs[int(t[7:])]["decode"]["tokens_per_s"]
        elif t.startswith("pp"):
            r = runs[int(t[2:])]
            res[t] = r["exact"]["tokens_per_s"] if r.get("exact") else None
            res[t + " ced"] = r["ced"]["tokens_per_s"] if r.get("ced") else None
        elif t == "b16":
            by = {x["batch"]: x for x in b["batched_decode"]}
            res[t] = by[16]["tokens_per_s"]
            res["b16 GFLOP/s"] = by[16]["achieved_gflops"]
    m = b["machine"]
    res["read GB/s (cedar probe)"] = m["read_bandwidth"]["median"]
    res["FMA peak GFLOP/s"] = m["fma_peak"]["median"]
    for p in m["dot_probes"]:
        res[p["width"] + " GFLOP/s"] = p["median"]
    return res


def llama_bench_runs(a, binary, extra, tests):
    """One llama-bench command per test, each with -r 2: its own warm-up is a single token, so
    the first sample pays the page faults of the mapped file and the second is kept. Prompts of
    8K tokens and more run once (minutes each; the page faults are lost in them)."""
    runs = []
    for t in tests:
        if t == "b16":
            continue
        if t == "decode":
            sel, depth = ["-gp", f"16,{a.gen}", "-p", "0", "-n", "0"], 16
        elif t.startswith("decode@"):
            sel, depth = ["-gp", f"{t[7:]},{a.gen}", "-p", "0", "-n", "0"], int(t[7:])
        else:
            sel, depth = ["-p", t[2:], "-n", "0"], int(t[2:])
        reps = "1" if depth >= 8192 else "2"
        runs.append((t, [binary, "-m", a.gguf, "-t", str(a.threads), "-r", reps, "-o", "json"] +
                     extra + sel))
    return runs


def llama_bench_value(out):
    rec = json.loads(out)[0]
    samples = rec.get("samples_ts") or [rec["avg_ts"]]
    return samples[-1]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cedar", required=True, help="the cedar binary")
    ap.add_argument("--model", required=True, help="a cedar checkpoint (make-model --preset anchor)")
    ap.add_argument("--cedar-arg", action="append", default=[],
                    help="one more argument for cedar bench (repeatable), e.g. --kernels=ref")
    ap.add_argument("--cedar-variant", action="append", default=[], metavar="NAME=ARGS",
                    help="another cedar column, interleaved with the others: its name and the "
                         "bench arguments it adds (e.g. 'cedar q8 head=--head-type q8')")
    ap.add_argument("--cedar-plans", help="cedar's prefill plans (default: exact and CED when a "
                    "ppN test is asked, else CED)")
    ap.add_argument("--ik", help="ik_llama.cpp's llama-bench (run with -fa 1 -rtr 1)")
    ap.add_argument("--llama", help="mainline llama.cpp's llama-bench (run with -fa 1)")
    ap.add_argument("--gguf", help="the GGUF the llama.cpp engines run")
    ap.add_argument("--tests", default="decode,pp512,pp2048,b16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=64, help="decode steps timed per decode test")
    ap.add_argument("--max-contam", type=float, default=0.05)
    ap.add_argument("--tries", type=int, default=3, help="attempts per run before keeping it anyway")
    ap.add_argument("--quiet-wait", type=float, default=120.0)
    ap.add_argument("--json", help="write every run and the medians here")
    a = ap.parse_args()
    tests = parse_tests(a.tests)
    if (a.ik or a.llama) and not a.gguf:
        raise SystemExit("--ik / --llama need --gguf")
    engines = [("cedar", None, [])]
    for v in a.cedar_variant:
        name, sep, args = v.partition("=")
        if not sep or not name:
            raise SystemExit(f"--cedar-variant wants NAME=ARGS, got '{v}'")
        engines.append((name, None, args.split()))
    if a.ik:
        engines.append(("ik_llama.cpp", a.ik, ["-fa", "1", "-rtr", "1"]))
    if a.llama:
        engines.append(("llama.cpp", a.llama, ["-fa", "1"]))

    meter = Meter()
    log = []  # every run: engine, test, value, contamination, round

    def save(runs, medians=None):  # after every run, so an interrupted session keeps its data
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"runs": runs, "medians": medians}, f, indent=1)

    def measured(cmd, label):
        for attempt in range(a.tries):
            waited = wait_until_quiet(a.quiet_wait)
            out, wall, contam = meter.run(cmd)
            ok = contam <= a.max_contam
            print(f"  {label}: {wall:.1f} s, contamination {100 * contam:.1f}%"
                  f"{'' if waited >= 0 else ' (never quiet)'}{'' if ok else ', again'}",
                  file=sys.stderr)
            if ok or attempt == a.tries - 1:
                return out, wall, contam
        raise AssertionError("unreachable")

    for rnd in range(a.rounds):
        for name, binary, extra in engines:
            print(f"round {rnd + 1}/{a.rounds}: {name}", file=sys.stderr)
            if binary is None:
                out, wall, contam = measured(cedar_cmd(a, tests, extra), "cedar bench")
                for k, v in cedar_results(out, tests).items():
                    log.append({"engine": name, "test": k, "value": v, "round": rnd,
                                "contamination": contam})
                save(log)
            else:
                for t, cmd in llama_bench_runs(a, binary, extra, tests):
                    out, wall, contam = measured(cmd, t)
                    log.append({"engine": name, "test": t, "value": llama_bench_value(out),
                                "round": rnd, "contamination": contam})
                    save(log)

    names = [e[0] for e in engines]
    cedars = [e[0] for e in engines if e[1] is None]
    others = [e[0] for e in engines if e[1] is not None]
    rows = []
    for t in dict.fromkeys(x["test"] for x in log):
        vals = {n: median([x["value"] for x in log if x["test"] == t and x["engine"] == n])
                for n in names}
        rows.append((t, vals))

    def ref_value(test, engine):  # the llama.cpp engines' figure a cedar row compares with
        base = test[:-4] if test.endswith(" ced") else test
        return dict(rows).get(base, {}).get(engine)

    pairs = [(c, n, c + "/" + n.split(".")[0]) for c in cedars for n in others]
    widths = {n: max(14, len(n) + 2) for n in names}
    head = f"{'test (tok/s unless named)':<26}" + "".join(f"{n:>{widths[n]}}" for n in names)
    head += "".join(f"{label:>{len(label) + 3}}" for _, _, label in pairs)
    print(head)
    for t, vals in rows:
        line = f"{t:<26}" + "".join(
            f"{vals[n]:>{widths[n]}.2f}" if vals[n] is not None else f"{'-':>{widths[n]}}"
            for n in names)
        for c, n, label in pairs:
            other, mine = ref_value(t, n), vals[c]
            w = len(label) + 3
            line += (f"{mine / other:>{w - 1}.2f}x" if other and mine else f"{'-':>{w}}")
        print(line)
    contams = [x["contamination"] for x in log]
    print(f"{a.rounds} rounds interleaved, {a.threads} threads, medians; "
          f"contamination median {100 * statistics.median(contams):.1f}%, "
          f"max {100 * max(contams):.1f}%")
    save(log, {t: v for t, v in rows})


if __name__ == "__main__":
    main()
