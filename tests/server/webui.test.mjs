// The web chat page at / in a real headless Chromium (Debian's chromium, driven by
// puppeteer-core over the DevTools protocol): answers stream with their reasoning live and then
// folded; markdown renders (headings, lists, tables, highlighted code with a copy button) while
// raw HTML from the model stays text; Stop ends a generation on the server; an error in the
// middle of a stream shows and leaves the answer marked incomplete; conversations survive a
// reload; images go out as image_url data URLs on a model with vision; a server with --api-key
// names its model once the key is typed. A screenshot per scenario goes to $CEDAR_SCREENSHOTS
// (default: <tmp>/cedar-webui-shots); the paths are printed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { startServer } from './helpers.mjs';

const CHROMIUM = process.env.CEDAR_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.CEDAR_SCREENSHOTS ?? path.join(os.tmpdir(), 'cedar-webui-shots');
const here = path.dirname(fileURLToPath(import.meta.url));
const PNG_PATH = path.join(here, '..', 'fuzz', 'corpus', 'image', 'rgb.png');
const MODEL = 'deepseek-v4-flash';

let srv, browser, page;
// What the page's next chat requests get: `force` adds cedar_test_output to the body, `respond`
// answers in the server's place (an SSE body), `seen` collects the bodies the page sent.
const intercept = { force: null, respond: null, seen: [] };

before(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs it)`);
  fs.mkdirSync(SHOTS, { recursive: true });
  srv = await startServer(['--parallel', '1']);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  page = await newPage();
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    if (!req.url().endsWith('/v1/chat/completions') || req.method() !== 'POST') return req.continue();
    const body = JSON.parse(req.postData());
    intercept.seen.push(body);
    if (intercept.respond) {
      return req.respond({ status: 200, contentType: 'text/event-stream', body: intercept.respond });
    }
    if (intercept.force !== null) body.cedar_test_output = intercept.force;
    return req.continue({ postData: JSON.stringify(body) });
  });
});
after(async () => {
  await browser?.close();
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

async function newPage() {
  const p = await browser.newPage();
  await p.setViewport({ width: 1280, height: 860 });
  p.on('pageerror', (e) => { throw e; });
  return p;
}

async function shot(name, p = page) {
  const file = path.join(SHOTS, `webui-${name}.png`);
  await p.screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}

async function setField(id, value) {
  await page.$eval('#' + id, (e, v) => { e.value = v; }, value);
}

// Types a message, sends it with Enter and waits for its answer to finish; returns the index
// of the answer's bubble.
async function sendMessage(text, { wait = true, p = page } = {}) {
  const n = await p.$$eval('.msg.assistant', (els) => els.length);
  await p.type('#input', text);
  await p.keyboard.press('Enter');
  await p.waitForFunction((k) => document.querySelectorAll('.msg.assistant').length > k, {}, n);
  if (wait) {
    await p.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k].dataset.done,
                            { timeout: 60000 }, n);
  }
  return n;
}

const answerOf = (i) => page.$$eval('.msg.assistant', (els, k) => {
  const m = els[k];
  const d = m.querySelector('details');
  return { reasoning: d.querySelector('.reasoning-text').textContent, open: d.open, hidden: d.hidden,
           summary: d.querySelector('summary').textContent,
           answer: m.querySelector('.answer').textContent,
           incomplete: m.classList.contains('incomplete'),
           stats: m.querySelector('.stats')?.textContent ?? '',
           error: m.querySelector('.error')?.textContent };
}, i);

const storedChats = () => page.evaluate(() => JSON.parse(localStorage.getItem('cedar-chats')));

test('the page loads from the binary and names the model', async () => {
  const res = await page.goto(srv.url + '/');
  assert.equal(res.status(), 200);
  assert.equal(await page.title(), 'cedar');
  await page.waitForFunction(() => document.getElementById('model').textContent.length > 0);
  assert.equal(await page.$eval('#model', (e) => e.textContent), MODEL);
  await shot('empty');
});

test('a message streams an answer; the reasoning is shown folded', async () => {
  await setField('max_tokens', '12');
  const i = await sendMessage('Hello there');
  const got = await answerOf(i);
  assert.equal(got.error, undefined);
  // thinking is on by default: random weights think first, so the 12 tokens are reasoning
  assert.ok(got.reasoning.length > 0, JSON.stringify(got));
  assert.equal(got.hidden, false);
  assert.equal(got.open, false, 'reasoning is folded');
  assert.match(got.summary, /^reasoning · \d+ tokens$/);
  assert.match(got.stats, /finish: length, 12 tokens, [\d.]+ tokens\/s, cut off inside the reasoning: raise max tokens/);
  assert.equal(await page.$eval('#send', (b) => b.disabled), false);
});

test('markdown renders with highlighted code and a copy button; raw HTML stays text', async () => {
  await setField('max_tokens', '');
  intercept.force = 'Let me think.</think># Title\n\nSome **bold** text.\n\n- a\n- b\n\n' +
    '| x | y |\n|---|---|\n| 1 | 2 |\n\n```python\nprint(1)\n```\n\n' +
    '<script>window.pwned = 1</script>\n\nan <img src=x onerror="window.pwned = 2"> image ' +
    'and [a link](javascript:window.pwned=3)';
  let i;
  try { i = await sendMessage('Show me markdown'); } finally { intercept.force = null; }
  const got = await answerOf(i);
  assert.equal(got.error, undefined);
  assert.equal(got.reasoning, 'Let me think.');
  assert.equal(got.open, false);
  const dom = await page.$$eval('.msg.assistant', (els, k) => {
    const a = els[k].querySelector('.answer');
    return {
      h1: a.querySelector('h1')?.textContent,
      li: [...a.querySelectorAll('ul > li')].map((e) => e.textContent),
      strong: a.querySelector('p strong')?.textContent,
      cells: [...a.querySelectorAll('table td')].map((e) => e.textContent),
      code: a.querySelector('pre > code')?.textContent,
      spans: [...a.querySelectorAll('pre > code span[class^="hljs-"]')].map((e) => e.className),
      copy: a.querySelectorAll('pre button.copy').length,
      scripts: a.querySelectorAll('script, img, iframe').length,
      onerror: a.querySelectorAll('[onerror]').length,
      hrefs: [...a.querySelectorAll('a')].map((e) => e.getAttribute('href')),
      text: a.textContent,
    };
  }, i);
  assert.equal(dom.h1, 'Title');
  assert.deepEqual(dom.li, ['a', 'b']);
  assert.equal(dom.strong, 'bold');
  assert.deepEqual(dom.cells, ['1', '2']);
  assert.equal(dom.code, 'print(1)');
  assert.ok(dom.spans.includes('hljs-built_in') && dom.spans.includes('hljs-number'), dom.spans.join());
  assert.equal(dom.copy, 1);
  assert.equal(dom.scripts, 0);
  assert.equal(dom.onerror, 0);
  assert.match(dom.text, /<script>window\.pwned = 1<\/script>/);
  assert.match(dom.text, /<img src=x onerror=/);
  assert.deepEqual(dom.hrefs, [null], 'a javascript: link loses its href');
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  // the copy button puts the code on the clipboard
  await browser.defaultBrowserContext().overridePermissions(srv.url, ['clipboard-read', 'clipboard-write',
                                                                     'clipboard-sanitized-write']);
  await page.$$eval('.msg.assistant', (els, k) => els[k].querySelector('pre button.copy').click(), i);
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k]
                               .querySelector('pre button.copy').textContent === 'Copied', {}, i);
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'print(1)');
  assert.match(got.stats, /finish: stop, \d+ tokens, [\d.]+ tokens\/s$/);
  await shot('markdown');
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
  await shot('markdown-dark');
  await page.emulateMediaFeatures([]);
});

test('thinking off and the settings go into the request; a second turn carries the history', async () => {
  await page.click('#thinking');
  await setField('max_tokens', '6');
  await page.type('#system', 'Be brief.');
  await page.type('#temperature', '0.5');
  await page.type('#top_p', '0.9');
  intercept.seen = [];
  const i = await sendMessage('And again');
  const body = intercept.seen.at(-1);
  assert.deepEqual(body.thinking, { type: 'disabled' });
  assert.equal(body.reasoning_effort, undefined);
  assert.equal(body.temperature, 0.5);
  assert.equal(body.top_p, 0.9);
  assert.equal(body.max_tokens, 6);
  assert.equal(body.stream, true);
  assert.deepEqual(body.messages.map((m) => m.role),
                   ['system', 'user', 'assistant', 'user', 'assistant', 'user']);
  assert.equal(body.messages[0].content, 'Be brief.');
  assert.equal(body.messages.at(-1).content, 'And again');
  const got = await answerOf(i);
  assert.ok(got.answer.length > 0);
  assert.equal(got.hidden, true, 'no reasoning without thinking');
  assert.equal(await page.$$eval('.msg.user', (els) => els.length), 3);
  // thinking on with an effort
  await page.click('#thinking');
  await page.select('#effort', 'low');
  await page.$eval('#system', (e) => { e.value = ''; });
  await setField('temperature', '');
  await setField('top_p', '');
  await setField('max_tokens', '2');
  intercept.seen = [];
  await sendMessage('Think a little');
  assert.deepEqual(intercept.seen.at(-1).thinking, { type: 'enabled' });
  assert.equal(intercept.seen.at(-1).reasoning_effort, 'low');
  assert.equal(intercept.seen.at(-1).messages[0].role, 'user');
  await page.select('#effort', '');
});

test('the reasoning streams live; Stop aborts the generation and frees the server slot', async () => {
  await setField('max_tokens', '100000');
  const i = await sendMessage('Tell me everything', { wait: false });
  await page.waitForFunction(() => !document.getElementById('stop').disabled);
  // while it thinks: the block is open and counts the tokens
  await page.waitForFunction((k) => {
    const d = document.querySelectorAll('.msg.assistant')[k].querySelector('details');
    return !d.hidden && d.open && /^thinking… [1-9]\d* tokens$/.test(d.querySelector('summary').textContent);
  }, { timeout: 60000 }, i);
  await shot('thinking-live');
  // it follows the new text while the reader is at the bottom, and stays put once they scroll up
  const gap = () => page.$eval('#log', (l) => l.scrollHeight - l.scrollTop - l.clientHeight);
  assert.ok(await page.$eval('#log', (l) => l.scrollHeight > l.clientHeight + 200), 'the log scrolls');
  assert.ok(await gap() < 40, 'at the bottom while streaming');
  await page.$eval('#log', (l) => { l.scrollTop = 0; });
  await page.waitForFunction(() => document.getElementById('log').scrollTop === 0);
  const grown = async () => page.$$eval('.msg.assistant', (els, k) => els[k].textContent.length, i);
  const length = await grown();
  await page.waitForFunction((k, n) => document.querySelectorAll('.msg.assistant')[k].textContent.length > n + 20,
                             { timeout: 60000 }, i, length);
  assert.equal(await page.$eval('#log', (l) => l.scrollTop), 0, 'scrolled up: not pulled down');
  await page.click('#stop');
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k].dataset.done,
                             { timeout: 10000 }, i);
  const got = await answerOf(i);
  assert.equal(got.error, '[stopped]');
  assert.match(got.summary, /^reasoning · \d+ tokens$/);
  let active = 1;
  for (let t = 0; t < 100 && active > 0; t++) {
    await new Promise((r) => setTimeout(r, 100));
    active = (await (await fetch(srv.url + '/health')).json()).active;
  }
  assert.equal(active, 0, 'the stopped generation is still running');
});

test('an error in the middle of the stream shows; the answer is marked incomplete', async () => {
  await setField('max_tokens', '');
  const chunk = (delta, finish = null) => 'data: ' + JSON.stringify({
    id: 'x', object: 'chat.completion.chunk', created: 0, model: MODEL,
    choices: [{ index: 0, delta, finish_reason: finish }] }) + '\n\n';
  intercept.respond = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'A partial ' }) +
    chunk({ content: 'answer' }) +
    'data: {"error":{"message":"the model ran out of luck","type":"server_error","code":500}}\n\n' +
    'data: [DONE]\n\n';
  let i;
  try { i = await sendMessage('Fail please'); } finally { intercept.respond = null; }
  const got = await answerOf(i);
  assert.equal(got.answer.trim(), 'A partial answer');
  assert.equal(got.incomplete, true);
  assert.match(got.error, /the model ran out of luck.*incomplete/);
  const chat = (await storedChats()).chats[0];
  assert.equal(chat.messages.at(-1).status, 'error');
  await shot('error-mid-stream');
  // the failed turn is not sent as context with the next question
  await setField('max_tokens', '2');
  intercept.seen = [];
  await sendMessage('Next question');
  const sent = intercept.seen.at(-1).messages;
  assert.equal(sent.some((m) => m.content === 'Fail please' || m.content === 'A partial answer'), false);
  assert.equal(sent.at(-1).content, 'Next question');
});

test('conversations survive a reload; new chat, switch and delete', async () => {
  const before = await page.$$eval('.msg', (els) => els.map((e) => e.className + ':' +
    (e.querySelector('.answer, .body')?.textContent ?? '')));
  await page.reload();
  await page.waitForFunction(() => document.getElementById('model').textContent.length > 0);
  const after = await page.$$eval('.msg', (els) => els.map((e) => e.className + ':' +
    (e.querySelector('.answer, .body')?.textContent ?? '')));
  assert.deepEqual(after, before);
  assert.equal(await page.$$eval('#chats .chat-item', (els) => els.length), 1);
  assert.equal(await page.$eval('#chats .chat-item .open', (e) => e.textContent), 'Hello there');
  // the settings came back too (thinking on, as the last test left it)
  assert.equal(await page.$eval('#thinking', (e) => e.checked), true);
  // the errored answer is still shown as incomplete
  assert.equal(await page.$$eval('.msg.assistant.incomplete', (els) => els.length), 1);
  await shot('reloaded');

  await page.click('#new-chat');
  assert.equal(await page.$$eval('#log .msg', (els) => els.length), 0);
  await setField('max_tokens', '2');
  await sendMessage('A second conversation');
  assert.deepEqual(await page.$$eval('#chats .chat-item .open', (els) => els.map((e) => e.textContent)),
                   ['A second conversation', 'Hello there']);
  await page.click('#chats .chat-item:nth-child(2) .open');
  assert.equal(await page.$$eval('#log .msg', (els) => els.length), before.length);
  await page.click('#chats .chat-item:nth-child(1) .del');
  assert.deepEqual(await page.$$eval('#chats .chat-item .open', (els) => els.map((e) => e.textContent)),
                   ['Hello there']);
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('#chats .chat-item').length === 1);
  assert.equal(await page.$$eval('#log .msg', (els) => els.length), before.length);

  // a reload in the middle of an answer keeps what had come, marked as interrupted
  await setField('max_tokens', '100000');
  const i = await sendMessage('Keep going', { wait: false });
  await page.waitForFunction(() => {
    const c = JSON.parse(localStorage.getItem('cedar-chats')).chats[0];
    return c.messages.at(-1).reasoning.length > 0;
  }, { timeout: 60000 });
  await page.reload();
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k]?.dataset.done, {}, i);
  const got = await answerOf(i);
  assert.equal(got.incomplete, true);
  assert.match(got.error, /interrupted/);
  assert.ok(got.reasoning.length > 0);
});

test('images: uploaded and pasted on a model with vision, sent as image_url data URLs', async () => {
  const props = await (await fetch(srv.url + '/props')).json();
  const attach = await page.$eval('#attach', (b) => !b.hidden);
  if (!props.modalities?.vision) {
    assert.equal(attach, false, 'no vision: no image button');
    return;
  }
  assert.equal(attach, true);
  await page.click('#new-chat');
  // the file input
  const [chooser] = await Promise.all([page.waitForFileChooser(), page.click('#attach')]);
  await chooser.accept([PNG_PATH]);
  await page.waitForFunction(() => document.querySelectorAll('#attachments canvas').length === 1);
  // a pasted image joins it
  const b64 = fs.readFileSync(PNG_PATH).toString('base64');
  await page.$eval('#input', (input, data) => {
    const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], 'pasted.png', { type: 'image/png' }));
    input.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
  }, b64);
  await page.waitForFunction(() => document.querySelectorAll('#attachments canvas').length === 2);
  await setField('max_tokens', '4');
  intercept.seen = [];
  const i = await sendMessage('What is in these pictures?');
  const got = await answerOf(i);
  assert.equal(got.error, undefined);
  const content = intercept.seen.at(-1).messages.at(-1).content;
  assert.deepEqual(content.map((p) => p.type), ['image_url', 'image_url', 'text']);
  assert.equal(content[0].image_url.url, 'data:image/png;base64,' + b64);
  assert.equal(content[1].image_url.url, 'data:image/png;base64,' + b64);
  assert.equal(content[2].text, 'What is in these pictures?');
  assert.equal(await page.$$eval('#attachments canvas', (els) => els.length), 0);
  // the thumbnails in the message are drawn (canvas, as the page's CSP allows no data: images)
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.user canvas.thumb')]
    .filter((c) => c.width > 1).length === 2);
  await shot('image');
});

test('with --api-key the page names the model once the key is typed', async () => {
  const keyed = await startServer(['--parallel', '1', '--api-key', 'sesame']);
  const p = await newPage();
  try {
    await p.goto(keyed.url + '/');
    await p.waitForFunction(() => document.getElementById('model-note').textContent.includes('API key'));
    assert.equal(await p.$eval('#model', (e) => e.textContent), '');
    await p.type('#key', 'sesame');
    await p.waitForFunction((m) => document.getElementById('model').textContent === m, {}, MODEL);
    assert.equal(await p.$eval('#model-note', (e) => e.textContent), '');
    await p.$eval('#max_tokens', (e) => { e.value = '3'; });
    const i = await sendMessage('Hi with a key', { p });
    const err = await p.$$eval('.msg.assistant', (els, k) => els[k].querySelector('.error')?.textContent, i);
    assert.equal(err, undefined);
    // a reload keeps the key and the name
    await p.reload();
    await p.waitForFunction((m) => document.getElementById('model').textContent === m, {}, MODEL);
    await shot('api-key', p);
    // a phone-sized window: the side panels fold away behind buttons
    await p.setViewport({ width: 420, height: 800 });
    assert.equal(await p.$eval('#settings', (e) => getComputedStyle(e).display), 'none');
    await p.click('#toggle-settings');
    assert.equal(await p.$eval('#settings', (e) => getComputedStyle(e).display), 'flex');
    await shot('narrow-settings', p);
  } finally {
    await p.close();
    const { code, signal } = await keyed.stop();
    assert.equal(signal, null, keyed.stderr);
    assert.equal(code, 0, keyed.stderr);
  }
});
