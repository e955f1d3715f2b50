// The agent clients people point at cedar, unmodified and headless, against `cedar serve` with the
// embedded default model: Claude Code, Codex CLI, OpenCode, Qwen Code and Cline (pinned in
// package-lock.json; installed by scripts/install-deps.sh), each on every API it offers.
//
// Two tasks per client and route:
//  * a plain question, answered by the model as sampled;
//  * a shell task: the test hook makes cedar answer the first turn with a call of the client's own
//    shell tool (a command that writes a probe file); the client must run it and send the result
//    back, and the later turns are sampled as usual.
// Asserted: the client exits 0, every request it sent was answered 2xx, the probe file was
// written, the tool's output came back in a later request, and that request hit the prefix cache.
// What each client sent (fields, roles, block and item types, tool kinds) is printed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startCedar, startProxy, startSink, sandbox, runClient, baseEnv,
         dsmlAnswer } from './harness.mjs';
import { CLIENTS } from './clients.mjs';

let cedar;
const summary = [];
before(async () => { cedar = await startCedar(['--parallel', '4']); });
after(async () => {
  console.log('\n[ agents ] client | route | task | s | requests | cached tokens after the first | ' +
              'external hosts tried');
  for (const s of summary) console.log(`[ agents ] ${s}`);
  const { code, signal } = await cedar.stop();
  assert.equal(signal, null, cedar.stderr);
  assert.equal(code, 0, cedar.stderr);
});

// The function names a request offers (Chat, Anthropic and Responses spellings, namespaces).
function toolNames(body) {
  const names = [];
  const walk = (tools) => {
    for (const t of tools ?? []) {
      if (t.type === 'namespace') walk(t.tools);
      else names.push(t.function?.name ?? t.name);
    }
  };
  walk(body.tools);
  return names;
}

// Whether the prompt cedar renders for this body opens the reasoning (thinking is on unless the
// body turns it off, as cedar's default is).
function thinkingOn(body) {
  if (body.thinking?.type === 'disabled') return false;
  if (body.reasoning_effort === 'none' || body.reasoning?.effort === 'none') return false;
  const kw = body.chat_template_kwargs ?? {};
  return kw.thinking !== false && kw.enable_thinking !== false;
}

// The text of every tool result a request carries back.
function toolResults(body) {
  const out = [];
  const text = (c) => (typeof c === 'string' ? c : JSON.stringify(c ?? ''));
  for (const m of body.messages ?? []) {
    if (m.role === 'tool') out.push(text(m.content));
    if (Array.isArray(m.content))
      for (const b of m.content) if (b.type === 'tool_result') out.push(text(b.content));
  }
  for (const it of Array.isArray(body.input) ? body.input : [])
    if (/_output$/.test(it.type ?? '')) out.push(text(it.output));
  return out;
}

// The request shapes a client used: fields, roles, content block / item types, tool kinds.
function features(records) {
  const f = new Set();
  for (const r of records) {
    const b = r.body;
    f.add(`${r.method} ${r.path.split('?')[0]}`);
    if (!b || typeof b !== 'object') continue;
    for (const k of Object.keys(b)) f.add(`field:${k}`);
    for (const m of [...(b.messages ?? []), ...(Array.isArray(b.input) ? b.input : [])]) {
      if (m.role) f.add(`role:${m.role}`);
      if (m.type) f.add(`item:${m.type}`);
      if (Array.isArray(m.content)) for (const c of m.content) if (c?.type) f.add(`block:${c.type}`);
    }
    for (const t of b.tools ?? []) {
      f.add(`tool:${t.type ?? '(untyped)'}`);
      for (const k of Object.keys(t)) if (!['type', 'name', 'description', 'function',
        'input_schema', 'parameters', 'tools'].includes(k)) f.add(`tool.${k}`);
    }
    if (b.thinking) f.add(`thinking:${JSON.stringify(b.thinking)}`);
    if (b.reasoning) f.add(`reasoning:${JSON.stringify(b.reasoning)}`);
  }
  return [...f].sort();
}

async function session(client, route, task) {
  const sb = sandbox(`${client.name}-${route}`);
  const probe = `cedar-probe-${process.pid}-${Date.now() % 100000}`;
  const command = `echo ${probe} > probe.txt && cat probe.txt`;
  let injected = false;
  const proxy = await startProxy(cedar.url, (body) => {
    if (task !== 'shell' || injected) return null;
    if (!toolNames(body).includes(client.shell.tool)) return null;
    if (!JSON.stringify(body).includes('probe.txt')) return null;  // the task's own request
    injected = true;
    return dsmlAnswer(thinkingOn(body), client.shell.tool, client.shell.args(command));
  });
  const sink = await startSink();
  try {
    const s = client.setup(sb, proxy.url, route);
    const env = baseEnv(sb.home, sink.url, s.env);
    if (s.auth) {
      const a = await runClient(s.cmd, s.auth, { env, cwd: sb.work, timeoutMs: 60000 });
      assert.equal(a.code, 0, `${client.name} auth: ${a.stdout}\n${a.stderr}`);
    }
    const prompt = task === 'shell'
      ? 'Write the word in the file probe.txt: run the shell command `' + command + '` once.'
      : 'What is the capital of France? Answer in one word.';
    const r = await runClient(s.cmd, s.args(prompt), { env, cwd: sb.work });
    await proxy.settled();
    const log = `${client.name} ${route} ${task}: exit ${r.code} ${r.signal ?? ''}\n` +
                `stdout: ${r.stdout.slice(-3000)}\nstderr: ${r.stderr.slice(-3000)}\n` +
                `requests: ${proxy.records.map((x) => `${x.path} ${x.status}`).join(', ')}`;
    const gen = proxy.records.filter((x) => /messages|responses|completions/.test(x.path) &&
                                            !/count_tokens/.test(x.path));
    const cachedAfterFirst = gen.slice(1).map((x) => x.usage?.cached ?? 'n/a');
    summary.push(`${client.name} | ${route} | ${task} | ${r.seconds.toFixed(1)} | ` +
                 `${proxy.records.length} | ${cachedAfterFirst.join(' ') || '-'} | ` +
                 `${[...new Set(sink.hosts)].join(' ') || 'none'}`);
    summary.push(`${client.name} | ${route} | features: ${features(proxy.records).join(' ')}`);
    assert.equal(r.code, 0, log);
    assert.ok(gen.length > 0, log);
    for (const x of proxy.records) assert.ok(x.status >= 200 && x.status < 300, `${x.path} ${x.status}: ${x.response.slice(0, 500)}\n${log}`);
    if (task !== 'shell') return;
    assert.ok(injected, 'no request offered the shell tool with the task: ' + log);
    const file = path.join(sb.work, 'probe.txt');
    assert.ok(fs.existsSync(file), 'the client did not run its shell tool: ' + log);
    assert.equal(fs.readFileSync(file, 'utf8').trim(), probe);
    const back = gen.findIndex((x) => toolResults(x.body).some((t) => t.includes(probe)));
    assert.ok(back > 0, 'the tool output never came back: ' + log);
    assert.ok(gen[back].usage?.cached > 0,
              `no prefix-cache hit on the turn after the tool: ${JSON.stringify(gen[back].usage)}`);
  } finally {
    await proxy.close();
    await sink.close();
    fs.rmSync(sb.root, { recursive: true, force: true });
  }
}

for (const client of CLIENTS)
  for (const route of client.routes)
    for (const task of ['plain', 'shell'])
      test(`${client.name} over ${route}: ${task}`, { timeout: 300000 },
           () => session(client, route, task));
