/* libfetchd: a C client for fetchd. See fetchd.h for the API, ownership and threading rules.
 *
 * Design: one socket per client; a reader thread splits the byte stream into lines, parses
 * each as JSON, hands answers to the waiting caller by id (a list of pending calls guarded by
 * one mutex, with one condition variable broadcast on every answer) and notifications to the
 * user's callback. Sends are serialised by their own mutex so a long write never blocks the
 * reader's bookkeeping. */
#define _GNU_SOURCE
#include "fetchd.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Answers can be far longer than the daemon's 16 MiB request limit (a 64 MiB body sent as
 * base64 is ~86 MiB): accept lines up to 1 GiB, then give up on the connection. */
#define FETCHD_MAX_LINE ((size_t)1 << 30)
/* First size of the read buffer; it doubles as needed. */
#define FETCHD_READ_CHUNK ((size_t)64 * 1024)

/* A notification queued for the caller waiting on its job (per-call progress callbacks). */
struct note {
    json_t *msg;                /* the notification (owned) */
    struct note *next;
};

struct pending {
    json_int_t id;
    json_t *answer;             /* the answer object once it came (owned) */
    const char *job_id;         /* the job whose notifications go to fn (borrowed), or NULL */
    fetchd_progress_fn fn;
    struct note *notes, *notes_tail;
    struct pending *next;
};

struct fetchd_client {
    int fd;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* for a stream's own connection */
    pthread_t reader;
    pthread_mutex_t lock;       /* guards everything below except fd */
    pthread_cond_t answered;    /* broadcast on every answer and on close */
    pthread_mutex_t send_lock;  /* one message on the wire at a time */
    struct pending *pending;
    json_int_t next_id;
    int closed;
    fetchd_notification_fn callback;
    void *callback_data;
    long timeout_ms;
};

/* ------------------------------------------------------------------------------ errors */

const char *fetchd_status_string(fetchd_status status) {
    switch (status) {
    case FETCHD_OK: return "ok";
    case FETCHD_ERR_CONNECT: return "cannot connect to fetchd";
    case FETCHD_ERR_CLOSED: return "connection to fetchd closed";
    case FETCHD_ERR_IO: return "i/o error on the fetchd socket";
    case FETCHD_ERR_PROTOCOL: return "malformed message from fetchd";
    case FETCHD_ERR_RPC: return "fetchd answered with an error";
    case FETCHD_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FETCHD_ERR_NO_MEMORY: return "out of memory";
    case FETCHD_ERR_WOULD_DEADLOCK: return "blocking call from the notification callback";
    case FETCHD_ERR_TIMEOUT: return "no answer from fetchd in time";
    case FETCHD_ERR_UNTRUSTED_PEER: return "the fetchd socket is served by another user";
    }
    return "unknown status";
}

void fetchd_error_clear(fetchd_error *err) {
    if (!err)
        return;
    free(err->message);
    json_decref(err->data);
    memset(err, 0, sizeof *err);
}

const char *fetchd_error_data_string(const fetchd_error *err, const char *key) {
    if (!err || !key || !json_is_object(err->data))
        return NULL;
    return json_string_value(json_object_get(err->data, key));
}

/* Fills err (if any) and returns status. data is borrowed. */
static fetchd_status fail(fetchd_error *err, fetchd_status status, int code, json_t *data,
                          const char *fmt, ...) {
    if (!err)
        return status;
    fetchd_error_clear(err);
    err->status = status;
    err->code = code;
    err->data = data ? json_incref(data) : NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&err->message, fmt, ap) < 0)
        err->message = NULL;
    va_end(ap);
    return status;
}

/* ---------------------------------------------------------------------------- connect */

fetchd_status fetchd_socket_path(const char *explicit_path, char *buf, size_t size) {
    int n;
    const char *env;
    if (!buf || size == 0)
        return FETCHD_ERR_INVALID_ARGUMENT;
    if (explicit_path && *explicit_path)
        n = snprintf(buf, size, "%s", explicit_path);
    else if ((env = getenv("FETCHD_SOCKET")) && *env)
        n = snprintf(buf, size, "%s", env);
    else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
        n = snprintf(buf, size, "%s/fetchd.sock", env);
    else
        n = snprintf(buf, size, "/tmp/fetchd-%u/fetchd.sock", (unsigned)getuid());
    return (n < 0 || (size_t)n >= size) ? FETCHD_ERR_INVALID_ARGUMENT : FETCHD_OK;
}

static void *reader_main(void *arg);

/* Connects a socket to the daemon at path and checks who serves it (SO_PEERCRED) before
 * anything is sent: *fd_out is the connected socket. */
static fetchd_status open_socket(const char *path, int *fd_out, fetchd_error *err) {
    struct sockaddr_un addr;
    *fd_out = -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail(err, FETCHD_ERR_CONNECT, 0, NULL, "socket: %s", strerror(errno));
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int e = errno;
        close(fd);
        return fail(err, FETCHD_ERR_CONNECT, 0, NULL, "cannot connect to fetchd at %s: %s",
                    path, strerror(e));
    }
    /* Nothing is sent to a listener of another user: a socket path can be taken first. */
    struct ucred peer;
    socklen_t peer_len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) < 0) {
        int e = errno;
        close(fd);
        return fail(err, FETCHD_ERR_CONNECT, 0, NULL, "cannot read the peer of %s (SO_PEERCRED): %s",
                    path, strerror(e));
    }
    if (peer.uid != getuid() && peer.uid != 0) {
        close(fd);
        return fail(err, FETCHD_ERR_UNTRUSTED_PEER, 0, NULL,
                    "refusing fetchd at %s: the socket is served by uid %u (pid %d), not by this "
                    "user (uid %u) or root; nothing was sent", path, (unsigned)peer.uid,
                    (int)peer.pid, (unsigned)getuid());
    }
    *fd_out = fd;
    return FETCHD_OK;
}

fetchd_status fetchd_connect(const char *socket_path, fetchd_client **out, fetchd_error *err) {
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    if (!out)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "out is NULL");
    *out = NULL;
    if (fetchd_socket_path(socket_path, path, sizeof path) != FETCHD_OK)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "socket path too long");
    int fd;
    fetchd_status st = open_socket(path, &fd, err);
    if (st != FETCHD_OK)
        return st;

    fetchd_client *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    }
    c->fd = fd;
    memcpy(c->path, path, sizeof c->path);
    c->next_id = 1;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c->answered, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->send_lock, NULL);
    int rc = pthread_create(&c->reader, NULL, reader_main, c);
    if (rc != 0) {
        close(fd);
        pthread_cond_destroy(&c->answered);
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->send_lock);
        free(c);
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "pthread_create: %s", strerror(rc));
    }
    *out = c;
    return FETCHD_OK;
}

static void free_notes(struct pending *p) {
    while (p->notes) {
        struct note *n = p->notes;
        p->notes = n->next;
        json_decref(n->msg);
        free(n);
    }
    p->notes_tail = NULL;
}

void fetchd_close(fetchd_client *c) {
    if (!c)
        return;
    shutdown(c->fd, SHUT_RDWR); /* wakes the reader: recv returns 0 */
    pthread_join(c->reader, NULL);
    close(c->fd);
    /* Normally empty: calls must not race with close. Free whatever is left. */
    struct pending *p = c->pending;
    while (p) {
        struct pending *next = p->next;
        json_decref(p->answer);
        free_notes(p);
        free(p);
        p = next;
    }
    pthread_cond_destroy(&c->answered);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->send_lock);
    free(c);
}

void fetchd_set_notification_callback(fetchd_client *c, fetchd_notification_fn fn, void *data) {
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->callback = fn;
    c->callback_data = data;
    pthread_mutex_unlock(&c->lock);
}

void fetchd_set_timeout(fetchd_client *c, long timeout_ms) {
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    pthread_mutex_unlock(&c->lock);
}

/* ----------------------------------------------------------------------------- reader */

static void deliver_notification(fetchd_client *c, json_t *msg) {
    json_t *params = json_object_get(msg, "params");
    const char *job_id = json_string_value(json_object_get(params, "jobId"));
    pthread_mutex_lock(&c->lock);
    if (job_id) {
        for (struct pending *p = c->pending; p; p = p->next) {
            if (!p->fn || !p->job_id || strcmp(p->job_id, job_id) != 0)
                continue;
            /* The waiting caller runs its callback on its own thread (fetchd_job_call). */
            struct note *n = malloc(sizeof *n);
            if (n) {
                n->msg = json_incref(msg);
                n->next = NULL;
                if (p->notes_tail)
                    p->notes_tail->next = n;
                else
                    p->notes = n;
                p->notes_tail = n;
                pthread_cond_broadcast(&c->answered);
            }
            pthread_mutex_unlock(&c->lock);
            return;
        }
    }
    fetchd_notification_fn fn = c->callback;
    void *data = c->callback_data;
    pthread_mutex_unlock(&c->lock);
    if (fn)
        fn(json_string_value(json_object_get(msg, "method")), json_object_get(msg, "params"), data);
}

static void deliver_answer(fetchd_client *c, json_t *msg) {
    json_t *id = json_object_get(msg, "id");
    pthread_mutex_lock(&c->lock);
    struct pending *target = NULL;
    if (json_is_integer(id)) {
        for (struct pending *p = c->pending; p; p = p->next)
            if (p->id == json_integer_value(id) && !p->answer) {
                target = p;
                break;
            }
    } else if (json_is_null(id) && c->pending && !c->pending->next && !c->pending->answer) {
        /* An error the daemon could not tie to an id (-32700, -32006): with a single call
         * outstanding it can only be that one's. */
        target = c->pending;
    }
    if (target) {
        target->answer = json_incref(msg);
        pthread_cond_broadcast(&c->answered);
    }
    pthread_mutex_unlock(&c->lock);
}

static void dispatch(fetchd_client *c, json_t *msg) {
    if (json_is_array(msg)) { /* a batch answer */
        size_t i;
        json_t *item;
        json_array_foreach(msg, i, item) dispatch(c, item);
        return;
    }
    if (!json_is_object(msg))
        return;
    if (json_object_get(msg, "method") && !json_object_get(msg, "id"))
        deliver_notification(c, msg);
    else
        deliver_answer(c, msg);
}

static void *reader_main(void *arg) {
    fetchd_client *c = arg;
    size_t cap = FETCHD_READ_CHUNK, len = 0, scanned = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            if (cap >= FETCHD_MAX_LINE)
                break;
            char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                break;
            buf = bigger;
            cap *= 2;
        }
        ssize_t n = recv(c->fd, buf + len, cap - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(buf + scanned, '\n', len - scanned))) {
            size_t end = (size_t)(nl - buf);
            json_error_t jerr;
            json_t *msg = end > start
                ? json_loadb(buf + start, end - start, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr)
                : NULL;
            if (msg) {
                dispatch(c, msg);
                json_decref(msg);
            }
            start = scanned = end + 1;
        }
        if (start) {
            memmove(buf, buf + start, len - start);
            len -= start;
        }
        scanned = len;
    }
    free(buf);
    pthread_mutex_lock(&c->lock);
    c->closed = 1;
    pthread_cond_broadcast(&c->answered);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* ------------------------------------------------------------------------------ calls */

/* Writes len bytes of buf to the socket fd; the n_fds descriptors (may be 0) travel with the
 * first byte (SCM_RIGHTS), as the protocol's bodyFrom/bodyTo want them. 0, or an errno. */
static int write_all(int fd, const char *buf, size_t len, const int *fds, size_t n_fds) {
    size_t off = 0;
    if (n_fds > 0) {
        char control[CMSG_SPACE(sizeof(int) * 4)];
        if (n_fds > 4)
            return EINVAL;
        memset(control, 0, sizeof control);
        struct iovec iov = {(void *)buf, len};
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        ssize_t n;
        do
            n = sendmsg(fd, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
            return errno;
        off = (size_t)n;
    }
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        off += (size_t)n;
    }
    return 0;
}

/* msg as one line: a malloc'd buffer ended by a newline (not NUL-terminated); *len its size. */
static char *message_line(json_t *msg, size_t *len) {
    char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return NULL;
    *len = strlen(text) + 1;
    text[*len - 1] = '\n'; /* replaces the NUL: the buffer is sent by length */
    return text;
}

static fetchd_status send_message_fds(fetchd_client *c, json_t *msg, const int *fds, size_t n_fds,
                                      fetchd_error *err) {
    size_t len;
    char *text = message_line(msg, &len);
    if (!text)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "params cannot be encoded as JSON");
    fetchd_status st = FETCHD_OK;
    pthread_mutex_lock(&c->send_lock);
    int e = write_all(c->fd, text, len, fds, n_fds);
    pthread_mutex_unlock(&c->send_lock);
    if (e)
        st = fail(err, e == EPIPE || e == ECONNRESET ? FETCHD_ERR_CLOSED : FETCHD_ERR_IO,
                  0, NULL, "sending to fetchd failed: %s", strerror(e));
    free(text);
    return st;
}

static fetchd_status send_message(fetchd_client *c, json_t *msg, fetchd_error *err) {
    return send_message_fds(c, msg, NULL, 0, err);
}

static json_t *new_message(const char *method, json_t *params) {
    json_t *msg = json_object();
    if (!msg)
        return NULL;
    json_object_set_new(msg, "jsonrpc", json_string("2.0"));
    json_object_set_new(msg, "method", json_string(method));
    if (params)
        json_object_set(msg, "params", params);
    return msg;
}

static void unlink_pending(fetchd_client *c, struct pending *p) {
    for (struct pending **pp = &c->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

/* Turns an answer object into a status, *result and err. */
static fetchd_status take_answer(json_t *answer, json_t **result, fetchd_error *err) {
    json_t *error = json_object_get(answer, "error");
    if (error) {
        json_t *code = json_object_get(error, "code");
        const char *message = json_string_value(json_object_get(error, "message"));
        if (!json_is_integer(code))
            return fail(err, FETCHD_ERR_PROTOCOL, 0, error, "error answer without a code");
        return fail(err, FETCHD_ERR_RPC, (int)json_integer_value(code),
                    json_object_get(error, "data"), "%s", message ? message : "error");
    }
    json_t *res = json_object_get(answer, "result");
    if (!res)
        return fail(err, FETCHD_ERR_PROTOCOL, 0, NULL, "answer without result or error");
    if (result)
        *result = json_incref(res);
    return FETCHD_OK;
}

/* Sends method and waits for its answer. With fn, the notifications of job_id are handed to
 * fn on this thread, in order and all before the answer is taken; a nonzero return from fn,
 * or running out of time, cancels the job (without waiting). */
static fetchd_status call_internal(fetchd_client *c, const char *method, json_t *params,
                                   const int *fds, size_t n_fds, const char *job_id,
                                   fetchd_progress_fn fn, void *user_data, json_t **result,
                                   fetchd_error *err) {
    if (result)
        *result = NULL;
    if (!c || !method)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "client or method is NULL");
    if (pthread_equal(pthread_self(), c->reader))
        return fail(err, FETCHD_ERR_WOULD_DEADLOCK, 0, NULL,
                    "%s called from the notification callback would wait forever", method);
    struct pending *p = calloc(1, sizeof *p);
    json_t *msg = new_message(method, params);
    if (!p || !msg) {
        free(p);
        json_decref(msg);
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    }
    p->job_id = job_id;
    p->fn = fn;

    pthread_mutex_lock(&c->lock);
    if (c->closed) {
        pthread_mutex_unlock(&c->lock);
        free(p);
        json_decref(msg);
        return fail(err, FETCHD_ERR_CLOSED, 0, NULL, "the connection to fetchd is closed");
    }
    p->id = c->next_id++;
    p->next = c->pending;
    c->pending = p;
    long timeout_ms = c->timeout_ms;
    pthread_mutex_unlock(&c->lock);

    json_object_set_new(msg, "id", json_integer(p->id));
    fetchd_status st = send_message_fds(c, msg, fds, n_fds, err);
    json_decref(msg);

    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->lock);
    int timed_out = 0, stopped = 0;
    while (st == FETCHD_OK) {
        if (p->notes) {
            struct note *n = p->notes;
            p->notes = n->next;
            if (!p->notes)
                p->notes_tail = NULL;
            pthread_mutex_unlock(&c->lock);
            if (!stopped && fn(json_string_value(json_object_get(n->msg, "method")),
                               json_object_get(n->msg, "params"), user_data) != 0) {
                stopped = 1;
                fetchd_cancel_nowait(c, job_id, NULL);
            }
            json_decref(n->msg);
            free(n);
            pthread_mutex_lock(&c->lock);
            continue;
        }
        if (p->answer || c->closed || timed_out)
            break;
        if (timeout_ms > 0)
            timed_out = pthread_cond_timedwait(&c->answered, &c->lock, &deadline) == ETIMEDOUT;
        else
            pthread_cond_wait(&c->answered, &c->lock);
    }
    unlink_pending(c, p);
    free_notes(p);
    pthread_mutex_unlock(&c->lock);

    if (st == FETCHD_OK) {
        if (p->answer)
            st = take_answer(p->answer, result, err);
        else if (timed_out) {
            if (job_id)
                fetchd_cancel_nowait(c, job_id, NULL);
            st = fail(err, FETCHD_ERR_TIMEOUT, 0, NULL, "no answer to %s within %ld ms", method,
                      timeout_ms);
        } else
            st = fail(err, FETCHD_ERR_CLOSED, 0, NULL,
                      "the connection to fetchd closed before the answer to %s", method);
    }
    json_decref(p->answer);
    free(p);
    return st;
}

fetchd_status fetchd_call(fetchd_client *c, const char *method, json_t *params, json_t **result,
                          fetchd_error *err) {
    return call_internal(c, method, params, NULL, 0, NULL, NULL, NULL, result, err);
}

/* A shallow copy of params with a "jobId" (made here when params has none) and, with a
 * progress callback, "progress": true unless params says otherwise. */
static json_t *job_params(fetchd_client *c, json_t *params, int progress) {
    json_t *own = json_copy(params); /* shallow: only members are added */
    if (!own)
        return NULL;
    if (!json_is_string(json_object_get(own, "jobId"))) {
        char id[96];
        pthread_mutex_lock(&c->lock);
        long long n = (long long)c->next_id++;
        pthread_mutex_unlock(&c->lock);
        snprintf(id, sizeof id, "c-%ld-%p-%lld", (long)getpid(), (void *)c, n);
        json_object_set_new(own, "jobId", json_string(id));
    }
    if (progress && !json_object_get(own, "progress"))
        json_object_set_new(own, "progress", json_true());
    return own;
}

fetchd_status fetchd_job_call_fds(fetchd_client *c, const char *method, json_t *params,
                                  const int *fds, size_t n_fds, fetchd_progress_fn fn,
                                  void *user_data, json_t **result, fetchd_error *err) {
    if (result)
        *result = NULL;
    if (!c || !method || !json_is_object(params) || (n_fds && !fds) || n_fds > 4)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "client, method, params or fds invalid");
    for (size_t i = 0; i < n_fds; i++)
        if (fds[i] < 0)
            return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "fds[%zu] is not a descriptor", i);
    json_t *own = job_params(c, params, fn != NULL);
    if (!own)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    fetchd_status st = call_internal(c, method, own, fds, n_fds,
                                     json_string_value(json_object_get(own, "jobId")),
                                     fn, user_data, result, err);
    json_decref(own);
    return st;
}

fetchd_status fetchd_job_call(fetchd_client *c, const char *method, json_t *params,
                              fetchd_progress_fn fn, void *user_data, json_t **result,
                              fetchd_error *err) {
    return fetchd_job_call_fds(c, method, params, NULL, 0, fn, user_data, result, err);
}

fetchd_status fetchd_notify(fetchd_client *c, const char *method, json_t *params,
                            fetchd_error *err) {
    if (!c || !method)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "client or method is NULL");
    json_t *msg = new_message(method, params);
    if (!msg)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    fetchd_status st = send_message(c, msg, err);
    json_decref(msg);
    return st;
}

/* ------------------------------------------------------------------------ conveniences */

fetchd_status fetchd_ping(fetchd_client *c, fetchd_error *err) {
    json_t *result = NULL;
    fetchd_status st = fetchd_call(c, "ping", NULL, &result, err);
    if (st == FETCHD_OK && !(json_is_string(result) && !strcmp(json_string_value(result), "pong")))
        st = fail(err, FETCHD_ERR_PROTOCOL, 0, result, "ping was not answered with \"pong\"");
    json_decref(result);
    return st;
}

fetchd_status fetchd_get_status(fetchd_client *c, json_t **result, fetchd_error *err) {
    return fetchd_call(c, "getStatus", NULL, result, err);
}

static int b64_value(unsigned char ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
}

unsigned char *fetchd_base64_decode(const char *in, size_t in_len, size_t *out_len) {
    unsigned char *out = malloc(in_len / 4 * 3 + 4);
    if (!out)
        return NULL;
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < in_len; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0) {
            if (in[i] == '=')
                break;
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    out[n] = 0;
    *out_len = n;
    return out;
}

void fetchd_response_free(fetchd_response *r) {
    if (!r)
        return;
    free(r->body);
    json_decref(r->result);
    memset(r, 0, sizeof *r);
}

const char *fetchd_response_header(const fetchd_response *r, const char *name) {
    const char *key;
    json_t *value;
    if (!r || !name || !json_is_object(r->headers))
        return NULL;
    json_object_foreach(r->headers, key, value) {
        if (!strcasecmp(key, name))
            return json_string_value(value);
    }
    return NULL;
}

/* Fills r from a fetch/download/upload result (takes ownership of result). */
static fetchd_status fill_response(json_t *result, fetchd_response *r, fetchd_error *err) {
    memset(r, 0, sizeof *r);
    r->result = result;
    r->status = (int)json_integer_value(json_object_get(result, "status"));
    r->url = json_string_value(json_object_get(result, "url"));
    r->job_id = json_string_value(json_object_get(result, "jobId"));
    r->headers = json_object_get(result, "headers");
    json_t *body = json_object_get(result, "body");
    json_t *b64 = json_object_get(result, "bodyBase64");
    json_t *parsed = json_object_get(result, "json");
    if (json_is_string(body)) {
        r->body_len = json_string_length(body);
        r->body = malloc(r->body_len + 1);
        if (r->body) {
            memcpy(r->body, json_string_value(body), r->body_len);
            r->body[r->body_len] = 0;
        }
    } else if (json_is_string(b64)) {
        r->body = fetchd_base64_decode(json_string_value(b64), json_string_length(b64), &r->body_len);
        if (!r->body) {
            fetchd_response_free(r);
            return fail(err, FETCHD_ERR_PROTOCOL, 0, NULL, "bodyBase64 is not valid base64");
        }
    } else if (parsed) {
        r->body = (unsigned char *)json_dumps(parsed, JSON_COMPACT | JSON_ENCODE_ANY);
        r->body_len = r->body ? strlen((char *)r->body) : 0;
    } else {
        r->body = calloc(1, 1);
    }
    if (!r->body) {
        fetchd_response_free(r);
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    }
    return FETCHD_OK;
}

/* The response of a job call that returned st and result (owned). */
static fetchd_status take_response(fetchd_status st, const char *method, json_t *result,
                                   fetchd_response *response, fetchd_error *err) {
    if (st != FETCHD_OK)
        return st;
    if (!json_is_object(result)) {
        json_decref(result);
        return fail(err, FETCHD_ERR_PROTOCOL, 0, NULL, "%s result is not an object", method);
    }
    return fill_response(result, response, err);
}

fetchd_status fetchd_fetch_ex(fetchd_client *c, json_t *params, fetchd_response *response,
                              fetchd_error *err) {
    if (!response || !json_is_object(params))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "params must be an object");
    memset(response, 0, sizeof *response);
    json_t *result = NULL;
    fetchd_status st = fetchd_call(c, "fetch", params, &result, err);
    return take_response(st, "fetch", result, response, err);
}

fetchd_status fetchd_fetch(fetchd_client *c, const char *url, fetchd_response *response,
                           fetchd_error *err) {
    if (!url)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "url is NULL");
    json_t *params = json_pack("{s:s}", "url", url);
    if (!params)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    fetchd_status st = fetchd_fetch_ex(c, params, response, err);
    json_decref(params);
    return st;
}

/* Runs download of url to path with params_extra (borrowed) added; fn may be NULL (then it
 * is a plain fetchd_call, the daemon naming the job). */
static fetchd_status run_download(fetchd_client *c, const char *url, const char *path,
                                  json_t *params_extra, fetchd_progress_fn fn, void *user_data,
                                  json_t **result, fetchd_error *err) {
    if (result)
        *result = NULL;
    if (!url || !path || (params_extra && !json_is_object(params_extra)))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "url, path or params_extra invalid");
    json_t *params = params_extra ? json_deep_copy(params_extra) : json_object();
    if (!params)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    json_object_set_new(params, "url", json_string(url));
    json_object_set_new(params, "path", json_string(path));
    fetchd_status st = fn ? fetchd_job_call(c, "download", params, fn, user_data, result, err)
                          : fetchd_call(c, "download", params, result, err);
    json_decref(params);
    return st;
}

fetchd_status fetchd_download(fetchd_client *c, const char *url, const char *path,
                              json_t *params_extra, json_t **result, fetchd_error *err) {
    return run_download(c, url, path, params_extra, NULL, NULL, result, err);
}

fetchd_status fetchd_cancel(fetchd_client *c, const char *job_id, int *cancelled,
                            fetchd_error *err) {
    if (cancelled)
        *cancelled = 0;
    if (!job_id)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "job_id is NULL");
    json_t *params = json_pack("{s:s}", "jobId", job_id), *result = NULL;
    if (!params)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    fetchd_status st = fetchd_call(c, "cancel", params, &result, err);
    json_decref(params);
    if (st == FETCHD_OK && cancelled)
        *cancelled = json_is_true(json_object_get(result, "cancelled"));
    json_decref(result);
    return st;
}

fetchd_status fetchd_cancel_nowait(fetchd_client *c, const char *job_id, fetchd_error *err) {
    if (!c || !job_id)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "client or job_id is NULL");
    json_t *params = json_pack("{s:s}", "jobId", job_id);
    json_t *msg = new_message("cancel", params);
    json_decref(params);
    if (!msg)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    pthread_mutex_lock(&c->lock);
    json_int_t id = c->next_id++; /* never registered: the reader drops its answer */
    pthread_mutex_unlock(&c->lock);
    json_object_set_new(msg, "id", json_integer(id));
    fetchd_status st = send_message(c, msg, err);
    json_decref(msg);
    return st;
}

fetchd_status fetchd_set_auth(fetchd_client *c, const char *host, json_t *rule, json_t **result,
                              fetchd_error *err) {
    if (result)
        *result = NULL;
    if (!host || !json_is_object(rule))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "host is NULL or rule is not an object");
    json_t *params = json_deep_copy(rule);
    if (!params)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    json_object_set_new(params, "host", json_string(host));
    fetchd_status st = fetchd_call(c, "setAuth", params, result, err);
    json_decref(params);
    return st;
}

/* Calls method (no params) and hands out the array `member` of its result. */
static fetchd_status call_for_array(fetchd_client *c, const char *method, const char *member, json_t **out,
                                    fetchd_error *err) {
    json_t *result = NULL;
    if (out)
        *out = NULL;
    fetchd_status st = fetchd_call(c, method, NULL, &result, err);
    if (st == FETCHD_OK) {
        json_t *list = json_object_get(result, member);
        if (!json_is_array(list))
            st = fail(err, FETCHD_ERR_PROTOCOL, 0, result, "%s result has no %s array", method, member);
        else if (out)
            *out = json_incref(list);
    }
    json_decref(result);
    return st;
}

fetchd_status fetchd_get_auth(fetchd_client *c, json_t **rules, fetchd_error *err) {
    return call_for_array(c, "getAuth", "rules", rules, err);
}

fetchd_status fetchd_list_jobs(fetchd_client *c, json_t **jobs, fetchd_error *err) {
    return call_for_array(c, "listJobs", "jobs", jobs, err);
}

static fetchd_status call_for_job(fetchd_client *c, const char *method, json_t *params, json_t **result,
                                  fetchd_error *err) {
    if (result)
        *result = NULL;
    if (!params)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    fetchd_status st = fetchd_call(c, method, params, result, err);
    json_decref(params);
    return st;
}

fetchd_status fetchd_get_job(fetchd_client *c, const char *job_id, json_t **job, fetchd_error *err) {
    if (!job_id)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "job_id is NULL");
    return call_for_job(c, "getJob", json_pack("{s:s}", "jobId", job_id), job, err);
}

fetchd_status fetchd_attach(fetchd_client *c, const char *job_id, int progress, json_t **result,
                            fetchd_error *err) {
    if (!job_id)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "job_id is NULL");
    return call_for_job(c, "attach", json_pack("{s:s,s:b}", "jobId", job_id, "progress", progress != 0), result, err);
}

/* ---------------------------------------------------------- per-call progress and upload */

fetchd_status fetchd_fetch_progress(fetchd_client *c, json_t *params, fetchd_progress_fn fn,
                                    void *user_data, fetchd_response *response, fetchd_error *err) {
    if (!response || !json_is_object(params))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "params must be an object");
    memset(response, 0, sizeof *response);
    json_t *result = NULL;
    fetchd_status st = fetchd_job_call(c, "fetch", params, fn, user_data, &result, err);
    return take_response(st, "fetch", result, response, err);
}

fetchd_status fetchd_download_progress(fetchd_client *c, const char *url, const char *path,
                                       json_t *params_extra, fetchd_progress_fn fn, void *user_data,
                                       json_t **result, fetchd_error *err) {
    return run_download(c, url, path, params_extra, fn, user_data, result, err);
}

fetchd_status fetchd_upload(fetchd_client *c, const char *url, const char *const *paths,
                            size_t n_paths, json_t *params_extra, fetchd_progress_fn fn,
                            void *user_data, fetchd_response *response, fetchd_error *err) {
    if (!url || !response || (n_paths && !paths) || (params_extra && !json_is_object(params_extra)))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "url, paths, response or params_extra invalid");
    memset(response, 0, sizeof *response);
    json_t *params = params_extra ? json_deep_copy(params_extra) : json_object();
    if (!params)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    json_t *files = json_object_get(params, "files");
    if (!json_is_array(files)) {
        files = json_array();
        json_object_set_new(params, "files", files);
    }
    for (size_t i = 0; i < n_paths; i++) {
        if (!paths[i]) {
            json_decref(params);
            return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "paths[%zu] is NULL", i);
        }
        json_array_append_new(files, json_pack("{s:s}", "path", paths[i]));
    }
    json_object_set_new(params, "url", json_string(url));
    json_t *result = NULL;
    fetchd_status st = fetchd_job_call(c, "upload", params, fn, user_data, &result, err);
    json_decref(params);
    return take_response(st, "upload", result, response, err);
}

fetchd_status fetchd_attach_progress(fetchd_client *c, const char *job_id, fetchd_progress_fn fn,
                                     void *user_data, json_t **result, fetchd_error *err) {
    if (!job_id)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "job_id is NULL");
    json_t *params = json_pack("{s:s,s:b}", "jobId", job_id, "progress", fn != NULL);
    if (!params)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    fetchd_status st = call_internal(c, "attach", params, NULL, 0, job_id, fn, user_data, result, err);
    json_decref(params);
    return st;
}

/* ---------------------------------------------------------------------------- stubs */

/* Calls method with params (owned: decref'd here) and reads the integer `member` of its result. */
static fetchd_status call_for_int(fetchd_client *c, const char *method, json_t *params,
                                  const char *member, int *out, fetchd_error *err) {
    if (out)
        *out = 0;
    json_t *result = NULL;
    fetchd_status st = call_for_job(c, method, params, &result, err);
    if (st == FETCHD_OK && out)
        *out = (int)json_integer_value(json_object_get(result, member));
    json_decref(result);
    return st;
}

/* A params object with the string members given (NULL values left out), ended by NULL. */
static json_t *string_params(const char *key, ...) {
    json_t *params = json_object();
    va_list ap;
    va_start(ap, key);
    for (; params && key; key = va_arg(ap, const char *)) {
        const char *value = va_arg(ap, const char *);
        if (value)
            json_object_set_new(params, key, json_string(value));
    }
    va_end(ap);
    return params;
}

fetchd_status fetchd_add_stub(fetchd_client *c, json_t *stub, char **stub_id, fetchd_error *err) {
    if (stub_id)
        *stub_id = NULL;
    if (!json_is_object(stub))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "stub is not an object");
    json_t *result = NULL;
    fetchd_status st = fetchd_call(c, "addStub", stub, &result, err);
    if (st == FETCHD_OK && stub_id) {
        const char *id = json_string_value(json_object_get(result, "stubId"));
        *stub_id = id ? strdup(id) : NULL;
        if (!*stub_id)
            st = fail(err, FETCHD_ERR_PROTOCOL, 0, result, "addStub result has no stubId");
    }
    json_decref(result);
    return st;
}

fetchd_status fetchd_get_stubs(fetchd_client *c, const char *set, json_t **result, fetchd_error *err) {
    return call_for_job(c, "getStubs", string_params("set", set, NULL), result, err);
}

fetchd_status fetchd_remove_stubs(fetchd_client *c, const char *set, const char *stub_id, int *removed,
                                  fetchd_error *err) {
    return call_for_int(c, "removeStubs", string_params("set", set, "stubId", stub_id, NULL), "removed",
                        removed, err);
}

fetchd_status fetchd_set_stub_mode(fetchd_client *c, const char *set, const char *on_miss, fetchd_error *err) {
    if (!set || !on_miss)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "set or on_miss is NULL");
    return call_for_job(c, "setStubMode", string_params("set", set, "onMiss", on_miss, NULL), NULL, err);
}

fetchd_status fetchd_load_stubs(fetchd_client *c, const char *set, const char *har, int *loaded,
                                fetchd_error *err) {
    if (!set || !har)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "set or har is NULL");
    return call_for_int(c, "loadStubs", string_params("set", set, "har", har, NULL), "loaded", loaded, err);
}

fetchd_status fetchd_record_stubs(fetchd_client *c, const char *set, const char *har, fetchd_error *err) {
    if (!set || !har)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "set or har is NULL");
    return call_for_job(c, "recordStubs", string_params("set", set, "har", har, NULL), NULL, err);
}

/* ---------------------------------------------------------------- streaming bodies */

static fetchd_status fetch_fds(fetchd_client *c, json_t *params, int from_fd, int to_fd,
                               fetchd_progress_fn fn, void *user_data, fetchd_response *response,
                               fetchd_error *err) {
    if (!response || !json_is_object(params) || (from_fd < 0 && to_fd < 0))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL,
                    "params must be an object and a descriptor must be given");
    memset(response, 0, sizeof *response);
    json_t *own = json_copy(params);
    if (!own)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    int fds[2];
    size_t n = 0;
    if (from_fd >= 0) { /* the protocol's order: bodyFrom, then bodyTo */
        json_object_set_new(own, "bodyFrom", json_string("fd"));
        fds[n++] = from_fd;
    }
    if (to_fd >= 0) {
        json_object_set_new(own, "bodyTo", json_string("fd"));
        fds[n++] = to_fd;
    }
    json_t *result = NULL;
    fetchd_status st = fetchd_job_call_fds(c, "fetch", own, fds, n, fn, user_data, &result, err);
    json_decref(own);
    return take_response(st, "fetch", result, response, err);
}

fetchd_status fetchd_fetch_fds(fetchd_client *c, json_t *params, int from_fd, int to_fd,
                               fetchd_progress_fn fn, void *user_data, fetchd_response *response,
                               fetchd_error *err) {
    return fetch_fds(c, params, from_fd, to_fd, fn, user_data, response, err);
}

fetchd_status fetchd_fetch_to_fd(fetchd_client *c, json_t *params, int fd, fetchd_response *response,
                                 fetchd_error *err) {
    if (fd < 0)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "fd is not a descriptor");
    return fetch_fds(c, params, -1, fd, NULL, NULL, response, err);
}

fetchd_status fetchd_fetch_from_fd(fetchd_client *c, json_t *params, int fd, fetchd_response *response,
                                   fetchd_error *err) {
    if (fd < 0)
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "fd is not a descriptor");
    return fetch_fds(c, params, fd, -1, NULL, NULL, response, err);
}

/* A connection of one streamed job, read on the calling thread: nothing else is on it, so
 * not reading it pauses that job only, and the callbacks may use the client freely. */
struct stream_conn {
    int fd;
    char *buf;
    size_t cap, len, start, scanned;
    struct timespec deadline;
    long timeout_ms;
    unsigned char *bytes;       /* a decoded chunk (reused) */
    size_t bytes_cap;
};

static long ms_until(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (long)(t->tv_sec - now.tv_sec) * 1000 + (t->tv_nsec - now.tv_nsec) / 1000000;
    return ms < 0 ? 0 : ms;
}

/* The next line (without its newline) in *line / *len. FETCHD_OK, or CLOSED, IO, TIMEOUT. */
static fetchd_status stream_next_line(struct stream_conn *s, char **line, size_t *len,
                                      fetchd_error *err) {
    for (;;) {
        char *nl = memchr(s->buf + s->scanned, '\n', s->len - s->scanned);
        if (nl) {
            *line = s->buf + s->start;
            *len = (size_t)(nl - *line);
            s->start = s->scanned = (size_t)(nl - s->buf) + 1;
            return FETCHD_OK;
        }
        s->scanned = s->len;
        if (s->start) { /* keep the unfinished line at the front */
            memmove(s->buf, s->buf + s->start, s->len - s->start);
            s->len -= s->start;
            s->scanned -= s->start;
            s->start = 0;
        }
        if (s->len == s->cap) {
            if (s->cap >= FETCHD_MAX_LINE)
                return fail(err, FETCHD_ERR_PROTOCOL, 0, NULL, "a line from fetchd is longer than 1 GiB");
            char *bigger = realloc(s->buf, s->cap * 2);
            if (!bigger)
                return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
            s->buf = bigger;
            s->cap *= 2;
        }
        if (s->timeout_ms > 0) {
            struct pollfd pfd = {s->fd, POLLIN, 0};
            int r = poll(&pfd, 1, (int)ms_until(&s->deadline));
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0)
                return fail(err, FETCHD_ERR_TIMEOUT, 0, NULL, "no answer to fetch within %ld ms", s->timeout_ms);
        }
        ssize_t n = recv(s->fd, s->buf + s->len, s->cap - s->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fail(err, FETCHD_ERR_IO, 0, NULL, "reading from fetchd failed: %s", strerror(errno));
        if (n == 0)
            return fail(err, FETCHD_ERR_CLOSED, 0, NULL, "the connection to fetchd closed before the answer to fetch");
        s->len += (size_t)n;
    }
}

static const signed char B64[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8,
    ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
    ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
    ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
    ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
    ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
    ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
}; /* value + 1; 0: not a base64 digit */

/* Decodes base64 (padding optional) into s->bytes; *out_len its length. 0, or -1 on bad input. */
static int stream_decode(struct stream_conn *s, const char *in, size_t in_len, size_t *out_len) {
    size_t need = in_len / 4 * 3 + 3;
    if (need > s->bytes_cap) {
        unsigned char *bigger = realloc(s->bytes, need);
        if (!bigger)
            return -1;
        s->bytes = bigger;
        s->bytes_cap = need;
    }
    while (in_len && in[in_len - 1] == '=')
        in_len--;
    const unsigned char *p = (const unsigned char *)in;
    unsigned char *o = s->bytes;
    size_t i = 0;
    for (; i + 4 <= in_len; i += 4) {
        int a = B64[p[i]], b = B64[p[i + 1]], c = B64[p[i + 2]], d = B64[p[i + 3]];
        if (!a || !b || !c || !d)
            return -1;
        unsigned v = (unsigned)(a - 1) << 18 | (unsigned)(b - 1) << 12 | (unsigned)(c - 1) << 6 | (unsigned)(d - 1);
        *o++ = (unsigned char)(v >> 16);
        *o++ = (unsigned char)(v >> 8);
        *o++ = (unsigned char)v;
    }
    size_t rest = in_len - i;
    if (rest == 1)
        return -1;
    if (rest) {
        unsigned v = 0;
        for (size_t k = 0; k < rest; k++) {
            int x = B64[p[i + k]];
            if (!x)
                return -1;
            v = v << 6 | (unsigned)(x - 1);
        }
        v <<= 6 * (4 - rest);
        *o++ = (unsigned char)(v >> 16);
        if (rest == 3)
            *o++ = (unsigned char)(v >> 8);
    }
    *out_len = (size_t)(o - s->bytes);
    return 0;
}

/* A bodyChunk notification's base64 without parsing the whole line as JSON: *b64 / *b64_len,
 * or 0 when the line is something else (or escaped: then it is parsed as JSON). */
static int find_chunk_data(const char *line, size_t len, const char **b64, size_t *b64_len) {
    static const char key[] = "\"dataBase64\":\"";
    static const char method[] = "\"method\":\"bodyChunk\"";
    if (!memmem(line, len, method, sizeof method - 1))
        return 0;
    const char *k = memmem(line, len, key, sizeof key - 1);
    if (!k)
        return 0;
    const char *start = k + sizeof key - 1;
    const char *end = memchr(start, '"', len - (size_t)(start - line));
    if (!end || memchr(start, '\\', (size_t)(end - start)))
        return 0;
    *b64 = start;
    *b64_len = (size_t)(end - start);
    return 1;
}

/* Hands one notification to its callback; nonzero: the callback asked to stop. */
static int stream_notification(struct stream_conn *s, json_t *msg, const fetchd_stream_callbacks *cb,
                               void *user_data) {
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *params = json_object_get(msg, "params");
    if (!method || !json_is_object(params))
        return 0;
    if (!strcmp(method, "responseHead"))
        return cb->on_head ? cb->on_head((int)json_integer_value(json_object_get(params, "status")), params,
                                         user_data) : 0;
    if (!strcmp(method, "bodyChunk")) {
        json_t *data = json_object_get(params, "dataBase64");
        size_t n = 0;
        if (!json_is_string(data) || stream_decode(s, json_string_value(data), json_string_length(data), &n) < 0)
            return 0;
        return cb->on_chunk ? cb->on_chunk(s->bytes, n, user_data) : 0;
    }
    if (!strcmp(method, "bodyLine")) {
        json_t *line = json_object_get(params, "line");
        return cb->on_line && json_is_string(line)
            ? cb->on_line(json_string_value(line), json_string_length(line), user_data) : 0;
    }
    if (!strcmp(method, "sseEvent")) {
        const char *event = json_string_value(json_object_get(params, "event"));
        const char *data = json_string_value(json_object_get(params, "data"));
        return cb->on_event ? cb->on_event(event ? event : "message", data ? data : "",
                                           json_string_value(json_object_get(params, "id")), user_data) : 0;
    }
    return cb->on_progress ? cb->on_progress(method, params, user_data) : 0;
}

fetchd_status fetchd_fetch_stream(fetchd_client *c, json_t *params, const fetchd_stream_callbacks *cb,
                                  void *user_data, fetchd_response *response, fetchd_error *err) {
    static const fetchd_stream_callbacks none;
    if (!c || !response || !json_is_object(params))
        return fail(err, FETCHD_ERR_INVALID_ARGUMENT, 0, NULL, "client, params or response invalid");
    memset(response, 0, sizeof *response);
    if (!cb)
        cb = &none;
    json_t *own = job_params(c, params, cb->on_progress != NULL);
    if (!own)
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    if (!json_object_get(own, "responseBody"))
        json_object_set_new(own, "responseBody",
                            json_string(cb->on_event ? "events" : cb->on_line ? "lines" : "stream"));
    json_t *msg = json_pack("{s:s,s:i,s:s,s:O}", "jsonrpc", "2.0", "id", 1, "method", "fetch", "params", own);
    char *jid = strdup(json_string_value(json_object_get(own, "jobId")));
    json_decref(own);
    struct stream_conn s = {.fd = -1, .cap = FETCHD_READ_CHUNK};
    s.buf = malloc(s.cap);
    size_t len = 0;
    char *line_out = msg ? message_line(msg, &len) : NULL;
    json_decref(msg);
    if (!line_out || !jid || !s.buf) {
        free(line_out);
        free(jid);
        free(s.buf);
        return fail(err, FETCHD_ERR_NO_MEMORY, 0, NULL, "out of memory");
    }
    pthread_mutex_lock(&c->lock);
    s.timeout_ms = c->timeout_ms;
    pthread_mutex_unlock(&c->lock);
    clock_gettime(CLOCK_MONOTONIC, &s.deadline);
    s.deadline.tv_sec += s.timeout_ms / 1000;
    s.deadline.tv_nsec += (s.timeout_ms % 1000) * 1000000L;
    if (s.deadline.tv_nsec >= 1000000000L) {
        s.deadline.tv_sec++;
        s.deadline.tv_nsec -= 1000000000L;
    }

    fetchd_status st = open_socket(c->path, &s.fd, err);
    if (st == FETCHD_OK) {
        int e = write_all(s.fd, line_out, len, NULL, 0);
        if (e)
            st = fail(err, FETCHD_ERR_IO, 0, NULL, "sending to fetchd failed: %s", strerror(e));
    }
    int stopped = 0;
    json_t *result = NULL;
    while (st == FETCHD_OK) {
        char *line = NULL;
        size_t n = 0;
        st = stream_next_line(&s, &line, &n, err);
        if (st != FETCHD_OK)
            break;
        const char *b64 = NULL;
        size_t b64_len = 0, bytes = 0;
        if (find_chunk_data(line, n, &b64, &b64_len)) {
            if (stream_decode(&s, b64, b64_len, &bytes) < 0) {
                st = fail(err, FETCHD_ERR_PROTOCOL, 0, NULL, "bodyChunk data is not valid base64");
                break;
            }
            if (!stopped && cb->on_chunk && cb->on_chunk(s.bytes, bytes, user_data) != 0)
                stopped = 1;
        } else {
            json_error_t jerr;
            json_t *m = n ? json_loadb(line, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr) : NULL;
            if (!json_is_object(m)) {
                json_decref(m);
                continue;
            }
            json_t *id = json_object_get(m, "id");
            if (!id) {
                if (!stopped && stream_notification(&s, m, cb, user_data) != 0)
                    stopped = 1;
            } else if (json_is_integer(id) && json_integer_value(id) == 1) {
                st = take_answer(m, &result, err);
                json_decref(m);
                break;
            }
            json_decref(m);
        }
        if (stopped == 1) { /* cancel on this connection; its answer is skipped above */
            stopped = 2;
            json_t *cancel = json_pack("{s:s,s:i,s:s,s:{s:s}}", "jsonrpc", "2.0", "id", 2, "method", "cancel",
                                       "params", "jobId", jid);
            size_t cl;
            char *text = cancel ? message_line(cancel, &cl) : NULL;
            json_decref(cancel);
            if (text && write_all(s.fd, text, cl, NULL, 0) != 0)
                st = fail(err, FETCHD_ERR_IO, 0, NULL, "sending cancel to fetchd failed");
            free(text);
        }
    }
    if (s.fd >= 0)
        close(s.fd); /* a job not finished (a timeout, an error here) is cancelled by the daemon */
    free(s.buf);
    free(s.bytes);
    free(line_out);
    free(jid);
    return take_response(st, "fetch", result, response, err);
}
