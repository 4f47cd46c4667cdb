'use strict';
// Streamed bodies in the Node client against the real daemon. Run by
// tests/integration/test_streaming_clients.py, which starts the daemon and the test servers
// and sets FETCHD_SOCKET, FETCHD_TEST_URL, FETCHD_NGINX_URL, FETCHD_BIG_SHA256 (of
// nginx's /big.bin) and FETCHD_HUGE_URL (a 200 MiB file on nginx).
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Readable, Writable } = require('node:stream');
const { pipeline } = require('node:stream/promises');
const { test, before, after } = require('node:test');

const fetchd = require('..');

const BASE = process.env.FETCHD_TEST_URL;
const NGINX = process.env.FETCHD_NGINX_URL;
if (!BASE || !NGINX || !process.env.FETCHD_SOCKET) {
  throw new Error('run by tests/integration/test_streaming_clients.py (FETCHD_SOCKET, FETCHD_TEST_URL, FETCHD_NGINX_URL)');
}
const u = (p) => BASE + p;
const key = (p) => `${p}-${crypto.randomUUID().slice(0, 12)}`;
let client;

before(async () => { client = await fetchd.connect({ rpcTimeout: 60 }); });
after(() => client.close());

const live = async (jobId) => (await client.listJobs()).some((j) => j.jobId === jobId);
async function waitFor(pred, ms = 10000) {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('res.body streams each piece as it arrives (for await)', async () => {
  const t0 = Date.now();
  const r = await client.fetch(u('/slow-body?chunks=5&ms=200'), { stream: true });
  assert.ok(Date.now() - t0 < 600, 'the head waited for the body');
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-length'), '5');
  const arrivals = [];
  for await (const chunk of r.body) arrivals.push([Date.now() - t0, Buffer.from(chunk).toString()]);
  assert.equal(arrivals.map(([, c]) => c).join(''), 'xxxxx');
  assert.ok(arrivals.length >= 3, JSON.stringify(arrivals));
  assert.ok(arrivals.at(-1)[0] - arrivals[0][0] > 500, JSON.stringify(arrivals));
  assert.equal(r.result.bytes, 5);
});

test('Readable.fromWeb(res.body) and pipeline over a large body from nginx', async () => {
  const r = await client.fetch(NGINX + '/big.bin', { stream: true });
  const hash = crypto.createHash('sha256');
  await pipeline(Readable.fromWeb(r.body), new Writable({
    write(chunk, _enc, cb) { hash.update(chunk); cb(); },
  }));
  assert.equal(hash.digest('hex'), process.env.FETCHD_BIG_SHA256);
  const again = await client.fetch(NGINX + '/big.bin', { stream: true });
  assert.equal(crypto.createHash('sha256').update(Buffer.from(await again.arrayBuffer())).digest('hex'),
    process.env.FETCHD_BIG_SHA256);
});

test('res.lines(), responseBody lines, and body on a whole response', async () => {
  let r = await client.fetch(u('/ndjson?lines=3&eol=crlf&chunk=5'), { stream: true });
  const lines = [];
  for await (const line of r.lines()) lines.push(JSON.parse(line).n);
  assert.deepEqual(lines, [0, 1, 2]);
  r = await client.fetch(u('/ndjson?lines=2&unended=1'), { responseBody: 'lines' });
  assert.deepEqual((await r.text()).split('\n'), ['{"n": 0, "text": "line 0"}', '{"n": 1, "text": "line 1"}', '']);
  assert.equal(r.result.lines, 2);
  r = await client.fetch(u('/json'));
  const chunks = [];
  for await (const chunk of r.body) chunks.push(chunk);
  assert.deepEqual(JSON.parse(Buffer.concat(chunks).toString()), { hello: 'world', n: [1, 2, 3] });
});

test('cancelling res.body, or aborting, cancels the job', async () => {
  let jobId = key('node-cancel');
  let r = await client.fetch(u('/slow-body?chunks=100&ms=50'), { stream: true, jobId });
  const reader = r.body.getReader();
  assert.equal(Buffer.from((await reader.read()).value).toString(), 'x');
  assert.ok(await live(jobId));
  await reader.cancel();
  await waitFor(async () => !(await live(jobId)));
  jobId = key('node-abort');
  const ac = new AbortController();
  r = await client.fetch(u('/slow-body?chunks=100&ms=50'), { stream: true, signal: ac.signal, jobId });
  setTimeout(() => ac.abort(), 150);
  await assert.rejects(async () => { for await (const _ of r.body) { /* read */ } }, { name: 'AbortError' });
  await waitFor(async () => !(await live(jobId)));
  assert.equal(await client.ping(), 'pong');
});

test('events(): Server-Sent Events across dropped connections', async () => {
  const es = client.events(u(`/sse/${key('node-sse')}?events=5&per=2&retry=50`));
  const got = [];
  for await (const ev of es) got.push([ev.event, ev.id, ev.data]);
  assert.deepEqual(got, [1, 2, 3, 4, 5].map((i) => ['tick', String(i), `event ${i}`]));
  assert.equal((await es.response).status, 200);
  assert.equal(es.lastEventId, '5');
  assert.equal(es.result.events, 5);
  assert.equal(es.result.reconnects, 3);
  await assert.rejects(async () => {
    for await (const _ of client.events(u(`/sse/${key('node-401')}?events=2&first=401`))) { /* none */ }
  }, (e) => e instanceof fetchd.HTTPStatusError && e.status === 401);
});

test('events(): an LLM-style token stream from a stub; break cancels', async () => {
  const set = key('node-llm');
  const url = 'https://llm.example/v1/chat/completions';
  const tokens = ['Hel', 'lo', ',', ' wor', 'ld', '!'];
  const body = tokens.map((t, i) => `id: ${i + 1}\ndata: ${JSON.stringify({ token: t })}\n\n`).join('') + 'data: [DONE]\n\n';
  await client.addStub({ set, match: { url }, respond: { headers: { 'Content-Type': 'text/event-stream' }, body }, times: 1 });
  await client.addStub({ set, match: { url }, respond: { status: 204 } });
  let text = '';
  for await (const ev of client.events(url, { json: { prompt: 'hi', stream: true }, stubs: set })) {
    if (ev.data === '[DONE]') break;
    text += JSON.parse(ev.data).token;
  }
  assert.equal(text, 'Hello, world!');
  const jobId = key('node-sse-break');
  for await (const ev of client.events(u(`/sse/${key('node-long')}?events=100&ms=50`), { jobId })) {
    assert.equal(ev.id, '1');
    break;
  }
  await waitFor(async () => !(await live(jobId)));
  await client.removeStubs({ set });
});

test('a body nobody reads pauses that job only', async () => {
  const jobId = key('node-unread');
  const r = await client.fetch(process.env.FETCHD_HUGE_URL, { stream: true, jobId });
  assert.equal(r.status, 200);
  const others = await Promise.all(Array.from({ length: 10 }, () => client.fetch(u('/json'))));
  assert.ok(others.every((x) => x.status === 200));
  // Paused: once the connection's body budget (32 MiB) and the buffers between are full, a
  // second later it has taken in (next to) nothing more. A slow (debug, loaded) daemon takes
  // more than a second to fill them, so it gets up to ten; one that never pauses passes
  // 48 MiB long before.
  const received = async () => (await client.listJobs()).find((j) => j.jobId === jobId).receivedBytes;
  await new Promise((res) => setTimeout(res, 1000));
  let earlier = await received();
  let later = earlier;
  for (let i = 0; i < 10; i += 1) {
    await new Promise((res) => setTimeout(res, 1000));
    later = await received();
    if (later - earlier < 1024 * 1024 || later >= 48 * 1024 * 1024) break;
    earlier = later;
  }
  assert.ok(later < 48 * 1024 * 1024 && later - earlier < 1024 * 1024, `went on: ${earlier}, then ${later} bytes`);
  await r.body.cancel();
  await waitFor(async () => !(await live(jobId)));
});
