/* rpc_floor: the floor of fetchd's design for small GETs (benchmark, not a test).
 *
 *   rpc_floor SOCKET THREADS
 *   rpc_floor --socket SOCKET [ignored...]   (as bench/callgrind.py starts a daemon: 1 thread)
 *
 * The least a daemon built like fetchd can do per `fetch`: THREADS threads (as fetchd's
 * small-request engine threads), each with its own libcurl multi handle and epoll set of client
 * connections, waiting on both in curl_multi_poll. A request line is parsed with jansson (as
 * fetchd does), its URL run on a reused easy handle, and the answer written as one JSON-RPC line
 * with the status, the response headers (names lowercased) and the body: the fields a `fetch`
 * answer carries, without fetchd's job machine, stages, options, limits, cookies, timings or
 * checks. The main thread accepts and gives connections to the threads in turn. Answers of one turn of the loop are written per connection in one write. Driven by
 * bench/fetchd_load like fetchd; runs until killed.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct buf { char *p; size_t len, cap; };

static void buf_add(struct buf *b, const char *s, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

/* A JSON string, quoted and escaped. */
static void buf_str(struct buf *b, const char *s, size_t n, int lower) {
    buf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; buf_add(b, e, 2); }
        else if (c < 0x20) { char e[8]; int k = snprintf(e, sizeof e, "\\u%04x", c); buf_add(b, e, (size_t)k); }
        else { char d = lower ? (char)tolower(c) : (char)c; buf_add(b, &d, 1); }
    }
    buf_add(b, "\"", 1);
}

struct conn { int fd; struct buf in, out; int dirty; struct conn *next_dirty; };

struct xfer {
    CURL *easy;
    struct conn *conn;
    json_int_t id;
    struct buf body, headers;   /* headers: ,"name":"value" pairs */
    struct xfer *next_free;
};

struct loop { int ep; CURLM *multi; struct xfer *free_x; struct conn *dirty; };

static size_t on_body(char *p, size_t s, size_t n, void *ud) {
    buf_add(&((struct xfer *)ud)->body, p, s * n);
    return s * n;
}

static size_t on_header(char *p, size_t s, size_t n, void *ud) {
    struct xfer *x = ud;
    size_t len = s * n;
    char *colon = memchr(p, ':', len);
    if (!colon) return len;                       /* the status line, the blank line */
    size_t name = (size_t)(colon - p), v = name + 1;
    while (v < len && (p[v] == ' ' || p[v] == '\t')) v++;
    size_t end = len;
    while (end > v && (p[end - 1] == '\r' || p[end - 1] == '\n' || p[end - 1] == ' ')) end--;
    buf_add(&x->headers, ",", 1);
    buf_str(&x->headers, p, name, 1);
    buf_add(&x->headers, ":", 1);
    buf_str(&x->headers, p + v, end - v, 0);
    return len;
}

static void start(struct loop *l, struct conn *c, const char *line, size_t n) {
    json_error_t e;
    json_t *req = json_loadb(line, n, 0, &e);
    json_t *id = req ? json_object_get(req, "id") : NULL;
    json_t *url = req ? json_object_get(json_object_get(req, "params"), "url") : NULL;
    if (!json_is_integer(id) || !json_is_string(url)) { json_decref(req); return; }
    struct xfer *x = l->free_x;
    if (x) l->free_x = x->next_free;
    else {
        x = calloc(1, sizeof *x);
        x->easy = curl_easy_init();
        curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(x->easy, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x);
        curl_easy_setopt(x->easy, CURLOPT_NOSIGNAL, 1L);
    }
    x->conn = c;
    x->id = json_integer_value(id);
    x->body.len = x->headers.len = 0;
    curl_easy_setopt(x->easy, CURLOPT_URL, json_string_value(url));
    json_decref(req);
    curl_multi_add_handle(l->multi, x->easy);
}

static void answer(struct loop *l, struct xfer *x, CURLcode code) {
    struct conn *c = x->conn;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    char head[96];
    int k = snprintf(head, sizeof head, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"status\":%ld,\"headers\":{",
                     (long long)x->id, code == CURLE_OK ? status : 0L);
    buf_add(&c->out, head, (size_t)k);
    if (x->headers.len > 0) buf_add(&c->out, x->headers.p + 1, x->headers.len - 1);
    buf_add(&c->out, "},\"body\":", 9);
    buf_str(&c->out, x->body.p ? x->body.p : "", x->body.len, 0);
    buf_add(&c->out, "}}\n", 3);
    if (!c->dirty) { c->dirty = 1; c->next_dirty = l->dirty; l->dirty = c; }
    curl_multi_remove_handle(l->multi, x->easy);
    x->next_free = l->free_x;
    l->free_x = x;
}

static void flush(struct loop *l) {
    for (struct conn *c = l->dirty; c; c = c->next_dirty) {
        size_t off = 0;
        while (off < c->out.len) {
            ssize_t w = write(c->fd, c->out.p + off, c->out.len - off);
            if (w < 0) { if (errno == EINTR) continue; break; }   /* a bench client reads at once */
            off += (size_t)w;
        }
        c->out.len = 0;
        c->dirty = 0;
    }
    l->dirty = NULL;
}

static void readable(struct loop *l, struct conn *c) {
    char tmp[65536];
    ssize_t r = read(c->fd, tmp, sizeof tmp);
    if (r <= 0) {
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
        epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);          /* the bench's clients leave only when every answer came */
        return;
    }
    buf_add(&c->in, tmp, (size_t)r);
    char *s = c->in.p, *end = c->in.p + c->in.len, *nl;
    while ((nl = memchr(s, '\n', (size_t)(end - s))) != NULL) {
        start(l, c, s, (size_t)(nl - s));
        s = nl + 1;
    }
    memmove(c->in.p, s, (size_t)(end - s));
    c->in.len = (size_t)(end - s);
}

static void *run(void *arg) {
    struct loop *l = arg;
    l->multi = curl_multi_init();
    for (;;) {
        int running;
        curl_multi_perform(l->multi, &running);
        CURLMsg *m; int left;
        while ((m = curl_multi_info_read(l->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            void *p; curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
            answer(l, p, m->data.result);
        }
        flush(l);
        struct curl_waitfd extra = {.fd = l->ep, .events = CURL_WAIT_POLLIN};
        curl_multi_poll(l->multi, &extra, 1, 1000, NULL);
        if (!(extra.revents & CURL_WAIT_POLLIN)) continue;
        struct epoll_event evs[64];
        int n = epoll_wait(l->ep, evs, 64, 0);
        for (int i = 0; i < n; i++) {
            readable(l, evs[i].data.ptr);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: rpc_floor SOCKET THREADS\n"); return 2; }
    const char *path = argv[1];
    int threads = 1;
    if (strcmp(argv[1], "--socket") == 0) path = argv[2]; else threads = atoi(argv[2]);
    if (threads < 1 || threads > 16) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) { perror("listen"); return 2; }
    pthread_t t[16];
    struct loop *loops = calloc((size_t)threads, sizeof *loops);
    for (int i = 0; i < threads; i++) {
        loops[i].ep = epoll_create1(0);
        pthread_create(&t[i], NULL, run, &loops[i]);
    }
    /* New connections go to the threads in turn, as fetchd's do. */
    for (unsigned next = 0;; next++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) { if (errno == EINTR || errno == ECONNABORTED) continue; perror("accept"); return 1; }
        struct conn *c = calloc(1, sizeof *c);
        c->fd = cfd;
        struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(loops[next % (unsigned)threads].ep, EPOLL_CTL_ADD, cfd, &cev);
    }
}
