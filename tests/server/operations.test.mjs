// What an operator sees: --version, the start-up banner, one log line per request (text and
// JSON), warnings for ignored fields, latency histograms in /metrics; and the spellings other
// servers accept (developer role, chat_template_kwargs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { BIN, startServer, post } from './helpers.mjs';

let srv;
before(async () => { srv = await startServer(['--log-format', 'json']); });
after(async () => {
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

const OK = { model: 'm', messages: [{ role: 'user', content: 'hi' }], cedar_test_output: 'ok' };

function jsonLines(text) {
  return text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
}

test('--version names the version and commit', () => {
  const out = execFileSync(BIN, ['--version']).toString();
  assert.match(out, /^cedar \d+\.\d+\.\d+ \(\S+\)\n$/);
});

test('one JSON log line per request, with tokens and timings for generations', async () => {
  const r = await post(srv.url + '/v1/chat/completions', OK);
  assert.equal(r.status, 200);
  await fetch(srv.url + '/health');
  await post(srv.url + '/v1/chat/completions', { ...OK, temperature: 9 });  // a 400
  await new Promise((res) => setTimeout(res, 200));
  const lines = jsonLines(srv.stderr).filter((j) => j.event === 'request');
  const gen = lines.find((j) => j.path === '/v1/chat/completions' && j.status === 200);
  assert.ok(gen, srv.stderr);
  assert.equal(gen.method, 'POST');
  assert.equal(gen.finish, 'stop');
  assert.ok(gen.prompt_tokens > 0 && gen.completion_tokens > 0, JSON.stringify(gen));
  assert.ok(gen.seconds >= gen.ttft_seconds && gen.ttft_seconds >= 0, JSON.stringify(gen));
  assert.ok(lines.some((j) => j.path === '/health' && j.status === 200));
  assert.ok(lines.some((j) => j.path === '/v1/chat/completions' && j.status === 400));
});

test('with --log-format json the start-up lines are JSON log lines on the same stream', () => {
  const lines = srv.stderr.split('\n').filter((l) => l.length > 0);
  for (const l of lines) assert.doesNotThrow(() => JSON.parse(l), l);  // nothing but JSON
  const msgs = jsonLines(srv.stderr).map((j) => j.message ?? '');
  assert.ok(msgs.some((m) => /^cedar serve: bound http:/.test(m)), srv.stderr);
  assert.ok(msgs.some((m) => /^cedar serve: listening on http:/.test(m)), srv.stderr);
  assert.ok(jsonLines(srv.stderr).some((j) => j.level === 'warning' && /test hooks enabled/.test(j.message)));
});

test('/metrics has latency and time-to-first-token histograms', async () => {
  await post(srv.url + '/v1/chat/completions', { ...OK, stream: true });
  const m = await (await fetch(srv.url + '/metrics')).text();
  assert.match(m, /# TYPE cedar_request_duration_seconds histogram/);
  const count = Number(m.match(/cedar_request_duration_seconds_count (\d+)/)[1]);
  assert.ok(count >= 2, m);
  assert.match(m, /cedar_request_duration_seconds_bucket\{le="\+Inf"\} \d+/);
  assert.ok(Number(m.match(/cedar_time_to_first_token_seconds_count (\d+)/)[1]) >= 2, m);
});

test('developer role, reasoning alias and chat_template_kwargs are understood', async () => {
  const r = await post(srv.url + '/v1/chat/completions', {
    ...OK,
    chat_template_kwargs: { thinking: false },
    messages: [{ role: 'developer', content: 'be brief' },
               { role: 'user', content: 'hi' },
               { role: 'assistant', content: 'yo', reasoning: 'greeted' },
               { role: 'user', content: 'again' }],
  });
  assert.equal(r.status, 200, r.text);
  // thinking off: the forced text is the answer, not reasoning
  assert.equal(r.json.choices[0].message.content, 'ok');
  assert.equal(r.json.choices[0].message.reasoning_content, undefined);
});

test('an ignored field is warned about once', async () => {
  for (let i = 0; i < 3; i++)
    assert.equal((await post(srv.url + '/v1/chat/completions', { ...OK, logit_bias: { 5: 1 } })).status, 200);
  await new Promise((res) => setTimeout(res, 200));
  const warns = jsonLines(srv.stderr).filter((j) => j.level === 'warning' && /logit_bias/.test(j.message));
  assert.equal(warns.length, 1, srv.stderr);
});

test('CORS is off by default and opt-in with --cors', async () => {
  const r = await fetch(srv.url + '/v1/models', { headers: { origin: 'http://evil.example' } });
  assert.equal(r.headers.get('access-control-allow-origin'), null);
  const c = await startServer(['--cors', 'http://app.example']);
  try {
    const pre = await fetch(c.url + '/v1/chat/completions', {
      method: 'OPTIONS',
      headers: { origin: 'http://app.example', 'access-control-request-method': 'POST',
                 'access-control-request-headers': 'content-type, authorization' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), 'http://app.example');
    assert.match(pre.headers.get('access-control-allow-headers'), /Authorization/);
    const r2 = await post(c.url + '/v1/chat/completions', OK, { origin: 'http://app.example' });
    assert.equal(r2.status, 200);
    assert.equal(r2.headers.get('access-control-allow-origin'), 'http://app.example');
  } finally {
    await c.stop();
  }
});

test('streamed and non-streamed replies agree when max_tokens ends inside the reasoning', async () => {
  for (const max_tokens of [1, 2, 3, 5]) {
    const body = { ...OK, max_tokens, cedar_test_output: 'thinking hard here</think>the answer' };
    const a = (await post(srv.url + '/v1/chat/completions', body)).json;
    const t = (await post(srv.url + '/v1/chat/completions', { ...body, stream: true })).text;
    let reasoning = '', content = '', finish = null;
    for (const line of t.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      const c = JSON.parse(line.slice(6)).choices[0];
      if (!c) continue;
      reasoning += c.delta?.reasoning_content ?? '';
      content += c.delta?.content ?? '';
      finish = c.finish_reason ?? finish;
    }
    const m = a.choices[0].message;
    assert.deepEqual([reasoning, content, finish], [m.reasoning_content, m.content, a.choices[0].finish_reason],
                     'max_tokens ' + max_tokens);
  }
});
