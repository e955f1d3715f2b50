#!/usr/bin/python3
"""Writes the tokenizer parity corpus into OUTDIR (deterministic; nothing is committed).

    /usr/bin/python3 tests/text/make_corpus.py OUTDIR

English and Chinese prose come from Debian packages (bible-kjv, fortunes, fortunes-zh); the rest is
this repository's source text and generated text: JSON, digit runs, whitespace/CRLF edge cases,
emoji/ZWJ, combining marks, astral-plane characters, many scripts, and seeded random Unicode.

Two deliberate restrictions keep the comparison with the JS reference about the tokenizer and not
about the regex engines (see docs/TOKENIZER.md):
  * random characters are drawn from those assigned in Unicode 14.0 (Debian's Python unicodedata;
    the same version as Debian's PCRE2 10.42): node's regex tables are Unicode 17, and a character
    assigned since 14.0 is "unassigned" for cedar but a letter for node.
  * U+0085 and U+FEFF appear only in files named onigws_*: ECMAScript's \\s includes U+FEFF and
    excludes U+0085, the opposite of Oniguruma (Hugging Face tokenizers) and of cedar. js_parity.mjs
    compares those files against the JS tokenizer with \\s spelled out as Oniguruma's set.
"""
import json
import os
import random
import subprocess
import sys
import unicodedata

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FORTUNE_DIR = "/usr/share/games/fortunes"
ZH_FORTUNES = ("chinese", "tang300", "song100")
DIVERGENT_WS = {0x85, 0xFEFF}


def fail(msg):
    sys.stderr.write(f"make_corpus: error: {msg}\n")
    sys.exit(1)


def write(outdir, name, text):
    with open(os.path.join(outdir, name), "w", encoding="utf-8", newline="") as f:
        f.write(text)


def strip_divergent(text):
    return "".join(c for c in text if ord(c) not in DIVERGENT_WS)


def bible():
    try:
        out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        fail(f"cannot run `bible` ({e}); install the Debian packages bible-kjv bible-kjv-text")
    return out.stdout.decode("utf-8")


def fortunes(names, limit_bytes):
    """The fortune files in order, cut at a line end near limit_bytes (the JS reference tokenizer
    runs at ~0.1 MB/s, so the prose files are kept to about 1 MB each)."""
    parts, size = [], 0
    for name in names:
        path = os.path.join(FORTUNE_DIR, name)
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        parts.append(text)
        size += len(text.encode("utf-8"))
        if size >= limit_bytes:
            break
    text = "".join(parts)
    data = text.encode("utf-8")
    if len(data) > limit_bytes:
        cut = data.rfind(b"\n", 0, limit_bytes) + 1
        text = data[:cut].decode("utf-8")
    return text


def english_fortune_names():
    if not os.path.isdir(FORTUNE_DIR):
        fail(f"{FORTUNE_DIR} is missing; install the Debian packages fortunes fortunes-zh")
    names = []
    for name in sorted(os.listdir(FORTUNE_DIR)):
        path = os.path.join(FORTUNE_DIR, name)
        if "." in name or name in ZH_FORTUNES or os.path.islink(path) or not os.path.isfile(path):
            continue
        names.append(name)
    if not names:
        fail("no English fortune files found; install the Debian package fortunes")
    for zh in ZH_FORTUNES:
        if not os.path.isfile(os.path.join(FORTUNE_DIR, zh)):
            fail(f"{FORTUNE_DIR}/{zh} is missing; install the Debian package fortunes-zh")
    return names


def source_code():
    exts = (".cpp", ".h", ".py", ".mjs", ".sh", ".md", ".txt", ".json", ".cmake")
    parts = []
    for top in ("src", "tests", "tools", "scripts", "docs"):
        for root, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(d for d in dirs if d != "node_modules" and not d.startswith("build"))
            for name in sorted(files):
                if not name.endswith(exts) or name == "package-lock.json":
                    continue
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    data = f.read()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                parts.append(f"// ===== {os.path.relpath(path, REPO)} =====\n{text}")
    for name in ("CMakeLists.txt", "README.md"):
        path = os.path.join(REPO, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                parts.append(f"# ===== {name} =====\n{f.read()}")
    return strip_divergent("".join(parts))


def json_text(rng):
    with open(os.path.join(REPO, "tools/tokenizer/package-lock.json"), encoding="utf-8") as f:
        parts = [f.read()]
    words = ["alpha", "Beta", "γάμμα", "дельта", "エプシロン", "제타", "η", "θήτα", "😀", "a\"b",
             "back\\slash", "tab\there", "new\nline", "", " ", "null", "true", "1e10"]

    def value(depth):
        r = rng.random()
        if depth > 3 or r < 0.3:
            k = rng.randrange(6)
            if k == 0:
                return rng.randint(-10**12, 10**12)
            if k == 1:
                return round(rng.uniform(-1e6, 1e6), rng.randrange(8))
            if k == 2:
                return rng.choice([True, False, None])
            return rng.choice(words) + str(rng.randrange(100))
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randrange(5))]
        return {rng.choice(words) + str(i): value(depth + 1) for i in range(rng.randrange(5))}

    for i in range(300):
        doc = value(0)
        parts.append(json.dumps(doc, ensure_ascii=bool(i % 2), indent=(None, 2, 4)[i % 3]))
        parts.append("\n")
    return "".join(parts)


def digits(rng):
    lines = []
    for n in range(1, 41):
        lines.append("".join(str(rng.randrange(10)) for _ in range(n)))
        lines.append("x" + "7" * n + "y")
        lines.append(" " + "0" * n)
    for _ in range(400):
        k = rng.randrange(9)
        v = rng.randrange(10**rng.randrange(1, 16))
        if k == 0:
            lines.append(f"{v:,}")
        elif k == 1:
            lines.append(f"{v / 1000:.{rng.randrange(1, 9)}f}")
        elif k == 2:
            lines.append(f"-{v}e-{rng.randrange(40)}")
        elif k == 3:
            lines.append(f"0x{v:x} 0b{v % 4096:b} 0o{v:o}")
        elif k == 4:
            lines.append(f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-"
                         f"{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}")
        elif k == 5:
            lines.append(f"+1 ({rng.randrange(100, 999)}) {rng.randrange(100, 999)}-"
                         f"{rng.randrange(1000, 9999)}")
        elif k == 6:
            lines.append(f"{rng.randrange(2000, 2030)}年{rng.randrange(1, 13)}月{rng.randrange(1, 31)}日")
        elif k == 7:
            lines.append(f"v{rng.randrange(10)}.{rng.randrange(100)}.{rng.randrange(1000)}-rc{v % 10}")
        else:
            lines.append(f"{v}%{rng.randrange(100)}$€{rng.randrange(10**6)}")
    # Other Nd digit sets, No and Nl numbers: all \p{N}.
    sets = ["٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹", "०१२३४५६७८९", "০১২৩৪৫৬৭৮৯", "๐๑๒๓๔๕๖๗๘๙",
            "０１２３４５６７８９", "²³¹¼½¾⁰⁴⁵", "①②③④⑤⑥⑦⑧⑨⑩", "ⅠⅡⅢⅣⅤⅥⅦⅧⅨⅩⅪⅫ", "〇一二三四五六七八九十",
            "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", "𞥐𞥑𞥒𞥓𞥔", "𐒠𐒡𐒢𐒣"]
    for s in sets:
        for n in range(1, 9):
            lines.append("".join(rng.choice(s) for _ in range(n)) + rng.choice(["", " ", "a", "。", "7"]))
    return "\n".join(lines) + "\n"


def whitespace(rng):
    ws = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\u00a0", "\u3000",
          "\u2003", "\u2009", "\u202f", "\u2028", "\u2029", "\u000b", "\u000c", "\u1680", " \n",
          "\n ", " \t\n", "\u200b"]
    atoms = ["word", "Word", "a", "I", "x1", "...", "!", "?!", "(", ")", "{}", "中文", "日本語", "한국어",
             "é", "--", "#", "'s", "'ll", "\"q\"", "$", "…", "—", "😀", "١٢٣", "42", "3.14"]
    parts = []
    for _ in range(6000):
        parts.append(rng.choice(ws) if rng.random() < 0.55 else rng.choice(atoms))
    fixed = [
        "trailing spaces   \nline\r\nCRLF line\r\n\r\n\r\nmore\n",
        "    indented\n\tTabbed\n \t mixed \t \n",
        "   leading", "end with spaces    ", "\n\n\nstart newlines", "only\r\rcarriage\r",
        " ", "  ", "\n", "\r\n", "\t", " \n \n ", "a \n b", "a  \r\n  b", "x\u00a0\u00a0y",
    ]
    return "".join(parts) + "\n" + "\u2029".join(fixed)


def emoji(rng):
    seqs = [
        "👨\u200d👩\u200d👧\u200d👦", "👩🏽\u200d💻", "🏳️\u200d🌈", "🏴\u200d☠️", "👁️\u200d🗨️",
        "🧑🏿\u200d🤝\u200d🧑🏻", "❤️\u200d🔥", "1️⃣", "#️⃣", "*️⃣", "☺︎", "☺️", "🇫🇷", "🇯🇵", "🇺🇸🇨🇦",
        "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f", "👍🏻👍🏼👍🏽👍🏾👍🏿",
        "🤷\u200d♀️", "🧜🏾\u200d♂️", "✌🏼", "©️", "™", "🫠🫡🫶", "🥲", "\u200d", "a\u200db",
    ]
    base = list(range(0x1F600, 0x1F650)) + list(range(0x1F300, 0x1F5FF)) + list(range(0x1F900, 0x1F9FF))
    parts = []
    for _ in range(4000):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(seqs))
        elif r < 0.75:
            c = chr(rng.choice(base))
            if unicodedata.category(c) == "Cn":
                continue
            parts.append(c + (chr(rng.randrange(0x1F3FB, 0x1F400)) if rng.random() < 0.2 else ""))
        else:
            parts.append(rng.choice([" ", "", "\n", "ok ", " hello ", "!", "。", "x"]))
    return "".join(parts)


def combining(rng):
    fixed = [
        "e\u0301 cafe\u0301 café naïve nai\u0308ve Å A\u030a ǅ ǆ Ǆ", "Z\u0351\u0336a\u0353l\u0316g\u0314o",
        "שָׁלוֹם עוֹלָם", "مُحَمَّد السَّلَامُ عَلَيْكُمْ", "नमस्ते दुनिया क्षत्रिय", "สวัสดีครับ ภาษาไทย",
        "Tiếng Việt có dấu", "Tie\u0302\u0301ng Vie\u0323\u0302t", "ᄒ\u1161\u11ab국어", "ﬁﬂ ﬀ ㎏ ㍻ ℃ Ⅻ",
        "\u0301 leading mark", " \u0301 space then mark", "1\u0301 digit mark", "!\u0301 punct mark",
        "中\u0301文", "ı̇ İstanbul ß ẞ ς Σ", "க்ஷ ழ்", "ཀྵ ༀ", "ᬅᬓ᭄ᬱᬭ", "\u20dd\u20e3 enclosing",
    ]
    marks = [c for c in range(0x300, 0x370)] + [0x20D0, 0x20D1, 0x20DD, 0x20E3, 0x0903, 0x093E,
                                                 0x0BCD, 0x1AB0, 0x1DC0, 0xFE20, 0x0488, 0x0489]
    bases = "aeiouyAEIOUnNcC 1.!中ア한аб"
    parts = fixed * 3
    for _ in range(3000):
        s = rng.choice(bases) + "".join(chr(rng.choice(marks)) for _ in range(rng.randrange(0, 6)))
        parts.append(s + (" " if rng.random() < 0.3 else ""))
    return "\n".join(fixed) + "\n" + "".join(parts)


def astral(rng):
    fixed = ["𐌰𐌱𐌲 𐌳𐌴", "𝐀𝐁𝐂 𝒜𝒷𝒸 𝔸𝕓𝕔", "𠀀𠀁𠀂𪚥 𫝀", "𒀀𒀁𒀂", "𝄞𝄢 𝅘𝅥𝅮", "𐐷𐑌 𐓏𐓘", "𞤀𞤁 𞥐𞥑",
             "𓀀𓀁𓂀", "🀄🃏", "𝟘𝟙𝟚 𝟬𝟭", "𐀀𐀁 𐂀", "\U000F0000\U0010FFFD private", "😀x😀 😀"]
    ranges = [(0x10000, 0x1007F), (0x10330, 0x1034A), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF),
              (0x12000, 0x1236F), (0x1D100, 0x1D1E8), (0x1E900, 0x1E95F), (0x13000, 0x1342E),
              (0x1F000, 0x1F0FF), (0x10400, 0x1044F), (0x1F300, 0x1FAFF)]
    parts = fixed * 2
    for _ in range(5000):
        lo, hi = rng.choice(ranges)
        c = chr(rng.randint(lo, hi))
        if unicodedata.category(c) == "Cn":
            continue
        parts.append(c + rng.choice(["", "", "", " ", "1", "a", ".", "\n"]))
    return "".join(parts)


MULTILINGUAL = """\
The quick brown fox jumps over the lazy dog. Don't panic — it's only a test, isn't it?
Съешь же ещё этих мягких французских булок, да выпей чаю.
Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.
Příliš žluťoučký kůň úpěl ďábelské ódy.
Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.
Portez ce vieux whisky au juge blond qui fume ; « Voilà ! »
El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro.
いろはにほへと ちりぬるを わかよたれそ つねならむ。カタカナとひらがなと漢字。
다람쥐 헌 쳇바퀴에 타고파. 한국어 문장입니다.
我能吞下玻璃而不伤身体。人工智能正在改变世界，对吧？
نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.
עטלף אבק נס דרך מזגן שהתפוצץ כי חם.
ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।
เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน
Pchnąć w tę łódź jeża lub ośm skrzyń fig.
Árvíztűrő tükörfúrógép. Kæmi ný öxi hér ykist þjófum nú bæði víl og ádrepa.
Fahrenheit 451 — 3×4=12; π≈3.14159; ∑ᵢ xᵢ² ≤ ∞; ∀x∈ℝ: x²≥0 → ✓
“Smart quotes” ‘single’ «guillemets» „low“ — en–dash … ellipsis • bullet
"""


def random_words(rng):
    pools = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
             "αβγδεζηθικλμνξοπρστυφχψω", "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
             "あいうえおかきくけこさしすせそたちつてと", "アイウエオカキクケコサシスセソ", "가나다라마바사아자차카타파하",
             "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "אבגדהוזחטיכלמנסעפצקרשת", "कखगघङचछजझञटठडढणतथदधन",
             "0123456789", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]
    seps = [" ", " ", " ", "", "\n", ", ", ". ", "\t", "  ", "\r\n", "'", "-", "_", "/"]
    parts = []
    for _ in range(30000):
        pool = rng.choice(pools)
        parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 9))))
        parts.append(rng.choice(seps))
    return "".join(parts)


def assigned_code_points():
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or cp in DIVERGENT_WS:
            continue
        if unicodedata.category(chr(cp)) != "Cn":
            out.append(cp)
    return out


def random_unicode(rng, assigned, n, bmp_bias, ascii_bias):
    bmp = [c for c in assigned if c < 0x10000]
    chars = []
    for _ in range(n):
        r = rng.random()
        if r < ascii_bias:
            chars.append(chr(rng.randrange(0x20, 0x7F)) if rng.random() < 0.9 else rng.choice(" \n\t\r"))
        elif r < ascii_bias + bmp_bias:
            chars.append(chr(rng.choice(bmp)))
        else:
            chars.append(chr(rng.choice(assigned)))
    return "".join(chars)


def onig_whitespace(rng):
    atoms = ["\u0085", "\ufeff", " ", "  ", "\n", "\r\n", "\t", "a", "word", "!", "中", "1", "\u00a0"]
    fixed = ["a \u0085 b", " \u0085x", "\u0085\u0085", "x\u0085\u0085 y", "\ufeffBOM start",
             "c\ufeffd  \ufeff", "  \ufeff\ufeff  x", "end\u0085", "\ufeff"]
    return "\n".join(fixed) + "".join(rng.choice(atoms) for _ in range(5000))


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: make_corpus.py OUTDIR\n")
        sys.exit(2)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    rng = random.Random(20240531)
    english = english_fortune_names()
    write(outdir, "kjv_bible.txt", bible())
    write(outdir, "fortunes_en.txt", strip_divergent(fortunes(english, 1 << 20)))
    zh_names = ("tang300", "song100", "chinese")  # the small poetry files first, then prose
    write(outdir, "fortunes_zh.txt", strip_divergent(fortunes(zh_names, 1 << 20)))
    write(outdir, "source_code.txt", source_code())
    write(outdir, "json.txt", strip_divergent(json_text(rng)))
    write(outdir, "digits.txt", digits(rng))
    write(outdir, "whitespace_crlf.txt", whitespace(rng))
    write(outdir, "emoji_zwj.txt", emoji(rng))
    write(outdir, "combining_marks.txt", combining(rng))
    write(outdir, "astral.txt", astral(rng))
    write(outdir, "multilingual.txt", MULTILINGUAL * 20)
    write(outdir, "random_words.txt", random_words(rng))
    assigned = assigned_code_points()
    write(outdir, "random_unicode_uniform.txt", random_unicode(rng, assigned, 60000, 0.0, 0.0))
    write(outdir, "random_unicode_bmp.txt", random_unicode(rng, assigned, 60000, 0.9, 0.0))
    write(outdir, "random_unicode_mixed.txt", random_unicode(rng, assigned, 120000, 0.3, 0.5))
    write(outdir, "random_unicode_sparse.txt", random_unicode(rng, assigned, 120000, 0.05, 0.9))
    write(outdir, "onigws_nel_bom.txt", onig_whitespace(rng))


if __name__ == "__main__":
    main()
