// Decode cost of requests that offer tools, on two builds of cedar side by side (not a test): each
// round starts `cedar serve` on the embedded default model with one binary, then the other, sends
// the same six seeded Chat Completions requests with ten agent-style tools (thinking off, so the
// answer and any calls block are under the tool constraint from the first token), and reads from
// the server's request log the decode time (seconds to the last token minus seconds to the first)
// per decoded token. Rounds alternate the binaries so that a machine that slows down or speeds up
// weighs on both. With --no-tools the same requests offer no tools.
//
//   node tools/ab_tool_decode.mjs OLD_BIN NEW_BIN [ROUNDS] [--no-tools]
import { spawn } from 'node:child_process';

const args = process.argv.slice(2).filter((a) => a !== '--no-tools');
const withTools = !process.argv.includes('--no-tools');
const [oldBin, newBin, rounds = '3'] = args;
if (!oldBin || !newBin) {
  console.error('usage: node tools/ab_tool_decode.mjs OLD_BIN NEW_BIN [ROUNDS] [--no-tools]');
  process.exit(2);
}

const TOOLS = ['bash', 'read', 'write', 'edit', 'glob', 'grep', 'webfetch', 'todo', 'task', 'skill']
  .map((n) => ({
    type: 'function',
    function: {
      name: n, description: `the ${n} tool`,
      parameters: { type: 'object', properties: { path: { type: 'string' },
                                                  command: { type: 'string' },
                                                  limit: { type: 'integer' } } },
    },
  }));

async function start(bin) {
  const proc = spawn(bin, ['serve', '--port', '0', '-t', '2', '--no-cache'],
                     { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`${bin} exited with ${code}: ${log}`)));
  });
  return { proc, url: `http://127.0.0.1:${port}`, log: () => log };
}

async function ask(url, seed) {
  const r = await fetch(url + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm', seed, max_tokens: 200, thinking: { type: 'disabled' }, stream: true,
      ...(withTools ? { tools: TOOLS } : {}),
      messages: [{ role: 'user', content: 'Tell me a long story about a lighthouse keeper.' }],
    }),
  });
  await r.text();
}

// "POST ... 200 T s ttft F s prompt P [(cached C)] completion N": decode seconds and tokens.
function decode(log) {
  let seconds = 0, tokens = 0;
  for (const m of log.matchAll(/ 200 ([\d.]+)s ttft ([\d.]+)s prompt \d+(?: \(cached \d+\))? completion (\d+)/g)) {
    seconds += Number(m[1]) - Number(m[2]);
    tokens += Number(m[3]) - 1;
  }
  return { tokens, ms: (1000 * seconds) / tokens };
}

const ms = { old: [], new: [] };
for (let r = 0; r < Number(rounds); r++) {
  for (const [name, bin] of [['old', oldBin], ['new', newBin]]) {
    const srv = await start(bin);
    for (let seed = 1; seed <= 6; seed++) await ask(srv.url, seed);
    const d = decode(srv.log());
    ms[name].push(d.ms);
    console.log(`round ${r} ${name}: ${d.tokens} decoded tokens, ${d.ms.toFixed(3)} ms per token`);
    srv.proc.kill('SIGTERM');
    await new Promise((resolve) => srv.proc.on('exit', resolve));
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(`median ms per decoded token (${withTools ? 'ten tools' : 'no tools'}): ` +
            `old ${median(ms.old).toFixed(3)}, new ${median(ms.new).toFixed(3)}`);
