/*
 * fetchd.h - libfetchd, a C client for fetchd (HTTP over JSON-RPC 2.0 on a Unix socket).
 *
 * fetchd is a daemon that does HTTP for other programs. This library connects to its socket,
 * sends JSON-RPC requests (built with jansson), matches the answers to them by id, and hands
 * server notifications (progress, retrying) to a callback. The wire contract is
 * docs/protocol.md of the fetchd repository; every method there can be called with
 * fetchd_call(); the common ones have blocking conveniences below.
 *
 * Build flags: `pkg-config --cflags --libs fetchd` (links jansson and pthread).
 *
 * OWNERSHIP
 *   - json_t parameters passed *in* are borrowed: the library takes its own reference if it
 *     needs one; the caller still owns (and must json_decref) what it passed.
 *   - json_t results passed *out* (json_t **result) are new references: json_decref them.
 *   - Strings passed out as `char *` are malloc'd: free() them, unless a *_free function is
 *     named for the structure that holds them.
 *   - A fetchd_error filled by a call owns its message and data: fetchd_error_clear() it.
 *     Passing NULL for a fetchd_error * is allowed everywhere (the details are dropped).
 *
 * THREAD SAFETY
 *   One fetchd_client may be used by any number of threads at once: sends are serialised,
 *   and a reader thread owned by the client delivers each answer to the thread waiting for
 *   it. The notification callback runs on that reader thread; it must not call blocking
 *   functions of the same client (they would wait for an answer only the reader thread can
 *   deliver: they fail with FETCHD_ERR_WOULD_DEADLOCK instead). It may call fetchd_notify()
 *   and fetchd_cancel_nowait(). fetchd_close() must not race with other calls on the client.
 *   jansson values are not thread-safe: do not share one json_t between threads without
 *   your own locking (results returned to a thread are that thread's to use).
 *
 * ERRORS
 *   Every call returns a fetchd_status: FETCHD_OK, or what went wrong. FETCHD_ERR_RPC means
 *   the daemon answered with a JSON-RPC error: err->code is its code (see fetchd_rpc_code),
 *   err->message its message, err->data its data object (e.g. {"kind": "connect", ...} for
 *   -32001). An HTTP status is never an error: a 404 is a successful fetch with status 404.
 */
#ifndef FETCHD_H
#define FETCHD_H

#include <stddef.h>
#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FETCHD_VERSION "0.2.0"

/* What a libfetchd call returned. */
typedef enum fetchd_status {
    FETCHD_OK = 0,
    FETCHD_ERR_CONNECT = 1,         /* the socket could not be reached (no daemon?) */
    FETCHD_ERR_CLOSED = 2,          /* the connection ended before the answer came */
    FETCHD_ERR_IO = 3,              /* a read or write on the socket failed */
    FETCHD_ERR_PROTOCOL = 4,        /* the daemon sent something that is not valid JSON-RPC */
    FETCHD_ERR_RPC = 5,             /* the daemon answered with a JSON-RPC error: see code */
    FETCHD_ERR_INVALID_ARGUMENT = 6,/* a NULL or malformed argument */
    FETCHD_ERR_NO_MEMORY = 7,
    FETCHD_ERR_WOULD_DEADLOCK = 8,  /* a blocking call from the notification callback */
    FETCHD_ERR_TIMEOUT = 9,         /* no answer within the client's timeout */
    FETCHD_ERR_UNTRUSTED_PEER = 10  /* the socket is served by another user (not ours, not
                                     * root): nothing was sent; see fetchd_connect */
} fetchd_status;

/* The JSON-RPC error codes fetchd answers with (fetchd_error.code when FETCHD_ERR_RPC). */
typedef enum fetchd_rpc_code {
    FETCHD_RPC_PARSE_ERROR = -32700,
    FETCHD_RPC_INVALID_REQUEST = -32600,
    FETCHD_RPC_METHOD_NOT_FOUND = -32601,
    FETCHD_RPC_INVALID_PARAMS = -32602,     /* data: {"field", "detail"} */
    FETCHD_RPC_INTERNAL_ERROR = -32603,
    FETCHD_RPC_TRANSPORT = -32001,          /* data: {"jobId", "kind", "detail", "attempts"} */
    FETCHD_RPC_CANCELLED = -32002,          /* data: {"jobId", "by"} */
    FETCHD_RPC_FILE_ERROR = -32003,         /* data: {"path", "detail"} */
    FETCHD_RPC_NOT_ALLOWED = -32004,        /* data: {"detail"} */
    FETCHD_RPC_OVERLOADED = -32005,         /* data: {"limit"} */
    FETCHD_RPC_MESSAGE_TOO_LARGE = -32006   /* data: {"limit"} */
} fetchd_rpc_code;

/* Details of a failed call. Zero-initialise it (fetchd_error err = {0};) before first use;
 * a call overwrites it (clearing the old contents) only when it fails. */
typedef struct fetchd_error {
    fetchd_status status;   /* same as the call's return value */
    int code;               /* JSON-RPC error code for FETCHD_ERR_RPC, else 0 */
    char *message;          /* malloc'd, human-readable; NULL when there is no error */
    json_t *data;           /* the error's data member (owned reference) or NULL */
} fetchd_error;

/* Frees the message and data of err and zeroes it. Safe on a zeroed or NULL err. */
void fetchd_error_clear(fetchd_error *err);

/* A short fixed description of a status ("cannot connect", ...). Never NULL; do not free. */
const char *fetchd_status_string(fetchd_status status);

/* A string member of err->data (e.g. "kind", "by", "field", "path", "detail"), or NULL.
 * Borrowed: valid until fetchd_error_clear(err). */
const char *fetchd_error_data_string(const fetchd_error *err, const char *key);

/* An open connection to fetchd. Opaque. */
typedef struct fetchd_client fetchd_client;

/* Called with each notification the daemon sends (method "progress" or "retrying"; params
 * is the notification's params object, borrowed for the duration of the call). Runs on the
 * client's reader thread; see THREAD SAFETY. */
typedef void (*fetchd_notification_fn)(const char *method, json_t *params, void *user_data);

/* Writes the socket path by the daemon's rules into buf (size bytes): explicit if not NULL,
 * else $FETCHD_SOCKET, else $XDG_RUNTIME_DIR/fetchd.sock, else /tmp/fetchd-<uid>/fetchd.sock
 * (a directory the daemon creates with mode 0700).
 * Returns FETCHD_OK, or FETCHD_ERR_INVALID_ARGUMENT when buf is too small. */
fetchd_status fetchd_socket_path(const char *explicit_path, char *buf, size_t size);

/* Connects to the daemon at socket_path (NULL: by the rules of fetchd_socket_path) and
 * starts the client's reader thread. On success *out is a client to fetchd_close().
 * Before anything is sent, the listening process's uid is read with SO_PEERCRED: unless it
 * is this process's uid or root (0), the connection is closed and FETCHD_ERR_UNTRUSTED_PEER
 * returned, with a message naming the socket and the owner's uid (someone else may have
 * taken the socket path first). FETCHD_ERR_CONNECT: no daemon could be reached. */
fetchd_status fetchd_connect(const char *socket_path, fetchd_client **out, fetchd_error *err);

/* Closes the connection, stops the reader thread and frees the client. The daemon cancels
 * this connection's jobs unless they were started with "detach": true. NULL is a no-op. */
void fetchd_close(fetchd_client *client);

/* Sets the notification callback (NULL: notifications are dropped). Thread-safe. */
void fetchd_set_notification_callback(fetchd_client *client, fetchd_notification_fn fn,
                                      void *user_data);

/* Sets how long blocking calls wait for an answer, in milliseconds (0, the default: as long
 * as the daemon takes; its own "timeout" parameter bounds HTTP transfers). */
void fetchd_set_timeout(fetchd_client *client, long timeout_ms);

/* Sends request `method` with `params` (an object or array, borrowed; NULL: none) and waits
 * for its answer. On FETCHD_OK, *result (if result is not NULL) is the answer's result, a new
 * reference. On FETCHD_ERR_RPC, err holds the daemon's code, message and data. */
fetchd_status fetchd_call(fetchd_client *client, const char *method, json_t *params,
                          json_t **result, fetchd_error *err);

/* Sends a notification (no id: the daemon never answers it). Does not wait; callable from
 * the notification callback. */
fetchd_status fetchd_notify(fetchd_client *client, const char *method, json_t *params,
                            fetchd_error *err);

/* ---- blocking conveniences ------------------------------------------------------------ */

/* ping: FETCHD_OK when the daemon answered "pong". */
fetchd_status fetchd_ping(fetchd_client *client, fetchd_error *err);

/* getStatus: *result is the status object (new reference). */
fetchd_status fetchd_get_status(fetchd_client *client, json_t **result, fetchd_error *err);

/* The outcome of fetchd_fetch / fetchd_fetch_ex. Free with fetchd_response_free(). */
typedef struct fetchd_response {
    int status;                 /* the HTTP status (404 is not an error) */
    const char *url;            /* the final URL after redirects (points into result) */
    const char *job_id;         /* points into result */
    unsigned char *body;        /* the body bytes (malloc'd, NUL-terminated; may contain NULs) */
    size_t body_len;            /* its length, without the terminating NUL */
    json_t *headers;            /* {lowercase name: value} (borrowed from result) */
    json_t *result;             /* the whole result object (owned by the response) */
} fetchd_response;

/* Frees everything in *response (not the struct itself) and zeroes it. Safe on zeroed. */
void fetchd_response_free(fetchd_response *response);

/* A response header by name (case-insensitive), or NULL. Borrowed from response. */
const char *fetchd_response_header(const fetchd_response *response, const char *name);

/* Decodes base64 (padding optional) into a malloc'd, NUL-terminated buffer (*out_len bytes,
 * the NUL not counted); NULL when in is not base64 or memory ran out. */
unsigned char *fetchd_base64_decode(const char *in, size_t in_len, size_t *out_len);

/* GET url and wait. On FETCHD_OK *response is filled (body decoded from text or base64). */
fetchd_status fetchd_fetch(fetchd_client *client, const char *url, fetchd_response *response,
                           fetchd_error *err);

/* fetch with the full request model: params (borrowed) is the fetch params object, e.g.
 * {"url": ..., "method": "POST", "json": {...}, "headers": {...}, "timeout": 5}. */
fetchd_status fetchd_fetch_ex(fetchd_client *client, json_t *params, fetchd_response *response,
                              fetchd_error *err);

/* download url to the absolute path (params_extra, borrowed, may be NULL: more request-model
 * fields such as "overwrite" or "sha256"). *result (may be NULL) is the result object. */
fetchd_status fetchd_download(fetchd_client *client, const char *url, const char *path,
                              json_t *params_extra, json_t **result, fetchd_error *err);

/* cancel: *cancelled (may be NULL) is 1 when a live job was cancelled, 0 when it was unknown
 * or finished. */
fetchd_status fetchd_cancel(fetchd_client *client, const char *job_id, int *cancelled,
                            fetchd_error *err);

/* Sends cancel without waiting for the answer (which is dropped). Callable from the
 * notification callback. */
fetchd_status fetchd_cancel_nowait(fetchd_client *client, const char *job_id, fetchd_error *err);

/* listJobs: *jobs is the array of live jobs (new reference). */
fetchd_status fetchd_list_jobs(fetchd_client *client, json_t **jobs, fetchd_error *err);

/* getJob: *job (new reference) is {"jobId", "state", "durable", "restarts"} of a live job,
 * plus "result" or "error" once it has ended (the last 1,000 ended jobs are kept); an unknown
 * id is FETCHD_ERR_RPC with code -32602. */
fetchd_status fetchd_get_job(fetchd_client *client, const char *job_id, json_t **job, fetchd_error *err);

/* attach: waits for a job of any connection (a detached or durable one) and returns its
 * result, or its error, as the job's own request would; progress != 0 asks for its progress
 * notifications (to the client's notification callback). */
fetchd_status fetchd_attach(fetchd_client *client, const char *job_id, int progress, json_t **result,
                            fetchd_error *err);

/* setAuth: the auth rule of host ("name", "name:port" or "*.domain"); rule (borrowed) holds
 * "type" and its fields, e.g. {"type": "bearer", "tokenFile": "/run/user/1000/t"}, or
 * {"type": null} to remove the rule. The daemon then adds the credential to every request
 * for those hosts (see docs/auth.md). *result (may be NULL) is the rule as getAuth shows it,
 * never a secret, or {"host", "removed"}. */
fetchd_status fetchd_set_auth(fetchd_client *client, const char *host, json_t *rule, json_t **result,
                              fetchd_error *err);

/* getAuth: *rules is the array of rules (new reference): host, type, hasCredential,
 * expiresAt, lastError. */
fetchd_status fetchd_get_auth(fetchd_client *client, json_t **rules, fetchd_error *err);

/* ---- per-call progress callbacks, upload ---------------------------------------------- */

/* Called with each progress or retrying notification of the job a call started (params is
 * borrowed for the duration of the call: {"jobId", "receivedBytes", ...}). Unlike the
 * client-wide fetchd_notification_fn it runs on the thread that made the call, in order, all
 * before the call returns, so it may call any function of the client (fetchd_cancel, ...).
 * Return 0 to go on; anything else cancels the job (the call then usually returns
 * FETCHD_ERR_RPC with code FETCHD_RPC_CANCELLED, or the result if the job had finished). */
typedef int (*fetchd_progress_fn)(const char *method, json_t *params, void *user_data);

/* Runs the job method ("fetch", "download", "upload") with params (borrowed; not changed)
 * and waits for it. fn (may be NULL) gets the job's notifications as above; with fn,
 * "progress": true is sent unless params says otherwise. Without a "jobId" in params the
 * library makes a unique one. When fetchd_set_timeout's limit passes, the job is cancelled. */
fetchd_status fetchd_job_call(fetchd_client *client, const char *method, json_t *params,
                              fetchd_progress_fn fn, void *user_data, json_t **result,
                              fetchd_error *err);

/* fetchd_fetch_ex with a per-call progress callback. */
fetchd_status fetchd_fetch_progress(fetchd_client *client, json_t *params, fetchd_progress_fn fn,
                                    void *user_data, fetchd_response *response, fetchd_error *err);

/* fetchd_download with a per-call progress callback. The daemon streams the body to path. */
fetchd_status fetchd_download_progress(fetchd_client *client, const char *url, const char *path,
                                       json_t *params_extra, fetchd_progress_fn fn, void *user_data,
                                       json_t **result, fetchd_error *err);

/* upload: a multipart/form-data POST of the n_paths files at paths (absolute; streamed from
 * disk by the daemon), after the "files" entries params_extra may hold (inline "content",
 * "filename", "mimetype", "field"), with its "fields" and any request-model field ("method":
 * "PUT", "headers", "skipUnreadable"...). *response is the server's answer (body decoded);
 * response->result also has "failedFiles" and "sentBytes". A file that can't be read is
 * FETCHD_ERR_RPC with code FETCHD_RPC_FILE_ERROR and data.path naming it. */
fetchd_status fetchd_upload(fetchd_client *client, const char *url, const char *const *paths,
                            size_t n_paths, json_t *params_extra, fetchd_progress_fn fn,
                            void *user_data, fetchd_response *response, fetchd_error *err);

/* fetchd_attach with a per-call progress callback (fn NULL: no progress). A nonzero return
 * from fn cancels the job. */
fetchd_status fetchd_attach_progress(fetchd_client *client, const char *job_id, fetchd_progress_fn fn,
                                     void *user_data, json_t **result, fetchd_error *err);

/* ---- streaming bodies (docs/protocol.md, Streaming bodies) ---------------------------- */

/* fetchd_job_call with descriptors: the n_fds (at most 4) descriptors travel with the request
 * line (SCM_RIGHTS), as the protocol's "bodyFrom": "fd" and "bodyTo": "fd" want them (both:
 * bodyFrom's first). They stay the caller's: the daemon uses copies of its own, which it
 * closes when the job ends, and never changes their flags. */
fetchd_status fetchd_job_call_fds(fetchd_client *client, const char *method, json_t *params,
                                  const int *fds, size_t n_fds, fetchd_progress_fn fn,
                                  void *user_data, json_t **result, fetchd_error *err);

/* fetch (params borrowed, as fetchd_fetch_ex's) whose response body the daemon writes to fd
 * as it arrives ("bodyTo": "fd"): a file, a pipe, a socket, this process's stdout. The call
 * returns when the job has ended: response->body is empty, response->result has "bytes" and
 * "sha256" of what was written. Something must read a pipe meanwhile (another thread or
 * process): a reader that stops pauses the transfer. The reader gone (EPIPE): FETCHD_ERR_RPC,
 * code -32001, data.kind "write"; a failure after bytes were written is never retried
 * (data.streamed counts them). */
fetchd_status fetchd_fetch_to_fd(fetchd_client *client, json_t *params, int fd,
                                 fetchd_response *response, fetchd_error *err);

/* fetch whose request body the daemon reads from fd until EOF ("bodyFrom": "fd"), sent
 * chunked, or with Content-Length when params has "bodySize" (fewer bytes: -32001 kind
 * "read"). POST unless params says "method". */
fetchd_status fetchd_fetch_from_fd(fetchd_client *client, json_t *params, int fd,
                                   fetchd_response *response, fetchd_error *err);

/* Both (from_fd or to_fd -1: not given), with a per-call progress callback (fn may be NULL). */
fetchd_status fetchd_fetch_fds(fetchd_client *client, json_t *params, int from_fd, int to_fd,
                               fetchd_progress_fn fn, void *user_data, fetchd_response *response,
                               fetchd_error *err);

/* What fetchd_fetch_stream calls as the answer arrives. Any member may be NULL. Each runs on
 * the calling thread, in order, before fetchd_fetch_stream returns, and may call any function
 * of the client; returning nonzero cancels the job (the call then usually returns
 * FETCHD_ERR_RPC with code FETCHD_RPC_CANCELLED) and no callback is called after it. */
typedef struct fetchd_stream_callbacks {
    /* responseHead: the status and the whole notification params (borrowed): "headers"
     * {lowercase name: value}, "httpVersion", "url", "jobId". An event stream calls it again
     * for each reconnection. */
    int (*on_head)(int status, json_t *head, void *user_data);
    /* bodyChunk: the next len bytes of the body, decoded (borrowed until it returns). */
    int (*on_chunk)(const unsigned char *data, size_t len, void *user_data);
    /* bodyLine ("responseBody": "lines"): one line without its LF or CRLF, UTF-8, NUL-ended. */
    int (*on_line)(const char *line, size_t len, void *user_data);
    /* sseEvent ("responseBody": "events"): event (default "message"), data, and id (NULL
     * when the event carried none). */
    int (*on_event)(const char *event, const char *data, const char *id, void *user_data);
    /* progress and retrying notifications, as a fetchd_progress_fn (sets "progress": true). */
    fetchd_progress_fn on_progress;
} fetchd_stream_callbacks;

/* fetch with the body handed to callbacks as it arrives. "responseBody" defaults to "events"
 * when on_event is set, else "lines" when on_line is, else "stream" (bodyChunk). The job runs
 * on a connection of its own, read on this thread: a callback that takes its time pauses
 * this transfer only (the daemon stops reading from the server), never the client's other
 * calls. On FETCHD_OK *response holds the result (no body; "bytes", and "lines" or "events"
 * and "reconnects"). fetchd_set_timeout's limit bounds the whole call. */
fetchd_status fetchd_fetch_stream(fetchd_client *client, json_t *params,
                                  const fetchd_stream_callbacks *callbacks, void *user_data,
                                  fetchd_response *response, fetchd_error *err);

/* ---- stubs (docs/protocol.md, Stubs; docs/testing.md) -------------------------------- */

/* addStub: stub (borrowed) is its params, e.g. {"set": "t", "match": {"url": "..."},
 * "respond": {"status": 200, "json": {...}}}. *stub_id (may be NULL) is malloc'd: free() it. */
fetchd_status fetchd_add_stub(fetchd_client *client, json_t *stub, char **stub_id, fetchd_error *err);

/* getStubs of set (NULL: every set): *result {"stubs": [...], "misses": [...]} (new reference). */
fetchd_status fetchd_get_stubs(fetchd_client *client, const char *set, json_t **result, fetchd_error *err);

/* removeStubs: stub_id (in set if given), every stub of set, or (both NULL) every stub.
 * *removed (may be NULL) is how many. */
fetchd_status fetchd_remove_stubs(fetchd_client *client, const char *set, const char *stub_id,
                                  int *removed, fetchd_error *err);

/* setStubMode: on_miss is "error" or "network". */
fetchd_status fetchd_set_stub_mode(fetchd_client *client, const char *set, const char *on_miss,
                                   fetchd_error *err);

/* loadStubs: the HAR file har (absolute path) as stubs of set; *loaded (may be NULL). */
fetchd_status fetchd_load_stubs(fetchd_client *client, const char *set, const char *har, int *loaded,
                                fetchd_error *err);

/* recordStubs: set's misses go to the network and are recorded to it and to the HAR file har. */
fetchd_status fetchd_record_stubs(fetchd_client *client, const char *set, const char *har,
                                  fetchd_error *err);

#ifdef __cplusplus
}
#endif
#endif /* FETCHD_H */
