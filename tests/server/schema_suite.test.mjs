// Structured output against the JSON Schema Test Suite (npm json-schema-test-suite, draft 4) and
// tests/schema_suite/realistic.json (schemas as Pydantic, zod-to-json-schema, MCP servers and
// OpenAI strict mode write them), checked by an independent validator (ajv):
//   soundness: for every schema that compiles, every test instance the suite marks invalid is
//     refused by the matcher (fed as compact JSON text);
//   generation: answers sampled from random logits through the real mask code over the real
//     vocabulary are always prefixes the matcher allows, and every complete one validates.
// cedar_schema_suite (tests/schema_suite/schema_suite.cpp) does the C++ side and prints one JSON
// line per schema; its path is CEDAR_SCHEMA_SUITE (set by CMake), or beside CEDAR_BIN.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv04 from 'ajv-draft-04';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const draft4 = path.join(here, 'node_modules/json-schema-test-suite/tests/draft4');
const realistic = path.join(root, 'tests/schema_suite/realistic.json');
const bin = process.env.CEDAR_SCHEMA_SUITE ??
  path.join(path.dirname(process.env.CEDAR_BIN ?? path.join(root, 'build/cedar')), 'cedar_schema_suite');
// the formats constrained decoding enforces; ajv ignores the others as we do
const FORMATS = ['date', 'time', 'date-time', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid', 'uri'];

function validator(Ajv) {
  const ajv = new Ajv({ strict: false, logger: false, allErrors: false });
  addFormats(ajv, FORMATS);
  return ajv;
}

function run(files, samples = 3, maxTokens = 64) {
  const out = execFileSync(bin, ['suite', ...files, '--samples', String(samples), '--max-tokens',
    String(maxTokens), '--threads', '2'],
    { maxBuffer: 1 << 28, encoding: 'utf8' });
  return out.trim().split('\n').map((l) => JSON.parse(l));
}

function check(rows, docs, ajv, label) {
  let compiled = 0, invalid = 0, validAccepted = 0, valid = 0, samples = 0, complete = 0;
  const refusals = {};
  for (const r of rows) {
    if (!r.compiled) {
      const why = r.error.replace(/^[^:]*: /, '').split(' (')[0].replace(/"[^"]*"/g, 'X').slice(0, 50);
      refusals[why] = (refusals[why] ?? 0) + 1;
      continue;
    }
    compiled++;
    const where = `${r.file}[${r.index}] ${r.description}`;
    for (const t of r.tests) {
      if (t.valid) {
        valid++;
        validAccepted += t.accepted ? 1 : 0;
      } else {
        invalid++;
        assert.ok(!t.accepted, `${where}: the invalid instance "${t.description}" was accepted`);
      }
    }
    let schema = structuredClone(docs[r.file][r.index].schema);
    if (typeof schema === 'object' && schema !== null) delete schema.$schema;
    let validate;
    try {
      validate = ajv.compile(schema);
    } catch (e) {
      continue;  // a schema ajv cannot compile (a remote $ref) validates nothing here
    }
    for (const s of r.samples) {
      samples++;
      assert.ok(s.prefix_ok, `${where}: a sampled answer is no prefix: ${JSON.stringify(s.text)}`);
      if (!s.complete) continue;
      complete++;
      const value = JSON.parse(s.text);
      assert.ok(validate(value),
        `${where}: ${JSON.stringify(s.text)} fails ajv: ${JSON.stringify(validate.errors)}`);
    }
  }
  console.log(`[ info ] ${label}: ${compiled} of ${rows.length} schemas compile; invalid instances ` +
    `refused: all ${invalid}; valid instances accepted: ${validAccepted} of ${valid}; ` +
    `sampled answers: ${samples}, ${complete} complete and valid (ajv)`);
  console.log(`[ info ] ${label} refusals: ${JSON.stringify(refusals)}`);
  return { compiled, validAccepted, valid, samples, complete };
}

function load(files) {
  const docs = {};
  for (const f of files) docs[path.basename(f)] = JSON.parse(fs.readFileSync(f, 'utf8'));
  return docs;
}

test('JSON Schema Test Suite draft 4: sound matcher, answers valid by ajv', () => {
  const files = [
    ...fs.readdirSync(draft4).filter((f) => f.endsWith('.json')).map((f) => path.join(draft4, f)),
    ...fs.readdirSync(path.join(draft4, 'optional')).map((f) => path.join(draft4, 'optional', f)),
  ];
  const c = check(run(files), load(files), validator(Ajv04), 'draft4 suite');
  // what the subset covers today: a drop means a feature broke
  assert.ok(c.compiled >= 65, `only ${c.compiled} schemas compile`);
  assert.ok(c.validAccepted >= 0.9 * c.valid, `only ${c.validAccepted} of ${c.valid} valid accepted`);
  assert.ok(c.complete >= c.samples / 2, `only ${c.complete} of ${c.samples} answers completed`);
});

test('realistic schemas (Pydantic, zod-to-json-schema, MCP, OpenAI strict): sound and valid', () => {
  const rows = run([realistic], 4, 160);
  assert.ok(rows.every((r) => r.compiled), JSON.stringify(rows.filter((r) => !r.compiled)));
  const c = check(rows, load([realistic]), validator(Ajv2020), 'realistic');
  assert.equal(c.validAccepted, c.valid);
  assert.ok(c.complete >= 1);
});
