'use strict';
/**
 * fetchd-client: a Node.js client for fetchd (HTTP over JSON-RPC 2.0 on a Unix socket).
 * No dependencies beyond Node's own modules (Node 18+).
 *
 *   const { connect } = require('fetchd-client');
 *   const client = await connect();                       // $FETCHD_SOCKET, $XDG_RUNTIME_DIR/...
 *   const r = await client.fetch('https://example.org/api', { json: { q: 1 } });
 *   console.log(r.status, await r.json());
 *   client.close();
 *
 * One connection carries any number of concurrent requests; answers are matched by id.
 * Bodies as they arrive: `fetch(url, { stream: true })` resolves at the answer's head and
 * `res.body` is a web ReadableStream; `for await (const ev of client.events(url))` gives
 * Server-Sent Events. Each streamed job has a connection of its own, read only as fast as
 * its consumer reads, so a body nobody reads pauses that transfer only.
 * See index.d.ts for the types and docs/clients.md for the guide.
 */
const crypto = require('node:crypto');
const { EventEmitter } = require('node:events');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const path = require('node:path');
const { ReadableStream } = require('node:stream/web');

// ---------------------------------------------------------------------------- errors

/** Base class: `code` is the JSON-RPC code (undefined for client-side problems), `data` the
 * error's data member. */
class FetchdError extends Error {
  constructor(message, code, data) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.data = data;
  }
}

/** The daemon's socket could not be reached (no daemon, wrong path). Not the HTTP server:
 * that is ServerUnreachable. */
class DaemonUnreachable extends FetchdError {
  constructor(message, socketPath) {
    super(message);
    this.socketPath = socketPath;
  }
}

/** The socket (or a directory above it) belongs to another user: nothing was sent. */
class UntrustedPeer extends DaemonUnreachable {}

/** The connection ended before the answer. */
class ConnectionClosed extends FetchdError {}

/** No answer within the client's own rpcTimeout (the job is cancelled). */
class Timeout extends FetchdError {}

/** The daemon answered with a JSON-RPC error. */
class RPCError extends FetchdError {
  get detail() { return this.data && this.data.detail; }
}
class ParseError extends RPCError {}
class InvalidRequest extends RPCError {}
class MethodNotFound extends RPCError {}
/** -32602: `field` names the bad parameter. */
class InvalidParams extends RPCError {
  get field() { return this.data && this.data.field; }
}
class InternalError extends RPCError {}
/** -32001: the transfer failed after all attempts; `kind` says how. */
class TransportError extends RPCError {
  get kind() { return this.data && this.data.kind; }
  get jobId() { return this.data && this.data.jobId; }
  get attempts() { return this.data && this.data.attempts; }
}
/** -32001 kind dns, connect or proxy: the HTTP server could not be reached. */
class ServerUnreachable extends TransportError {}
/** -32001 kind timeout: the request's timeout or maxTime passed. */
class RequestTimeout extends TransportError {}
/** -32001 kind tooManyRedirects. */
class TooManyRedirects extends TransportError {}
/** -32002: the job was cancelled (`by`: cancel, disconnect, shutdown). */
class Cancelled extends RPCError {
  get by() { return this.data && this.data.by; }
  get jobId() { return this.data && this.data.jobId; }
}
/** -32003: a local file could not be read or written; the message names `path`. */
class FileError extends RPCError {
  constructor(message, code, data) {
    const p = data && data.path;
    super(p && !message.includes(p) ? `${message} (${p})` : message, code, data);
  }
  get path() { return this.data && this.data.path; }
}
class NotAllowed extends RPCError {}
class Overloaded extends RPCError {
  get limit() { return this.data && this.data.limit; }
}
class MessageTooLarge extends RPCError {
  get limit() { return this.data && this.data.limit; }
}

const BY_CODE = {
  [-32700]: ParseError, [-32600]: InvalidRequest, [-32601]: MethodNotFound,
  [-32602]: InvalidParams, [-32603]: InternalError, [-32001]: TransportError,
  [-32002]: Cancelled, [-32003]: FileError, [-32004]: NotAllowed, [-32005]: Overloaded,
  [-32006]: MessageTooLarge,
};
const BY_KIND = {
  dns: ServerUnreachable, connect: ServerUnreachable, proxy: ServerUnreachable,
  timeout: RequestTimeout, tooManyRedirects: TooManyRedirects,
};

/** The exception for a JSON-RPC error object. */
function errorFromAnswer(error) {
  if (!error || typeof error !== 'object') {
    return new RPCError(`malformed error object: ${JSON.stringify(error)}`, -32603, error);
  }
  let Cls = BY_CODE[error.code] || RPCError;
  if (Cls === TransportError && error.data && BY_KIND[error.data.kind]) Cls = BY_KIND[error.data.kind];
  const detail = error.data && typeof error.data.detail === 'string' ? error.data.detail : '';
  let message = `[${error.code}] ${error.message || 'error'}`;
  if (detail && !message.includes(detail)) message += `: ${detail}`;
  return new Cls(message, error.code, error.data);
}

// ---------------------------------------------------------------------------- socket

/** The socket path by the daemon's rules: the argument, else $FETCHD_SOCKET, else
 * $XDG_RUNTIME_DIR/fetchd.sock, else /tmp/fetchd-<uid>/fetchd.sock. */
function defaultSocketPath(explicit) {
  if (explicit) return explicit;
  if (process.env.FETCHD_SOCKET) return process.env.FETCHD_SOCKET;
  if (process.env.XDG_RUNTIME_DIR) return path.join(process.env.XDG_RUNTIME_DIR, 'fetchd.sock');
  return `/tmp/fetchd-${process.getuid()}/fetchd.sock`;
}

/**
 * Node cannot read SO_PEERCRED, so the client checks the path as fetchctl does
 * (docs/clients.md, "Who is listening"): the socket and every directory from / down are
 * owned by this user or root, and no directory is writable by group or others unless it is
 * sticky. Then no other user can have put their socket there. Returns the resolved path.
 */
function checkSocketPath(socketPath) {
  const me = process.getuid();
  const trusted = (uid) => uid === me || uid === 0;
  let real;
  try {
    real = fs.realpathSync(socketPath);
  } catch (e) {
    throw new DaemonUnreachable(`cannot connect to fetchd at ${socketPath}: ${e.code === 'ENOENT' ? 'No such file or directory' : e.message}`, socketPath);
  }
  const refuse = (why) => new UntrustedPeer(
    `refusing fetchd at ${socketPath}: ${why}; nothing was sent`, socketPath);
  const st = fs.lstatSync(real);
  if (!st.isSocket()) throw new DaemonUnreachable(`cannot connect to fetchd at ${socketPath}: not a socket`, socketPath);
  if (!trusted(st.uid)) throw refuse(`the socket is owned by uid ${st.uid}, not by this user (uid ${me}) or root`);
  let dir = path.dirname(real);
  for (;;) {
    const d = fs.lstatSync(dir);
    if (!trusted(d.uid)) throw refuse(`the directory ${dir} is owned by uid ${d.uid}, not by this user (uid ${me}) or root`);
    if ((d.mode & 0o022) && !(d.mode & 0o1000)) throw refuse(`the directory ${dir} is writable by others and not sticky`);
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return real;
}

// ---------------------------------------------------------------------------- response

/** A fetch-like Response over the protocol's result object (`result`). `body` is a web
 * ReadableStream of the body: the bytes already there, or (`stream: true`) the body as it
 * arrives. */
class Response {
  constructor(result, stream) {
    this.result = result;
    this._stream = stream || null;   // the streamed body, when it is still arriving
    this._bytes = null;              // the streamed body once read whole
    this.status = result.status;
    this.statusText = http.STATUS_CODES[result.status] || '';
    this.ok = result.status >= 200 && result.status < 300;
    this.url = result.url;
    this.redirected = (result.redirects || 0) > 0;
    this.jobId = result.jobId;
    this.headers = new Headers();
    for (const [k, v] of Object.entries(result.headers || {})) {
      const values = k === 'set-cookie' ? String(v).split('\n') : [String(v)];
      for (const value of values) {
        try {
          this.headers.append(k, value);
        } catch { /* a value WHATWG Headers refuses stays in result.headers */ }
      }
    }
    this.bodyUsed = false;
  }

  /** The body as a web ReadableStream of Uint8Array chunks (`for await (const chunk of
   * res.body)`, `Readable.fromWeb(res.body)`). Reading it uses the body up. */
  get body() {
    if (!this._stream) {
      const bytes = this.bytesSync();
      this._stream = new ReadableStream({
        start(controller) {
          if (bytes.length) controller.enqueue(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
          controller.close();
        },
      });
    }
    return this._stream;
  }

  /** The whole body: a streamed one is read to its end first. */
  async _all() {
    this.bodyUsed = true;
    if (this._bytes) return this._bytes;
    if (!this._stream || !this._stream.streamed) return this.bytesSync();
    const chunks = [];
    for await (const chunk of this._stream) chunks.push(chunk);
    this._bytes = Buffer.concat(chunks);
    return this._bytes;
  }

  /** The body line by line (strings without their LF or CRLF), as it arrives. */
  async *lines() {
    this.bodyUsed = true;
    let pending = '';
    const decoder = new TextDecoder();
    const source = this._bytes ? [this._bytes] : (this._stream && this._stream.streamed ? this._stream : [this.bytesSync()]);
    for await (const chunk of source) {
      pending += decoder.decode(chunk, { stream: true });
      const parts = pending.split('\n');
      pending = parts.pop();
      for (const line of parts) yield line.endsWith('\r') ? line.slice(0, -1) : line;
    }
    pending += decoder.decode();
    if (pending) yield pending.endsWith('\r') ? pending.slice(0, -1) : pending;
  }

  /** The body bytes (also for json/base64 forms); for a streamed body, once it was read. */
  bytesSync() {
    if (this._bytes) return this._bytes;
    if (this._stream && this._stream.streamed) throw new TypeError('fetchd: a streamed body is read with body, text(), json(), arrayBuffer() or bytes()');
    const r = this.result;
    if (typeof r.bodyBase64 === 'string') return Buffer.from(r.bodyBase64, 'base64');
    if (typeof r.body === 'string') return Buffer.from(r.body, 'utf8');
    if ('json' in r) return Buffer.from(JSON.stringify(r.json), 'utf8');
    return Buffer.alloc(0);
  }

  async text() {
    if (typeof this.result.body === 'string') {
      this.bodyUsed = true;
      return this.result.body;
    }
    return (await this._all()).toString('utf8');
  }

  async json() {
    if ('json' in this.result) {
      this.bodyUsed = true;
      return this.result.json;
    }
    return JSON.parse((await this._all()).toString('utf8'));
  }

  async arrayBuffer() {
    const b = await this._all();
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  }

  async bytes() {
    return new Uint8Array(await this._all());
  }

  /** Throws HTTPStatusError for a 4xx or 5xx status; returns this otherwise. */
  raiseForStatus() {
    if (this.status >= 400) {
      const kind = this.status < 500 ? 'Client Error' : 'Server Error';
      throw new HTTPStatusError(`${this.status} ${kind}: ${this.statusText} for url: ${this.url}`, this);
    }
    return this;
  }
}

/** Thrown by Response#raiseForStatus. */
class HTTPStatusError extends FetchdError {
  constructor(message, response) {
    super(message);
    this.response = response;
    this.status = response.status;
  }
}

// ---------------------------------------------------------------------------- request model

const toBase64 = (bytes) => Buffer.from(bytes.buffer ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : bytes).toString('base64');

function isBytes(v) {
  return v instanceof ArrayBuffer || ArrayBuffer.isView(v);
}

function headersObject(h) {
  if (!h) return undefined;
  if (typeof h.forEach === 'function' && !(h instanceof Map) && !Array.isArray(h)) {
    const out = {};
    h.forEach((v, k) => { out[k] = v; });
    return out;
  }
  if (h instanceof Map || Array.isArray(h)) return Object.fromEntries(h);
  return { ...h };
}

function searchParamsObject(sp) {
  const out = {};
  for (const [k, v] of sp) {
    if (k in out) out[k] = [].concat(out[k], v);
    else out[k] = v;
  }
  return out;
}

async function fileSpec(f) {
  if (typeof f === 'string') return { path: path.resolve(f) };
  const spec = {};
  for (const [k, v] of Object.entries(f)) {
    if (v === undefined || v === null) continue;
    if (k === 'path') spec.path = path.resolve(v);
    else if (k === 'content' && isBytes(v)) spec.contentBase64 = toBase64(v);
    else if (k === 'content' && typeof Blob !== 'undefined' && v instanceof Blob) {
      spec.contentBase64 = Buffer.from(await v.arrayBuffer()).toString('base64');
    } else spec[k] = v;
  }
  return spec;
}

// Options of fetch() that are the client's own, not protocol fields.
const OWN = new Set(['method', 'headers', 'body', 'json', 'query', 'signal', 'onProgress',
  'onRetrying', 'rpcTimeout', 'stream']);

/** Protocol method and params for fetch(url, init). A FormData body becomes an upload. */
async function fetchParams(url, init) {
  const p = { url: String(url) };
  let method = 'fetch';
  if (init.method) p.method = String(init.method).toUpperCase();
  const headers = headersObject(init.headers);
  if (headers) p.headers = headers;
  if (init.query) p.query = init.query instanceof URLSearchParams ? searchParamsObject(init.query) : init.query;
  const body = init.body;
  if (init.json !== undefined) p.json = init.json;
  else if (body === undefined || body === null) { /* no body */ } else if (typeof body === 'string') p.body = body;
  else if (isBytes(body)) p.bodyBase64 = toBase64(body);
  else if (body instanceof URLSearchParams) p.form = searchParamsObject(body);
  else if (typeof FormData !== 'undefined' && body instanceof FormData) {
    method = 'upload';
    p.files = [];
    p.fields = {};
    for (const [name, value] of body) {
      if (typeof value === 'string') p.fields[name] = value;
      else {
        const spec = await fileSpec({ content: value, filename: value.name || 'blob', field: name });
        if (value.type) spec.mimetype = value.type;
        p.files.push(spec);
      }
    }
    if (p.method === 'POST') delete p.method;
  } else if (typeof Blob !== 'undefined' && body instanceof Blob) {
    p.bodyBase64 = Buffer.from(await body.arrayBuffer()).toString('base64');
  } else throw new TypeError('fetchd: body must be a string, bytes, URLSearchParams, FormData or Blob');
  for (const [k, v] of Object.entries(init)) if (!OWN.has(k) && v !== undefined) p[k] = v;
  return { method, params: p };
}

// ---------------------------------------------------------------------------- client

/**
 * A connection to fetchd. Emits 'progress' and 'retrying' (params) for every notification,
 * and 'close' when the connection ends. Use `await connect(options)` or
 * `await new Client(options).connect()`.
 */
class Client extends EventEmitter {
  constructor(options = {}) {
    super();
    this.socketPath = defaultSocketPath(options.socketPath);
    this.rpcTimeout = options.rpcTimeout;
    this._nextId = 1;
    this._calls = new Map();   // id -> {resolve, reject}
    this._jobs = new Map();    // jobId -> {onProgress, onRetrying}
    this._socket = null;
    this._closedError = null;
  }

  /** Connects (after the path check); resolves to this. */
  connect() {
    let resolved;
    try {
      resolved = checkSocketPath(this.socketPath);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      const sock = net.createConnection(resolved);
      const onError = (e) => {
        reject(new DaemonUnreachable(`cannot connect to fetchd at ${this.socketPath}: ${e.message}`, this.socketPath));
      };
      sock.once('error', onError);
      sock.once('connect', () => {
        sock.removeListener('error', onError);
        this._socket = sock;
        this._attach(sock);
        resolve(this);
      });
    });
  }

  _attach(sock) {
    sock.on('data', lineSplitter((line) => this._dispatch(line)));
    sock.on('error', () => {});
    sock.on('close', () => {
      if (!this._closedError) this._closedError = new ConnectionClosed('the daemon closed the connection');
      for (const call of this._calls.values()) call.reject(new ConnectionClosed(this._closedError.message));
      this._calls.clear();
      this.emit('close');
    });
  }

  _dispatch(line) {
    let msg;
    try {
      msg = JSON.parse(line.toString('utf8'));
    } catch {
      return;
    }
    for (const m of Array.isArray(msg) ? msg : [msg]) {
      if (!m || typeof m !== 'object') continue;
      if (m.method && !('id' in m)) {
        const params = m.params || {};
        const job = this._jobs.get(params.jobId);
        const cb = job && (m.method === 'progress' ? job.onProgress : job.onRetrying);
        if (cb) {
          try { cb(params); } catch (e) { job.fail(e); }
        }
        this.emit(m.method, params);
        continue;
      }
      let call = this._calls.get(m.id);
      if (!call && m.id === null && this._calls.size === 1) call = this._calls.values().next().value;
      if (!call) continue;
      this._calls.delete(m.id === null ? [...this._calls.keys()][0] : m.id);
      if (m.error) call.reject(errorFromAnswer(m.error));
      else call.resolve(m.result);
    }
  }

  _send(msg) {
    if (this._closedError) throw this._closedError;
    if (!this._socket) throw new ConnectionClosed('not connected: await client.connect() first');
    this._socket.write(JSON.stringify(msg) + '\n');
  }

  /** Any JSON-RPC method; resolves to its result. */
  call(method, params, { rpcTimeout } = {}) {
    return new Promise((resolve, reject) => {
      const id = this._nextId++;
      const msg = { jsonrpc: '2.0', id, method };
      if (params !== undefined) msg.params = params;
      try {
        this._send(msg);
      } catch (e) {
        reject(e);
        return;
      }
      let timer = null;
      const done = (fn) => (v) => { if (timer) clearTimeout(timer); fn(v); };
      this._calls.set(id, { resolve: done(resolve), reject: done(reject) });
      const limit = rpcTimeout !== undefined ? rpcTimeout : this.rpcTimeout;
      if (limit !== undefined && limit !== null) {
        timer = setTimeout(() => {
          this._calls.delete(id);
          reject(new Timeout(`no answer to ${method} within ${limit}s`));
        }, limit * 1000);
      }
    });
  }

  /** A notification (never answered). */
  notify(method, params) {
    const msg = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    this._send(msg);
  }

  _cancelQuietly(jobId) {
    try {
      this._send({ jsonrpc: '2.0', id: `cancel-${this._nextId++}`, method: 'cancel', params: { jobId } });
    } catch { /* closed */ }
  }

  /** Runs one job: its own id, notifications to the callbacks, cancelled on abort. */
  _job(method, params, { signal, onProgress, onRetrying, rpcTimeout, owns = true } = {}) {
    if (signal && signal.aborted) return Promise.reject(signal.reason);
    if (!params.jobId) params.jobId = `node-${crypto.randomUUID()}`;
    if ((onProgress || onRetrying) && params.progress === undefined) params.progress = true;
    const jobId = params.jobId;
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = () => {
        settled = true;
        this._jobs.delete(jobId);
        if (signal) signal.removeEventListener('abort', onAbort);
      };
      const fail = (e) => {
        if (settled) return;
        finish();
        if (owns) this._cancelQuietly(jobId);
        reject(e);
      };
      const onAbort = () => fail(signal.reason);
      this._jobs.set(jobId, { onProgress, onRetrying, fail });
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      this.call(method, params, { rpcTimeout }).then(
        (result) => { if (!settled) { finish(); resolve(result); } },
        (e) => {
          if (settled) return;
          if (e instanceof Timeout) fail(e);
          else { finish(); reject(e); }
        });
    });
  }

  /**
   * fetch(url, {method, headers, body, json, query, signal, onProgress, onRetrying, ...})
   * -> Response. body: string, bytes, URLSearchParams (a form), Blob, or FormData (a
   * multipart upload). Other options are protocol fields (timeout, retry, maxRedirects...).
   * An HTTP status is never an error (see Response#raiseForStatus).
   */
  async fetch(url, init = {}) {
    const { method, params } = await fetchParams(url, init);
    if (init.stream && params.responseBody === undefined) params.responseBody = 'stream';
    if (params.responseBody === 'events') throw new TypeError('fetchd: use client.events(url) for responseBody "events"');
    if (params.responseBody === 'stream' || params.responseBody === 'lines') return this._streamJob(method, params, init);
    return new Response(await this._job(method, params, init));
  }

  /** A streamed fetch: resolves at the head with res.body fed as the body arrives. */
  _streamJob(method, params, { signal, onProgress, onRetrying, rpcTimeout } = {}) {
    if (signal && signal.aborted) return Promise.reject(signal.reason);
    this._streamParams(params, onProgress, onRetrying);
    return new Promise((resolve, reject) => {
      let controller = null;
      let response = null;
      let ended = false;
      const body = new ReadableStream({
        start(c) { controller = c; },
        pull() { job.resume(); },
        cancel() { ended = true; job.close(); },
      }, { highWaterMark: STREAM_HIGH_WATER, size: (chunk) => chunk.byteLength });
      body.streamed = true;
      const limit = rpcTimeout !== undefined ? rpcTimeout : this.rpcTimeout;
      const timer = limit !== undefined && limit !== null
        ? setTimeout(() => fail(new Timeout(`no answer to fetch within ${limit}s`)), limit * 1000) : null;
      const onAbort = () => fail(signal.reason);
      const settle = () => {
        if (timer) clearTimeout(timer);
        if (signal) signal.removeEventListener('abort', onAbort);
      };
      const fail = (e) => {
        job.close();
        if (!response) {
          settle();
          reject(e);
        } else if (!ended) {
          ended = true;
          settle();
          controller.error(e);
        }
      };
      const enqueue = (bytes) => {
        if (ended) return;
        controller.enqueue(bytes);
        if (controller.desiredSize <= 0) job.pause();
      };
      const job = new JobStream(this.socketPath, method, params, {
        head: (head) => {
          if (response) return;
          if (timer) clearTimeout(timer);
          response = new Response(head, body);
          resolve(response);
        },
        chunk: enqueue,
        line: (line) => enqueue(Buffer.from(line + '\n', 'utf8')),
        progress: onProgress,
        retrying: onRetrying,
        end: (result) => {
          settle();
          if (!response) {
            resolve(new Response(result));
            return;
          }
          Object.assign(response.result, result);
          if (!ended) {
            ended = true;
            controller.close();
          }
        },
        error: fail,
      });
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  _streamParams(params, onProgress, onRetrying) {
    if (!params.jobId) params.jobId = `node-${crypto.randomUUID()}`;
    if ((onProgress || onRetrying) && params.progress === undefined) params.progress = true;
  }

  /**
   * Server-Sent Events from url (responseBody "events"), parsed by the daemon, which
   * reconnects when the connection drops: `for await (const ev of client.events(url, init))`
   * gives {event, data, id, jobId}. init as fetch's (a body or json makes it a POST). The
   * request is sent now; see EventStream.
   */
  events(url, init = {}) {
    return new EventStream(this, url, init);
  }

  /** download(url, path, {signal, onProgress, overwrite, sha256, ...}): the daemon streams
   * the body to path. Resolves to a Response (without body) whose result has path, bytes,
   * sha256. */
  async download(url, filePath, options = {}) {
    const params = { url: String(url), path: path.resolve(filePath) };
    for (const [k, v] of Object.entries(options)) if (!OWN.has(k) && v !== undefined) params[k] = v;
    if (options.headers) params.headers = headersObject(options.headers);
    return new Response(await this._job('download', params, options));
  }

  /** upload(url, files, {fields, signal, onProgress, method, ...}): multipart, streamed from
   * disk. files: paths, or {path | content (string, bytes, Blob) | contentBase64, filename,
   * mimetype, field}. */
  async upload(url, files, options = {}) {
    const params = { url: String(url), files: await Promise.all((files || []).map(fileSpec)) };
    for (const [k, v] of Object.entries(options)) if (!OWN.has(k) && v !== undefined) params[k] = v;
    if (options.method) params.method = options.method;
    if (options.headers) params.headers = headersObject(options.headers);
    return new Response(await this._job('upload', params, options));
  }

  /** attach(jobId, {signal, onProgress}): wait for a job of any connection; an abort leaves
   * the job running. */
  async attach(jobId, options = {}) {
    const params = { jobId, progress: Boolean(options.onProgress || options.onRetrying) };
    return new Response(await this._job('attach', params, { ...options, owns: false }));
  }

  async ping() { return this.call('ping'); }
  async status() { return this.call('getStatus'); }
  async cancel(jobId) { return (await this.call('cancel', { jobId })).cancelled; }
  async listJobs() { return (await this.call('listJobs')).jobs; }
  async getJob(jobId) { return this.call('getJob', { jobId }); }
  async setAuth(host, type, fields = {}) { return this.call('setAuth', { host, type, ...fields }); }
  async getAuth() { return (await this.call('getAuth')).rules; }
  async addStub(stub) { return (await this.call('addStub', stub)).stubId; }
  async getStubs(set) { return this.call('getStubs', set === undefined ? {} : { set }); }
  async removeStubs({ set, stubId } = {}) {
    const p = {};
    if (set !== undefined) p.set = set;
    if (stubId !== undefined) p.stubId = stubId;
    return (await this.call('removeStubs', p)).removed;
  }
  async setStubMode(set, onMiss) { return this.call('setStubMode', { set, onMiss }); }
  async loadStubs(set, har) { return (await this.call('loadStubs', { set, har: path.resolve(har) })).loaded; }
  async recordStubs(set, har) { return this.call('recordStubs', { set, har: path.resolve(har) }); }

  get closed() { return this._closedError !== null; }

  /** Closes the connection (the daemon cancels this connection's jobs unless detached). */
  close() {
    if (!this._closedError) this._closedError = new ConnectionClosed('the client was closed');
    if (this._socket) this._socket.destroy();
  }
}

/** Bytes a streamed body may hold unread before its connection stops being read. */
const STREAM_HIGH_WATER = 1 << 20;
/** Events an EventStream may hold unread before its connection stops being read. */
const EVENTS_HIGH_WATER = 256;

/** A 'data' handler that calls onLine(buffer) for each complete, non-empty line. */
function lineSplitter(onLine) {
  let chunks = [];
  return (data) => {
    let start = 0;
    let nl;
    while ((nl = data.indexOf(10, start)) !== -1) {
      chunks.push(data.subarray(start, nl));
      const line = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      chunks = [];
      start = nl + 1;
      if (line.length) onLine(line);
    }
    if (start < data.length) chunks.push(data.subarray(start));
  };
}

/**
 * One streamed job on a connection of its own. Its messages go to the handlers: head
 * (responseHead params), chunk (a Buffer), line, event (sseEvent params), progress,
 * retrying, then end (the result) or error (an Error). pause() stops reading the connection
 * (the daemon then pauses this transfer only); close() before the end cancels the job.
 */
class JobStream {
  constructor(socketPath, method, params, handlers) {
    this.h = handlers;
    this.done = false;
    this.sock = null;
    let resolved;
    try {
      resolved = checkSocketPath(socketPath);
    } catch (e) {
      queueMicrotask(() => this._fail(e));
      return;
    }
    let connected = false;
    const sock = net.createConnection(resolved);
    this.sock = sock;
    sock.once('connect', () => {
      connected = true;
      sock.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) + '\n');
    });
    sock.on('data', lineSplitter((line) => this._message(line)));
    let lastError = null;
    sock.on('error', (e) => { lastError = e; });
    sock.on('close', () => {
      this._fail(connected
        ? new ConnectionClosed('the daemon closed the connection before the answer')
        : new DaemonUnreachable(`cannot connect to fetchd at ${socketPath}: ${lastError ? lastError.message : 'closed'}`, socketPath));
    });
  }

  _message(line) {
    if (this.done) return;
    let m;
    try {
      m = JSON.parse(line.toString('utf8'));
    } catch {
      return;
    }
    if (!m || typeof m !== 'object' || Array.isArray(m)) return;
    if (m.method && !('id' in m)) {
      const p = m.params || {};
      try {
        switch (m.method) {
          case 'bodyChunk': this.h.chunk && this.h.chunk(Buffer.from(p.dataBase64 || '', 'base64')); break;
          case 'bodyLine': this.h.line && this.h.line(String(p.line)); break;
          case 'sseEvent': this.h.event && this.h.event(p); break;
          case 'responseHead': this.h.head && this.h.head(p); break;
          case 'progress': this.h.progress && this.h.progress(p); break;
          case 'retrying': this.h.retrying && this.h.retrying(p); break;
          default: break;
        }
      } catch (e) {
        this._fail(e);   // a callback threw: the job is cancelled (the connection closes)
      }
      return;
    }
    if (m.id !== 1) return;
    this.done = true;
    this.sock.destroy();
    if (m.error) this.h.error(errorFromAnswer(m.error));
    else this.h.end(m.result || {});
  }

  _fail(e) {
    if (this.done) return;
    this.done = true;
    if (this.sock) this.sock.destroy();
    this.h.error(e);
  }

  pause() { if (this.sock && !this.done) this.sock.pause(); }
  resume() { if (this.sock && !this.done) this.sock.resume(); }

  /** Closes the connection; a job still running is cancelled by the daemon. */
  close() {
    if (this.done) return;
    this.done = true;
    if (this.sock) this.sock.destroy();
  }
}

/**
 * Server-Sent Events (client.events(url)): an async iterator of {event, data, id, jobId}.
 * `response` is a promise of the answer's head (a Response; the latest connection's once the
 * daemon reconnected); `lastEventId` the last id seen; `result` ({events, reconnects, ...})
 * once the stream ended. The stream ends when the server ends it (a 204, or an answer that
 * is not an event stream); an answer of status 400 or above then throws HTTPStatusError
 * from the loop. Breaking out of the loop, close() or the init's signal cancels the job.
 */
class EventStream {
  constructor(client, url, init) {
    this._queue = [];
    this._wake = null;
    this._done = false;
    this._error = null;
    this.lastEventId = null;
    this.result = null;
    this._response = null;
    let resolveHead;
    let rejectHead;
    this.response = new Promise((resolve, reject) => { resolveHead = resolve; rejectHead = reject; });
    this._rejectHead = rejectHead;
    this.response.catch(() => {});   // read through the loop, not necessarily here
    const { signal, onProgress, onRetrying } = init;
    const finish = (e) => {
      if (this._done) return;
      this._done = true;
      this._error = e;
      if (e && !this._response) rejectHead(e);
      if (this._wake) this._wake();
    };
    const start = fetchParams(url, init).then(({ method, params }) => {
      if (this._done) return;
      params.responseBody = 'events';
      client._streamParams(params, onProgress, onRetrying);
      this._job = new JobStream(client.socketPath, method, params, {
        head: (head) => {
          if (this._response) {
            this._response.status = head.status;
            Object.assign(this._response.result, head);
            return;
          }
          this._response = new Response(head);
          resolveHead(this._response);
        },
        event: (ev) => {
          this._queue.push(ev);
          if (this._queue.length >= EVENTS_HIGH_WATER) this._job.pause();
          if (this._wake) this._wake();
        },
        progress: onProgress,
        retrying: onRetrying,
        end: (result) => {
          this.result = result;
          if (this._response) Object.assign(this._response.result, result);
          else {
            this._response = new Response(result);
            resolveHead(this._response);
          }
          const r = this._response;
          finish(r.status >= 400
            ? new HTTPStatusError(`${r.status} ${r.status < 500 ? 'Client Error' : 'Server Error'}: ${r.statusText} for url: ${r.url}`, r)
            : null);
        },
        error: finish,
      });
    }, finish);
    start.catch(() => {});
    if (signal) {
      if (signal.aborted) finish(signal.reason);
      else signal.addEventListener('abort', () => { this.close(); finish(signal.reason); }, { once: true });
    }
  }

  [Symbol.asyncIterator]() { return this; }

  async next() {
    for (;;) {
      if (this._queue.length) {
        const ev = this._queue.shift();
        if (this._queue.length < EVENTS_HIGH_WATER / 2 && this._job) this._job.resume();
        if (ev.id !== undefined && ev.id !== null) this.lastEventId = ev.id;
        return { value: ev, done: false };
      }
      if (this._done) {
        const e = this._error;
        this._error = null;
        if (e) throw e;
        return { value: undefined, done: true };
      }
      await new Promise((resolve) => { this._wake = resolve; });
      this._wake = null;
    }
  }

  async return() {
    this.close();
    return { value: undefined, done: true };
  }

  /** Stops the stream: the job is cancelled, the loop ends. */
  close() {
    if (this._job) this._job.close();
    if (!this._done) {
      this._done = true;
      if (!this._response) this._rejectHead(new ConnectionClosed('the event stream was closed'));
      if (this._wake) this._wake();
    }
  }
}

/** Connects a Client: `const client = await connect({socketPath, rpcTimeout})`. */
function connect(options) {
  return new Client(options).connect();
}

module.exports = {
  Client, connect, Response, EventStream, defaultSocketPath, checkSocketPath, errorFromAnswer,
  FetchdError, DaemonUnreachable, UntrustedPeer, ConnectionClosed, Timeout, RPCError,
  ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError, TransportError,
  ServerUnreachable, RequestTimeout, TooManyRedirects, Cancelled, FileError, NotAllowed,
  Overloaded, MessageTooLarge, HTTPStatusError,
};
