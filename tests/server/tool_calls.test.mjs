// Tool calls only name offered tools: whenever a request offers tools, the calls block the model
// writes is constrained to them (their names and parameter names; the schema too for strict tools
// and forced calls), and DSML that is not a well-formed call never reaches the visible text. The
// embedded default model calls offered tools readily, which shows it; the test hook forces the
// malformed cases.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, post } from './helpers.mjs';

let srv;
before(async () => { srv = await startServer([], { model: null }); });
after(async () => {
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

const ASK = [{ role: 'user', content: 'List the files, then read the first one.' }];
const MARKER = '｜DSML｜';

// 70 tools, more than a 64-bit set holds, as large MCP setups offer.
const TOOLS = Array.from({ length: 70 }, (_, i) => ({
  type: 'function',
  function: {
    name: `tool_${i}`,
    parameters: { type: 'object', properties: { path: { type: 'string' }, count: { type: 'integer' } } },
  },
}));
const NAMES = new Set(TOOLS.map((t) => t.function.name));

function checkCalls(message, where) {
  for (const c of message.tool_calls ?? []) {
    assert.ok(NAMES.has(c.function.name), `${where}: a call of an undeclared tool ${c.function.name}`);
    const args = JSON.parse(c.function.arguments);
    for (const k of Object.keys(args)) assert.ok(['path', 'count'].includes(k), `${where}: ${k}`);
  }
  for (const text of [message.content ?? '', message.reasoning_content ?? ''])
    assert.ok(!text.includes(MARKER), `${where}: DSML in the visible text: ${text}`);
}

test('sampled answers under tool_choice auto: only offered tools, no DSML in the text', async () => {
  let calls = 0;
  for (let seed = 1; seed <= 12; seed++) {
    const r = await post(srv.url + '/v1/chat/completions', {
      model: 'm', messages: ASK, seed, max_tokens: 96, thinking: { type: 'disabled' }, tools: TOOLS,
    });
    assert.equal(r.status, 200, r.text);
    const m = r.json.choices[0].message;
    checkCalls(m, `seed ${seed}`);
    calls += (m.tool_calls ?? []).length;
  }
  console.log(`[ info ] tool_choice auto: ${calls} calls in 12 sampled answers`);
  assert.ok(calls > 0, 'the default model calls offered tools: the check above saw some');
});

test('sampled answers under tool_choice required, streamed: calls of offered tools', async () => {
  for (let seed = 1; seed <= 4; seed++) {
    const r = await post(srv.url + '/v1/chat/completions', {
      model: 'm', messages: ASK, seed, max_tokens: 96, thinking: { type: 'disabled' }, tools: TOOLS,
      tool_choice: 'required', stream: true,
    });
    assert.equal(r.status, 200, r.text);
    for (const line of r.text.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      const d = JSON.parse(line.slice(6)).choices[0]?.delta ?? {};
      for (const c of d.tool_calls ?? [])
        if (c.function?.name) assert.ok(NAMES.has(c.function.name), c.function.name);
      assert.ok(!(d.content ?? '').includes(MARKER), d.content);
    }
  }
});

test('a tool with more parameters than the grammar holds: prompted only, or a 400 if strict', async () => {
  const wide = { type: 'function', function: { name: 'wide', parameters: { type: 'object',
    properties: Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`p${i}`, { type: 'string' }])) } } };
  const r = await post(srv.url + '/v1/chat/completions', {
    model: 'm', messages: ASK, max_tokens: 4, thinking: { type: 'disabled' }, tools: [wide],
  });
  assert.equal(r.status, 200, r.text);
  assert.match(srv.stderr, /tool calls are not constrained for requests with these tools/);
  const s = await post(srv.url + '/v1/chat/completions', {
    model: 'm', messages: ASK, max_tokens: 4, thinking: { type: 'disabled' },
    tools: [{ ...wide, function: { ...wide.function, strict: true } }],
  });
  assert.equal(s.status, 400, s.text);
  assert.match(s.json.error.message, /at most 64 parameters/);
});

test('malformed DSML, a stray tag and a block without tools never reach the text', async () => {
  const cases = [
    // a block broken mid-call: the call so far is kept (its arguments valid JSON), the rest of
    // the block dropped
    { tools: TOOLS, out: 'Done.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="tool_1">\n<｜DSML｜ ' +
      'parameter name="path" string="maybe">x</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>',
      content: 'Done.', calls: 1 },
    // a stray parameter tag in the answer
    { tools: TOOLS, out: 'Here </｜DSML｜ parameter> it is', content: 'Here ', calls: 0 },
    // no tools offered: the block is not parsed and not shown
    { tools: undefined, out: 'Plain.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="rm">\n\n' +
      '</｜DSML｜ invoke>\n</｜DSML｜ calls>', content: 'Plain.', calls: 0 },
  ];
  for (const c of cases) {
    for (const stream of [false, true]) {
      const r = await post(srv.url + '/v1/chat/completions', {
        model: 'm', messages: ASK, thinking: { type: 'disabled' }, tools: c.tools, stream,
        cedar_test_output: c.out,
      });
      assert.equal(r.status, 200, r.text);
      let content = '';
      let calls = 0;
      if (stream) {
        for (const line of r.text.split('\n')) {
          if (!line.startsWith('data: {')) continue;
          const d = JSON.parse(line.slice(6)).choices[0]?.delta ?? {};
          content += d.content ?? '';
          calls += (d.tool_calls ?? []).filter((t) => t.function?.name).length;
        }
      } else {
        content = r.json.choices[0].message.content ?? '';
        calls = (r.json.choices[0].message.tool_calls ?? []).length;
      }
      assert.equal(content, c.content, `${c.out} (stream ${stream})`);
      assert.equal(calls, c.calls);
    }
  }
});
