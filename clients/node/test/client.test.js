'use strict';
// The Node client against the real daemon. Run by tests/integration/test_node_client.py,
// which starts the daemon and the test servers and sets:
//   FETCHD_SOCKET, FETCHD_TEST_URL, FETCHD_NGINX_URL, FETCHD_TEST_TMP, FETCHD_CLOSED_PORT
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { test, before, after } = require('node:test');

const fetchd = require('..');

const BASE = process.env.FETCHD_TEST_URL;
const TMP = process.env.FETCHD_TEST_TMP;
const CLOSED = process.env.FETCHD_CLOSED_PORT;
if (!BASE || !TMP || !process.env.FETCHD_SOCKET) {
  throw new Error('run by tests/integration/test_node_client.py (FETCHD_SOCKET, FETCHD_TEST_URL, FETCHD_TEST_TMP)');
}
const u = (p) => BASE + p;
let client;

before(async () => { client = await fetchd.connect({ rpcTimeout: 60 }); });
after(() => client.close());

async function live(jobId) {
  return (await client.listJobs()).some((j) => j.jobId === jobId);
}

async function waitFor(pred, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('fetch JSON: a Response like fetch()', async () => {
  assert.equal(await client.ping(), 'pong');
  const r = await client.fetch(u('/json'));
  assert.ok(r instanceof fetchd.Response);
  assert.equal(r.status, 200);
  assert.equal(r.ok, true);
  assert.equal(r.statusText, 'OK');
  assert.equal(r.headers.get('Content-Type'), 'application/json');
  assert.deepEqual(await r.json(), { hello: 'world', n: [1, 2, 3] });
  assert.equal(JSON.parse(await r.text()).hello, 'world');
  assert.equal(Buffer.from(await r.arrayBuffer()).toString(), await r.text());
  assert.equal(r.url, u('/json'));
  assert.equal(r.redirected, false);
  assert.equal(r.result.attempts, 1);   // the protocol's fields stay reachable
  const nf = await client.fetch(u('/status/404'), { retry: false });
  assert.equal(nf.status, 404);
  assert.equal(nf.ok, false);
  assert.equal(nf.statusText, 'Not Found');
  assert.throws(() => nf.raiseForStatus(), fetchd.HTTPStatusError);
  const red = await client.fetch(u('/redirect/2'));
  assert.equal(red.redirected, true);
  assert.equal(red.url, u('/redirect/0'));
  const bin = await client.fetch(u('/binary'));
  assert.equal((await bin.bytes()).length, 10);
});

test('methods, headers, bodies, query', async () => {
  const echo = async (init) => (await client.fetch(u('/echo'), init)).json();
  let e = await echo({ method: 'post', json: { k: [1, 'two'] }, headers: { 'X-Client': 'node' } });
  assert.equal(e.method, 'POST');
  assert.deepEqual(JSON.parse(e.body), { k: [1, 'two'] });
  assert.ok(e.headers.some(([k, v]) => k === 'X-Client' && v === 'node'));
  e = await echo({ method: 'PUT', body: 'text' });
  assert.deepEqual([e.method, e.body], ['PUT', 'text']);
  e = await echo({ method: 'POST', body: new Uint8Array([0, 1, 2, 255]) });
  assert.equal(e.bodyBase64, 'AAEC/w==');
  e = await echo({ method: 'POST', body: new URLSearchParams([['a', 'b c'], ['a', '2']]) });
  assert.equal(e.body, 'a=b+c&a=2');
  e = await echo({ query: { q: 'a b', n: [1, 2] }, headers: new Headers({ 'X-H': '1' }) });
  assert.equal(e.query, 'q=a%20b&n=1&n=2');
  assert.ok(e.headers.some(([k]) => k.toLowerCase() === 'x-h'));
  for (const m of ['PATCH', 'DELETE', 'OPTIONS']) assert.equal((await echo({ method: m })).method, m);
  const form = new FormData();
  form.append('note', 'hi');
  form.append('doc', new Blob(['blob content'], { type: 'text/plain' }), 'doc.txt');
  const parts = (await (await client.fetch(u('/multipart-echo'), { method: 'POST', body: form })).json()).parts;
  const byName = Object.fromEntries(parts.map((p) => [p.name, p]));
  assert.equal(byName.note.value, 'hi');
  assert.deepEqual([byName.doc.filename, byName.doc.size, byName.doc.contentType], ['doc.txt', 12, 'text/plain']);
});

test('many concurrent awaits on one connection', async () => {
  const rs = await Promise.all(Array.from({ length: 40 }, (_, i) => client.fetch(u('/echo'), { query: { i } })));
  const bodies = await Promise.all(rs.map((r) => r.json()));
  bodies.forEach((b, i) => assert.equal(b.query, `i=${i}`));
  assert.equal(new Set(rs.map((r) => r.jobId)).size, 40);
  const slow = await Promise.all([3, 4, 5].map((n) => {
    const seen = [];
    return client.fetch(u(`/slow-body?chunks=${n}&ms=40`), { onProgress: (p) => seen.push(p) })
      .then((r) => ({ r, seen, n }));
  }));
  for (const { r, seen, n } of slow) {
    assert.ok(seen.length > 0);
    assert.ok(seen.every((p) => p.jobId === r.jobId), 'progress routed to its own call');
    assert.equal(seen[seen.length - 1].receivedBytes, n);
  }
});

test('download with progress events', async () => {
  const file = path.join(TMP, 'node-dl.bin');
  const events = [];
  const onEvent = (p) => events.push(p);
  client.on('progress', onEvent);
  const seen = [];
  const r = await client.download(u('/bytes/300000'), file, { onProgress: (p) => seen.push(p) });
  client.off('progress', onEvent);
  assert.equal(r.status, 200);
  assert.equal(r.result.path, file);
  assert.equal(r.result.bytes, 300000);
  assert.equal(fs.statSync(file).size, 300000);
  const digest = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
  assert.equal(r.result.sha256, digest);
  assert.equal(seen[seen.length - 1].receivedBytes, 300000);
  assert.ok(events.some((p) => p.jobId === r.jobId), "the client's 'progress' event");
  await assert.rejects(client.download(u('/bytes/10'), file), (e) => e instanceof fetchd.FileError
    && e.path === file && e.message.includes(file));
});

test('upload files', async () => {
  const a = path.join(TMP, 'node-a.txt');
  fs.writeFileSync(a, 'alpha\n');
  const r = await client.upload(u('/multipart-echo'), [a, { content: Buffer.from([0, 1, 2]), filename: 'b.bin', field: 'second' }],
    { fields: { title: 'Q3' } });
  const parts = Object.fromEntries((await r.json()).parts.map((p) => [p.name, p]));
  assert.equal(parts.file.filename, 'node-a.txt');
  assert.equal(parts.file.sha256, crypto.createHash('sha256').update('alpha\n').digest('hex'));
  assert.equal(parts.second.size, 3);
  assert.equal(parts.title.value, 'Q3');
  assert.deepEqual(r.result.failedFiles, []);
  const missing = path.join(TMP, 'node-missing.txt');
  await assert.rejects(client.upload(u('/multipart-echo'), [a, missing]),
    (e) => e instanceof fetchd.FileError && e.path === missing && e.message.includes(missing));
});

test('cancel via AbortSignal cancels the job', async () => {
  const ac = new AbortController();
  const jobId = `node-abort-${Date.now()}`;
  const p = client.fetch(u('/slow-body?chunks=200&ms=100'), { signal: ac.signal, jobId });
  await waitFor(() => live(jobId));
  ac.abort();
  await assert.rejects(p, (e) => e.name === 'AbortError');
  await waitFor(async () => !(await live(jobId)));
  // An already aborted signal: nothing is sent.
  await assert.rejects(client.fetch(u('/json'), { signal: AbortSignal.abort() }), (e) => e.name === 'AbortError');
  // AbortSignal.timeout, on a download.
  const file = path.join(TMP, 'node-aborted.bin');
  await assert.rejects(client.download(u('/slow-body?chunks=200&ms=100'), file, { signal: AbortSignal.timeout(300) }),
    (e) => e.name === 'TimeoutError');
  assert.equal(fs.existsSync(file), false);
  // cancel() from another connection: the call rejects with Cancelled.
  const other = await fetchd.connect();
  const id2 = `node-cancel-${Date.now()}`;
  const p2 = client.fetch(u('/slow-body?chunks=200&ms=100'), { jobId: id2 });
  p2.catch(() => {}); // rejects while the cancel is awaited; checked below
  await waitFor(() => live(id2));
  assert.equal(await other.cancel(id2), true);
  await assert.rejects(p2, (e) => e instanceof fetchd.Cancelled && e.by === 'cancel' && e.code === -32002);
  other.close();
  assert.equal(await client.ping(), 'pong');
});

test('every error class', async () => {
  await assert.rejects(fetchd.connect({ socketPath: path.join(TMP, 'none.sock') }),
    (e) => e instanceof fetchd.DaemonUnreachable && !(e instanceof fetchd.ServerUnreachable)
      && e.socketPath.endsWith('none.sock'));
  await assert.rejects(client.fetch(`http://127.0.0.1:${CLOSED}/`, { retry: false }),
    (e) => e instanceof fetchd.ServerUnreachable && e instanceof fetchd.TransportError && e.kind === 'connect');
  await assert.rejects(client.fetch('http://no-such-host.invalid/', { retry: false }),
    (e) => e instanceof fetchd.ServerUnreachable && e.kind === 'dns');
  await assert.rejects(client.fetch(u('/slow-headers?ms=3000'), { timeout: 0.3, retry: false }),
    (e) => e instanceof fetchd.RequestTimeout && e.kind === 'timeout');
  await assert.rejects(client.fetch(u('/redirect/5'), { maxRedirects: 2 }), fetchd.TooManyRedirects);
  await assert.rejects(client.fetch(u('/bytes/5000'), { maxBodyBytes: 100 }),
    (e) => e.constructor === fetchd.TransportError && e.kind === 'bodyTooLarge');
  await assert.rejects(client.fetch(u('/echo'), { bogusField: 1 }),
    (e) => e instanceof fetchd.InvalidParams && e.field === 'bogusField' && e.code === -32602);
  await assert.rejects(client.fetch('ftp://127.0.0.1/x'), fetchd.NotAllowed);
  await assert.rejects(client.call('noSuchMethod'), fetchd.MethodNotFound);
  const jobId = `node-rpc-timeout-${Date.now()}`;
  await assert.rejects(client.fetch(u('/slow-body?chunks=100&ms=100'), { rpcTimeout: 0.3, jobId }), fetchd.Timeout);
  await waitFor(async () => !(await live(jobId)));
  const c2 = await fetchd.connect();
  c2.close();
  await assert.rejects(c2.ping(), fetchd.ConnectionClosed);
  assert.equal(await client.ping(), 'pong');
});

test('v2 methods: stubs, getJob, attach, auth', async () => {
  const set = `node-${Date.now()}`;
  const id = await client.addStub({ set, match: { url: 'https://api.example.com/n' }, respond: { status: 201, json: { who: 'node' } } });
  assert.ok(id);
  const r = await client.fetch('https://api.example.com/n', { stubs: set });
  assert.equal(r.status, 201);
  assert.deepEqual(await r.json(), { who: 'node' });
  assert.equal((await client.getStubs(set)).stubs[0].hits, 1);
  assert.deepEqual(await client.setStubMode(set, 'error'), { set, onMiss: 'error' });
  await assert.rejects(client.fetch('https://api.example.com/other', { stubs: set }),
    (e) => e instanceof fetchd.TransportError && e.kind === 'stubMiss');
  assert.equal(await client.removeStubs({ set }), 1);
  const job = await client.getJob(r.jobId);
  assert.equal(job.state, 'finished');
  const attached = await client.attach(r.jobId);
  assert.equal(attached.status, 201);
  assert.ok(Array.isArray(await client.getAuth()));
});
