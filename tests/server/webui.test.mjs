// The web chat page at / in a real headless Chromium (Debian's chromium, driven by
// puppeteer-core over the DevTools protocol): a message streams an answer with its reasoning
// folded, the conversation continues, and Stop ends a generation on the server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import puppeteer from 'puppeteer-core';
import { startServer } from './helpers.mjs';

const CHROMIUM = process.env.CEDAR_CHROMIUM ?? '/usr/bin/chromium';

let srv, browser, page;
before(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (scripts/install-deps.sh installs it)`);
  srv = await startServer(['--parallel', '1']);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage();
  page.on('pageerror', (e) => { throw e; });
});
after(async () => {
  await browser?.close();
  const { code, signal } = await srv.stop();
  assert.equal(signal, null, srv.stderr);
  assert.equal(code, 0, srv.stderr);
});

async function sendMessage(text) {
  const before = await page.$$eval('.msg.assistant', (els) => els.length);
  await page.type('#input', text);
  await page.keyboard.press('Enter');
  await page.waitForFunction((n) => document.querySelectorAll('.msg.assistant').length > n,
                             {}, before);
  return before;  // index of the new assistant bubble
}

test('the page loads from the binary and names the model', async () => {
  const res = await page.goto(srv.url + '/');
  assert.equal(res.status(), 200);
  assert.equal(await page.title(), 'cedar');
  await page.waitForFunction(() => document.getElementById('model').textContent.length > 0);
  assert.equal(await page.$eval('#model', (e) => e.textContent), 'deepseek-v4-flash');
});

test('a message streams an answer; the reasoning is shown folded', async () => {
  await page.$eval('#max_tokens', (e) => { e.value = '12'; });
  const i = await sendMessage('Hello there');
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k].dataset.done,
                             { timeout: 60000 }, i);
  const got = await page.$$eval('.msg.assistant', (els, k) => {
    const m = els[k];
    const d = m.querySelector('details');
    return { reasoning: d.querySelector('div').textContent, open: d.open, hidden: d.hidden,
             answer: m.querySelector('.answer').textContent,
             stats: m.querySelector('.stats')?.textContent ?? '', error: m.querySelector('.error')?.textContent };
  }, i);
  assert.equal(got.error, undefined);
  // thinking is on by default: random weights think first, so the 12 tokens are reasoning
  assert.ok(got.reasoning.length > 0, JSON.stringify(got));
  assert.equal(got.hidden, false);
  assert.equal(got.open, false, 'reasoning is folded');
  assert.match(got.stats, /finish: length, 12 tokens/);
  assert.equal(await page.$eval('#send', (b) => b.disabled), false);
});

test('thinking off, a second turn carries the history', async () => {
  await page.click('#thinking');
  await page.$eval('#max_tokens', (e) => { e.value = '6'; });
  const i = await sendMessage('And again');
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k].dataset.done,
                             { timeout: 60000 }, i);
  const answer = await page.$$eval('.msg.assistant', (els, k) => els[k].querySelector('.answer').textContent, i);
  assert.ok(answer.length > 0);
  assert.equal(await page.$$eval('.msg.user', (els) => els.length), 2);
});

test('Stop aborts the generation and frees the server slot', async () => {
  await page.$eval('#max_tokens', (e) => { e.value = '100000'; });
  const i = await sendMessage('Tell me everything');
  await page.waitForFunction(() => !document.getElementById('stop').disabled);
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k]
                               .querySelector('.answer').textContent.length > 0,
                             { timeout: 60000 }, i);
  await page.click('#stop');
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant')[k].dataset.done,
                             { timeout: 10000 }, i);
  assert.equal(await page.$$eval('.msg.assistant', (els, k) => els[k].querySelector('.error').textContent, i),
               '[stopped]');
  let active = 1;
  for (let t = 0; t < 100 && active > 0; t++) {
    await new Promise((r) => setTimeout(r, 100));
    active = (await (await fetch(srv.url + '/health')).json()).active;
  }
  assert.equal(active, 0, 'the stopped generation is still running');
});
