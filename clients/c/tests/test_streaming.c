/* Streaming bodies in libfetchd against a real daemon and the integration test server:
 * fetchd_fetch_to_fd (a file, a pipe), fetchd_fetch_from_fd (a pipe), fetchd_fetch_fds (both),
 * and fetchd_fetch_stream's callbacks (bodyChunk, bodyLine, sseEvent, cancel from a callback,
 * a callback that calls the client).
 *
 *   tests/test_streaming SOCKET TEST_SERVER_URL TMPDIR
 *
 * Prints one line per failed check and "c-streaming: N checks, N failed" at the end; exits 1
 * on any failure. Run by tests/integration/test_streaming_clients.py under valgrind and
 * AddressSanitizer, so every path here frees what it gets. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fetchd.h"
#include "check.h"

static const char *sock, *tmpdir;

static json_t *params_for(const char *path) {
    char *u = url(path);
    json_t *p = json_pack("{s:s}", "url", u);
    free(u);
    return p;
}

/* The body of path fetched the ordinary way (in the answer), as a reference. */
static unsigned char *reference(fetchd_client *c, const char *path, size_t *len) {
    json_t *p = params_for(path);
    fetchd_response r = {0};
    fetchd_error err = {0};
    unsigned char *out = NULL;
    *len = 0;
    if (fetchd_fetch_ex(c, p, &r, &err) == FETCHD_OK) {
        out = r.body;
        *len = r.body_len;
        r.body = NULL;
    } else
        fprintf(stderr, "reference fetch of %s: %s\n", path, err.message);
    fetchd_response_free(&r);
    fetchd_error_clear(&err);
    json_decref(p);
    return out;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (!f)
        return NULL;
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + *len, 1, cap - *len, f)) > 0) {
        *len += n;
        if (*len == cap) {
            unsigned char *bigger = realloc(buf, cap *= 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
            }
            buf = bigger;
        }
    }
    fclose(f);
    return buf;
}

static void test_to_file(fetchd_client *c) {
    size_t want_len;
    unsigned char *want = reference(c, "/bytes/3000000", &want_len);
    char path[512];
    snprintf(path, sizeof path, "%s/to-fd.bin", tmpdir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "open %s", path);
    int flags_before = fcntl(fd, F_GETFL);
    json_t *p = params_for("/bytes/3000000");
    fetchd_response r = {0};
    fetchd_error err = {0};
    fetchd_status st = fetchd_fetch_to_fd(c, p, fd, &r, &err);
    CHECK(st == FETCHD_OK, "fetch_to_fd: %s", err.message);
    CHECK(r.status == 200 && r.body_len == 0, "status %d, body_len %zu", r.status, r.body_len);
    CHECK(json_integer_value(json_object_get(r.result, "bytes")) == 3000000, "bytes");
    CHECK(json_is_string(json_object_get(r.result, "sha256")), "sha256 in the result");
    CHECK(!json_object_get(r.result, "body") && !json_object_get(r.result, "bodyBase64"), "no body member");
    CHECK(fcntl(fd, F_GETFL) == flags_before, "the descriptor's flags were changed");
    close(fd);
    size_t got_len;
    unsigned char *got = read_file(path, &got_len);
    CHECK(want && got && got_len == want_len && !memcmp(got, want, want_len), "file: %zu bytes, want %zu",
          got_len, want_len);
    free(got);
    free(want);
    fetchd_response_free(&r);
    fetchd_error_clear(&err);
    json_decref(p);
    CHECK(fetchd_fetch_to_fd(c, NULL, 1, &r, &err) == FETCHD_ERR_INVALID_ARGUMENT, "NULL params");
    fetchd_error_clear(&err);
}

struct drain {
    int fd;
    size_t bytes;
    unsigned char *data;
    size_t cap;
};

static void *drain_main(void *arg) {
    struct drain *d = arg;
    unsigned char buf[65536];
    ssize_t n;
    while ((n = read(d->fd, buf, sizeof buf)) > 0) {
        if (d->bytes + (size_t)n > d->cap) {
            d->cap = (d->bytes + (size_t)n) * 2;
            d->data = realloc(d->data, d->cap);
            if (!d->data)
                abort();
        }
        memcpy(d->data + d->bytes, buf, (size_t)n);
        d->bytes += (size_t)n;
    }
    return NULL;
}

static void test_to_pipe(fetchd_client *c) {
    size_t want_len;
    unsigned char *want = reference(c, "/bytes/2000000", &want_len);
    int fds[2];
    CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe");
    struct drain d = {fds[0], 0, NULL, 0};
    pthread_t t;
    pthread_create(&t, NULL, drain_main, &d);
    json_t *p = params_for("/bytes/2000000");
    fetchd_response r = {0};
    fetchd_error err = {0};
    CHECK(fetchd_fetch_to_fd(c, p, fds[1], &r, &err) == FETCHD_OK, "to a pipe: %s", err.message);
    close(fds[1]); /* the daemon closed its copy: the reader sees EOF */
    pthread_join(t, NULL);
    close(fds[0]);
    CHECK(want && d.bytes == want_len && !memcmp(d.data, want, want_len), "pipe: %zu bytes, want %zu", d.bytes,
          want_len);
    free(d.data);
    free(want);
    fetchd_response_free(&r);
    fetchd_error_clear(&err);
    json_decref(p);

    /* Nobody reads: the reader end closed, the daemon's write fails with EPIPE. */
    CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe");
    close(fds[0]);
    p = params_for("/bytes/2000000");
    fetchd_status st = fetchd_fetch_to_fd(c, p, fds[1], &r, &err);
    CHECK(st == FETCHD_ERR_RPC && err.code == FETCHD_RPC_TRANSPORT, "reader gone: %d %d %s", st, err.code,
          err.message);
    const char *kind = fetchd_error_data_string(&err, "kind");
    CHECK(kind && !strcmp(kind, "write"), "kind %s", kind ? kind : "(none)");
    close(fds[1]);
    fetchd_response_free(&r);
    fetchd_error_clear(&err);
    json_decref(p);
}

struct feed {
    int fd;
    const char *text;
    int times;
};

static void *feed_main(void *arg) {
    struct feed *f = arg;
    size_t len = strlen(f->text);
    for (int i = 0; i < f->times; i++)
        if (write(f->fd, f->text, len) != (ssize_t)len)
            break;
    close(f->fd);
    return NULL;
}

static void test_from_pipe(fetchd_client *c) {
    int fds[2];
    CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe");
    struct feed f = {fds[1], "line of the upload\n", 1000};
    pthread_t t;
    pthread_create(&t, NULL, feed_main, &f);
    json_t *p = json_pack("{s:s,s:s}", "url", "", "responseBody", "json");
    char *u = url("/echo");
    json_object_set_new(p, "url", json_string(u));
    free(u);
    fetchd_response r = {0};
    fetchd_error err = {0};
    CHECK(fetchd_fetch_from_fd(c, p, fds[0], &r, &err) == FETCHD_OK, "from a pipe: %s", err.message);
    pthread_join(t, NULL);
    close(fds[0]);
    json_t *echo = json_object_get(r.result, "json");
    CHECK(!strcmp(json_string_value(json_object_get(echo, "method")) ? json_string_value(json_object_get(echo, "method")) : "", "POST"),
          "method");
    CHECK(json_integer_value(json_object_get(echo, "bodyLength")) == 19000, "bodyLength %lld",
          (long long)json_integer_value(json_object_get(echo, "bodyLength")));
    fetchd_response_free(&r);
    fetchd_error_clear(&err);

    /* Both descriptors: the upload echoed into a file. */
    CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe");
    struct feed g = {fds[1], "abc", 5};
    pthread_create(&t, NULL, feed_main, &g);
    char path[512];
    snprintf(path, sizeof path, "%s/echo.json", tmpdir);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    json_object_del(p, "responseBody");
    json_object_set_new(p, "method", json_string("PUT"));
    CHECK(fetchd_fetch_fds(c, p, fds[0], out, NULL, NULL, &r, &err) == FETCHD_OK, "both: %s", err.message);
    pthread_join(t, NULL);
    close(fds[0]);
    close(out);
    size_t n;
    unsigned char *text = read_file(path, &n);
    json_t *e = text ? json_loadb((const char *)text, n, 0, NULL) : NULL;
    CHECK(e && !strcmp(json_string_value(json_object_get(e, "body")), "abcabcabcabcabc")
          && !strcmp(json_string_value(json_object_get(e, "method")), "PUT"), "echo: %.*s", (int)n, text ? (char *)text : "");
    json_decref(e);
    free(text);
    fetchd_response_free(&r);
    fetchd_error_clear(&err);
    json_decref(p);
}

struct seen {
    int heads, status, chunks, lines, events, cancel_after, pings;
    fetchd_client *client;
    size_t bytes;
    unsigned char *data;
    size_t cap;
    char text[4096];
};

static int on_head(int status, json_t *head, void *ud) {
    struct seen *s = ud;
    s->heads++;
    s->status = status;
    return json_is_object(json_object_get(head, "headers")) ? 0 : 1;
}

static int on_chunk(const unsigned char *data, size_t len, void *ud) {
    struct seen *s = ud;
    s->chunks++;
    if (s->bytes + len > s->cap) {
        s->cap = (s->bytes + len) * 2;
        s->data = realloc(s->data, s->cap);
        if (!s->data)
            abort();
    }
    memcpy(s->data + s->bytes, data, len);
    s->bytes += len;
    if (s->client && fetchd_ping(s->client, NULL) == FETCHD_OK) /* the client stays usable */
        s->pings++;
    return s->cancel_after && s->chunks >= s->cancel_after;
}

static int on_line(const char *line, size_t len, void *ud) {
    struct seen *s = ud;
    s->lines++;
    size_t used = strlen(s->text);
    snprintf(s->text + used, sizeof s->text - used, "%.*s|", (int)len, line);
    return 0;
}

static int on_event(const char *event, const char *data, const char *id, void *ud) {
    struct seen *s = ud;
    s->events++;
    size_t used = strlen(s->text);
    snprintf(s->text + used, sizeof s->text - used, "%s/%s/%s|", event, data, id ? id : "-");
    return 0;
}

static void test_stream_callbacks(fetchd_client *c) {
    size_t want_len;
    unsigned char *want = reference(c, "/bytes/1500000", &want_len);
    fetchd_stream_callbacks cb = {.on_head = on_head, .on_chunk = on_chunk};
    struct seen s = {0};
    json_t *p = params_for("/bytes/1500000");
    fetchd_response r = {0};
    fetchd_error err = {0};
    CHECK(fetchd_fetch_stream(c, p, &cb, &s, &r, &err) == FETCHD_OK, "stream: %s", err.message);
    CHECK(s.heads == 1 && s.status == 200 && r.status == 200, "head %d status %d", s.heads, s.status);
    CHECK(want && s.bytes == want_len && !memcmp(s.data, want, want_len), "chunks: %zu bytes, want %zu",
          s.bytes, want_len);
    CHECK(json_integer_value(json_object_get(r.result, "bytes")) == (json_int_t)want_len, "result bytes");
    free(s.data);
    free(want);
    fetchd_response_free(&r);
    json_decref(p);

    /* A slow body arrives chunk by chunk; the callback calls the client meanwhile. */
    memset(&s, 0, sizeof s);
    s.client = c;
    p = params_for("/slow-body?chunks=5&ms=40");
    CHECK(fetchd_fetch_stream(c, p, &cb, &s, &r, &err) == FETCHD_OK, "slow: %s", err.message);
    CHECK(s.bytes == 5 && s.data && !memcmp(s.data, "xxxxx", 5), "slow body: %zu bytes", s.bytes);
    CHECK(s.chunks >= 3 && s.pings == s.chunks, "chunks %d pings %d", s.chunks, s.pings);
    free(s.data);
    fetchd_response_free(&r);
    json_decref(p);

    /* A nonzero return cancels the job. */
    memset(&s, 0, sizeof s);
    s.cancel_after = 2;
    p = params_for("/slow-body?chunks=50&ms=40");
    fetchd_status st = fetchd_fetch_stream(c, p, &cb, &s, &r, &err);
    CHECK(st == FETCHD_ERR_RPC && err.code == FETCHD_RPC_CANCELLED, "cancel: %d %d %s", st, err.code, err.message);
    CHECK(s.chunks == 2, "no chunk after the stop: %d", s.chunks);
    free(s.data);
    fetchd_error_clear(&err);
    json_decref(p);

    /* Lines. */
    memset(&s, 0, sizeof s);
    fetchd_stream_callbacks lines = {.on_line = on_line};
    p = params_for("/ndjson?lines=3&eol=crlf");
    CHECK(fetchd_fetch_stream(c, p, &lines, &s, &r, &err) == FETCHD_OK, "lines: %s", err.message);
    CHECK(s.lines == 3 && !strcmp(s.text, "{\"n\": 0, \"text\": \"line 0\"}|{\"n\": 1, \"text\": \"line 1\"}|"
                                          "{\"n\": 2, \"text\": \"line 2\"}|"), "lines: %s", s.text);
    CHECK(json_integer_value(json_object_get(r.result, "lines")) == 3, "result lines");
    fetchd_response_free(&r);
    json_decref(p);

    /* Server-Sent Events. */
    memset(&s, 0, sizeof s);
    fetchd_stream_callbacks events = {.on_head = on_head, .on_event = on_event};
    char path[128];
    snprintf(path, sizeof path, "/sse/c-%ld?events=3&ms=10", (long)getpid());
    p = params_for(path);
    CHECK(fetchd_fetch_stream(c, p, &events, &s, &r, &err) == FETCHD_OK, "events: %s", err.message);
    CHECK(s.events == 3 && !strcmp(s.text, "tick/event 1/1|tick/event 2/2|tick/event 3/3|"), "events: %s", s.text);
    CHECK(json_integer_value(json_object_get(r.result, "events")) == 3, "result events");
    fetchd_response_free(&r);
    fetchd_error_clear(&err);
    json_decref(p);
}

/* The LLM-style token stream of docs/clients.md: tokens until "[DONE]", then stop. */
static int on_token(const char *event, const char *data, const char *id, void *ud) {
    struct seen *s = ud;
    (void)event;
    (void)id;
    if (!strcmp(data, "[DONE]"))
        return 1;
    json_t *d = json_loads(data, 0, NULL);
    const char *token = json_string_value(json_object_get(d, "token"));
    size_t used = strlen(s->text);
    snprintf(s->text + used, sizeof s->text - used, "%s", token ? token : "?");
    json_decref(d);
    s->events++;
    return 0;
}

static void test_llm_stub(fetchd_client *c) {
    const char *url = "https://llm.example/v1/chat/completions";
    char set[64];
    snprintf(set, sizeof set, "c-llm-%ld", (long)getpid());
    const char *body = "data: {\"token\": \"Hel\"}\n\ndata: {\"token\": \"lo\"}\n\n"
                       "data: {\"token\": \"!\"}\n\ndata: [DONE]\n\n";
    json_t *stream = json_pack("{s:s,s:{s:s},s:{s:{s:s},s:s},s:i}", "set", set, "match", "url", url, "respond",
                               "headers", "Content-Type", "text/event-stream", "body", body, "times", 1);
    json_t *end = json_pack("{s:s,s:{s:s},s:{s:i}}", "set", set, "match", "url", url, "respond", "status", 204);
    fetchd_error err = {0};
    CHECK(fetchd_add_stub(c, stream, NULL, &err) == FETCHD_OK, "addStub: %s", err.message);
    CHECK(fetchd_add_stub(c, end, NULL, &err) == FETCHD_OK, "addStub: %s", err.message);
    json_decref(stream);
    json_decref(end);
    struct seen s = {0};
    fetchd_stream_callbacks cb = {.on_event = on_token};
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:b}}", "url", url, "stubs", set, "json", "prompt", "hi", "stream", 1);
    fetchd_response r = {0};
    fetchd_status st = fetchd_fetch_stream(c, p, &cb, &s, &r, &err);
    CHECK(st == FETCHD_ERR_RPC && err.code == FETCHD_RPC_CANCELLED, "stopped at [DONE]: %d %s", st, err.message);
    CHECK(!strcmp(s.text, "Hello!") && s.events == 3, "tokens: %s", s.text);
    fetchd_response_free(&r);
    fetchd_error_clear(&err);
    json_decref(p);
    CHECK(fetchd_remove_stubs(c, set, NULL, NULL, &err) == FETCHD_OK, "removeStubs: %s", err.message);
    fetchd_error_clear(&err);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s SOCKET TEST_SERVER_URL TMPDIR\n", argv[0]);
        return 2;
    }
    sock = argv[1];
    base = argv[2];
    tmpdir = argv[3];
    fetchd_client *c = NULL;
    fetchd_error err = {0};
    if (fetchd_connect(sock, &c, &err) != FETCHD_OK) {
        fprintf(stderr, "cannot connect: %s\n", err.message);
        fetchd_error_clear(&err);
        return 2;
    }
    test_to_file(c);
    test_to_pipe(c);
    test_from_pipe(c);
    test_stream_callbacks(c);
    test_llm_stub(c);
    fetchd_close(c);
    printf("c-streaming: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
