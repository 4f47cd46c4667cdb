// Type declarations for fetchd-client (hand-written; the package has no build step).
/// <reference types="node" />
import { EventEmitter } from 'node:events';
import { ReadableStream } from 'node:stream/web';

/** A progress notification: the counts are for the current attempt. */
export interface ProgressEvent {
  jobId: string;
  sentBytes: number;
  totalSendBytes: number | null;
  receivedBytes: number;
  totalReceiveBytes: number | null;
}

/** A retrying notification, sent before each wait to retry. */
export interface RetryingEvent {
  jobId: string;
  /** The attempt about to be made (2 for the first retry). */
  attempt: number;
  delayMs: number;
  reason: string;
}

/** The protocol's result object of fetch, download and upload (docs/protocol.md). */
export interface Result {
  jobId: string;
  status: number;
  url: string;
  headers: Record<string, string>;
  bytes: number;
  attempts: number;
  redirects: number;
  elapsedMs: number;
  httpVersion?: string;
  body?: string;
  bodyBase64?: string;
  json?: unknown;
  /** download */
  path?: string;
  sha256?: string | null;
  resumed?: boolean;
  /** upload */
  failedFiles?: string[];
  sentBytes?: number;
  /** responseBody "lines": how many bodyLine notifications were sent */
  lines?: number;
  /** events: how many sseEvent notifications, and how many times the daemon reconnected */
  events?: number;
  reconnects?: number;
  [field: string]: unknown;
}

/** The head of a streamed answer (the responseHead notification). */
export interface ResponseHead {
  jobId: string;
  status: number;
  headers: Record<string, string>;
  httpVersion: string;
  url: string;
}

/** One Server-Sent Event, parsed by the daemon by the WHATWG rules (an sseEvent notification). */
export interface ServerSentEvent {
  jobId: string;
  /** "message" unless the server named it */
  event: string;
  /** its data lines joined by "\n" */
  data: string;
  id?: string;
}

export type HeadersInit = Record<string, string | null> | Headers | Map<string, string> | Array<[string, string]>;
export type QueryValue = string | number | boolean | Array<string | number | boolean>;

export interface JobOptions {
  /** Aborting cancels the job on the daemon; the promise rejects with signal.reason. */
  signal?: AbortSignal;
  onProgress?: (event: ProgressEvent) => void;
  onRetrying?: (event: RetryingEvent) => void;
  /** Seconds to wait for the answer before rejecting with Timeout (and cancelling the job). */
  rpcTimeout?: number;
  headers?: HeadersInit;
  /** Per-attempt limit in seconds (protocol `timeout`). */
  timeout?: number;
  connectTimeout?: number;
  maxTime?: number;
  retry?: boolean | { maxAttempts?: number; maxInterval?: number; statuses?: number[] };
  maxRedirects?: number;
  cookieJar?: string | false;
  jobId?: string;
  detach?: boolean;
  comment?: string;
  stubs?: string;
  /** Any other protocol field of the request model. */
  [field: string]: unknown;
}

export interface FetchInit extends JobOptions {
  method?: string;
  /** A string, bytes, URLSearchParams (a form), a Blob, or FormData (a multipart upload). */
  body?: string | ArrayBuffer | ArrayBufferView | URLSearchParams | Blob | FormData | null;
  /** Any JSON value, sent as the body with Content-Type application/json. */
  json?: unknown;
  query?: Record<string, QueryValue> | URLSearchParams;
  /** 'stream' and 'lines' resolve at the answer's head, with `body` streaming as it arrives
   * (`stream: true` is 'stream'). For 'events' use client.events(). */
  responseBody?: 'auto' | 'text' | 'base64' | 'json' | 'none' | 'stream' | 'lines';
  /** Resolve as soon as the head is final and stream the body (responseBody 'stream'). */
  stream?: boolean;
  maxBodyBytes?: number;
}

/** client.events() takes fetch's options (a body or json makes it a POST). */
export type EventsInit = Omit<FetchInit, 'responseBody' | 'stream' | 'maxBodyBytes'>;

export interface DownloadOptions extends JobOptions {
  overwrite?: boolean;
  resume?: boolean;
  sha256?: string;
  durable?: boolean;
  fsync?: boolean;
}

export interface FileSpec {
  path?: string;
  content?: string | ArrayBuffer | ArrayBufferView | Blob;
  contentBase64?: string;
  filename?: string;
  mimetype?: string;
  field?: string;
}

export interface UploadOptions extends JobOptions {
  method?: string;
  fields?: Record<string, string>;
  skipUnreadable?: boolean;
  durable?: boolean;
}

/** A fetch-like response over the protocol's result. */
export class Response {
  readonly result: Result;
  readonly status: number;
  readonly statusText: string;
  /** True for 2xx (as fetch's Response). */
  readonly ok: boolean;
  readonly url: string;
  readonly redirected: boolean;
  readonly jobId: string;
  readonly headers: Headers;
  /** The body as a web ReadableStream (`for await (const chunk of res.body)`,
   * `Readable.fromWeb(res.body)`): as it arrives for a streamed fetch, else the bytes that
   * came in the answer. Cancelling it cancels a job still running. */
  readonly body: ReadableStream<Uint8Array>;
  bodyUsed: boolean;
  /** The body line by line, without LF or CRLF, as it arrives. */
  lines(): AsyncIterableIterator<string>;
  text(): Promise<string>;
  json<T = unknown>(): Promise<T>;
  arrayBuffer(): Promise<ArrayBuffer>;
  bytes(): Promise<Uint8Array>;
  /** The body bytes; a streamed body only once it was read (else it throws TypeError). */
  bytesSync(): Buffer;
  /** Throws HTTPStatusError for 4xx and 5xx; returns this otherwise. */
  raiseForStatus(): this;
}

/** client.events(url): Server-Sent Events as an async iterator. Breaking out of the loop,
 * close() or the init's signal cancels the job. An answer of status 400 or above throws
 * HTTPStatusError from the loop once the stream has ended. */
export class EventStream implements AsyncIterableIterator<ServerSentEvent> {
  /** The answer's head (the latest connection's after a reconnection). */
  readonly response: Promise<Response>;
  /** The last event id seen. */
  readonly lastEventId: string | null;
  /** The job's result once the stream has ended. */
  readonly result: Result | null;
  [Symbol.asyncIterator](): this;
  next(): Promise<IteratorResult<ServerSentEvent, undefined>>;
  return(): Promise<IteratorResult<ServerSentEvent, undefined>>;
  close(): void;
}

export interface ClientOptions {
  /** Default: $FETCHD_SOCKET, else $XDG_RUNTIME_DIR/fetchd.sock, else /tmp/fetchd-<uid>/fetchd.sock. */
  socketPath?: string;
  /** Default seconds to wait for any answer. */
  rpcTimeout?: number;
}

export class Client extends EventEmitter {
  constructor(options?: ClientOptions);
  readonly socketPath: string;
  rpcTimeout?: number;
  readonly closed: boolean;
  connect(): Promise<this>;
  close(): void;
  call<T = unknown>(method: string, params?: object | unknown[], options?: { rpcTimeout?: number }): Promise<T>;
  notify(method: string, params?: object | unknown[]): void;
  fetch(url: string | URL, init?: FetchInit): Promise<Response>;
  /** Server-Sent Events from url (responseBody "events"); the daemon reconnects by itself. */
  events(url: string | URL, init?: EventsInit): EventStream;
  download(url: string | URL, path: string, options?: DownloadOptions): Promise<Response>;
  upload(url: string | URL, files: Array<string | FileSpec>, options?: UploadOptions): Promise<Response>;
  attach(jobId: string, options?: { signal?: AbortSignal; onProgress?: (e: ProgressEvent) => void; onRetrying?: (e: RetryingEvent) => void; rpcTimeout?: number }): Promise<Response>;
  ping(): Promise<'pong'>;
  status(): Promise<Record<string, unknown>>;
  cancel(jobId: string): Promise<boolean>;
  listJobs(): Promise<Array<Record<string, unknown>>>;
  getJob(jobId: string): Promise<{ jobId: string; state: string; durable: boolean; restarts: number; result?: Result; error?: object }>;
  setAuth(host: string, type: 'bearer' | 'basic' | 'oauth2' | 'helper' | 'awsSigV4' | null, fields?: Record<string, unknown>): Promise<Record<string, unknown>>;
  getAuth(): Promise<Array<Record<string, unknown>>>;
  addStub(stub: { set?: string; match?: object; respond?: object; respondSequence?: object[]; fault?: 'reset' | 'timeout' | 'refused'; priority?: number; times?: number }): Promise<string>;
  getStubs(set?: string): Promise<{ stubs: Array<Record<string, unknown>>; misses: Array<Record<string, unknown>> }>;
  removeStubs(options?: { set?: string; stubId?: string }): Promise<number>;
  setStubMode(set: string, onMiss: 'error' | 'network'): Promise<{ set: string; onMiss: string }>;
  loadStubs(set: string, har: string): Promise<number>;
  recordStubs(set: string, har: string): Promise<{ set: string; har: string }>;

  on(event: 'progress', listener: (e: ProgressEvent) => void): this;
  on(event: 'retrying', listener: (e: RetryingEvent) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export function connect(options?: ClientOptions): Promise<Client>;
export function defaultSocketPath(explicit?: string): string;
/** fetchctl's path check (Node cannot read SO_PEERCRED); returns the resolved path. */
export function checkSocketPath(socketPath: string): string;
export function errorFromAnswer(error: unknown): RPCError;

export class FetchdError extends Error {
  code?: number;
  data?: any;
}
export class DaemonUnreachable extends FetchdError { socketPath: string; }
export class UntrustedPeer extends DaemonUnreachable {}
export class ConnectionClosed extends FetchdError {}
export class Timeout extends FetchdError {}
export class RPCError extends FetchdError { readonly detail?: string; }
export class ParseError extends RPCError {}
export class InvalidRequest extends RPCError {}
export class MethodNotFound extends RPCError {}
export class InvalidParams extends RPCError { readonly field?: string; }
export class InternalError extends RPCError {}
export class TransportError extends RPCError {
  readonly kind?: string;
  readonly jobId?: string;
  readonly attempts?: number;
}
export class ServerUnreachable extends TransportError {}
export class RequestTimeout extends TransportError {}
export class TooManyRedirects extends TransportError {}
export class Cancelled extends RPCError {
  readonly by?: 'cancel' | 'disconnect' | 'shutdown';
  readonly jobId?: string;
}
export class FileError extends RPCError { readonly path?: string; }
export class NotAllowed extends RPCError {}
export class Overloaded extends RPCError { readonly limit?: number; }
export class MessageTooLarge extends RPCError { readonly limit?: number; }
export class HTTPStatusError extends FetchdError {
  response: Response;
  status: number;
}
