/* The streaming bench rows' client (bench/run.py, docs/performance.md).
 *
 *   stream_bench fd SOCKET URL          the body written by the daemon to this process's stdout
 *                                       ("bodyTo": "fd", fetchd_fetch_to_fd); run it as
 *                                       `stream_bench fd ... | cat > /dev/null`
 *   stream_bench chunks SOCKET URL      the body in bodyChunk notifications (fetchd_fetch_stream)
 *   stream_bench events SOCKET URL      sseEvent notifications ("responseBody": "events"), the job
 *                                       cancelled after the URL's n= events
 *   stream_bench direct URL             the same event stream read from its own TCP socket
 *
 * Each prints one JSON line on stderr: bytes (fd, chunks), or, for events and direct, the
 * events' count and the percentiles of how long each took from the server's write (the
 * CLOCK_MONOTONIC nanoseconds at the start of its data, bench/sse_server.c) to this process
 * having it in hand. Exit status 0 on success. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fetchd.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct lat {
    uint64_t *ns;
    size_t n, cap;
    uint64_t bytes;
    size_t want; /* events: stop after this many (the URL's n=), as an event source would
                  * otherwise reconnect when the server closes */
} lat;

static void lat_add(lat *l, uint64_t stamp) {
    uint64_t t = now_ns();
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16384;
        l->ns = realloc(l->ns, l->cap * sizeof *l->ns);
        if (!l->ns) abort();
    }
    l->ns[l->n++] = t > stamp ? t - stamp : 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_us(const lat *l, double p) {
    size_t i = (size_t)(p * (double)(l->n - 1) + 0.5);
    return (double)l->ns[i] / 1000.0;
}

static int report_latency(lat *l) {
    if (l->n == 0) {
        fprintf(stderr, "{\"error\": \"no events\"}\n");
        return 1;
    }
    qsort(l->ns, l->n, sizeof *l->ns, cmp_u64);
    fprintf(stderr, "{\"events\": %zu, \"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n",
            l->n, pct_us(l, 0.50), pct_us(l, 0.90), pct_us(l, 0.99), pct_us(l, 1.0));
    return 0;
}

static int on_chunk(const unsigned char *data, size_t len, void *user) {
    (void)data;
    ((lat *)user)->bytes += len;
    return 0;
}

static int on_event(const char *event, const char *data, const char *id, void *user) {
    (void)event, (void)id;
    lat *l = user;
    lat_add(l, strtoull(data, NULL, 10));
    return l->n >= l->want;
}

static int via_daemon(const char *mode, const char *sock, const char *url) {
    fetchd_client *c = NULL;
    fetchd_error err = {0};
    if (fetchd_connect(sock, &c, &err) != FETCHD_OK) {
        fprintf(stderr, "connect: %s\n", err.message);
        return 1;
    }
    fetchd_set_timeout(c, 600000);
    json_t *p = json_pack("{s:s}", "url", url);
    fetchd_response r = {0};
    fetchd_status st;
    lat l = {0};
    const char *n = strstr(url, "n=");
    l.want = n ? strtoul(n + 2, NULL, 10) : 10000;
    if (!strcmp(mode, "fd")) {
        st = fetchd_fetch_to_fd(c, p, 1, &r, &err);
        if (st == FETCHD_OK) l.bytes = (uint64_t)json_integer_value(json_object_get(r.result, "bytes"));
    } else {
        fetchd_stream_callbacks cb = {0};
        if (!strcmp(mode, "chunks")) cb.on_chunk = on_chunk;
        else cb.on_event = on_event;
        st = fetchd_fetch_stream(c, p, &cb, &l, &r, &err);
    }
    json_decref(p);
    if (!strcmp(mode, "events") && st == FETCHD_ERR_RPC && err.code == FETCHD_RPC_CANCELLED && l.n == l.want)
        st = FETCHD_OK, r.status = 200; /* stopped by on_event after the last one */
    if (st != FETCHD_OK || r.status != 200) {
        fprintf(stderr, "%s: status %d, %s\n", mode, r.status, st == FETCHD_OK ? "" : err.message);
        return 1;
    }
    fetchd_response_free(&r);
    fetchd_close(c);
    if (!strcmp(mode, "events")) return report_latency(&l);
    fprintf(stderr, "{\"bytes\": %llu}\n", (unsigned long long)l.bytes);
    return 0;
}

/* GET url (http://127.0.0.1:PORT/path) on a socket of its own; each event's "data: " stamp. */
static int direct(const char *url) {
    int port = 0;
    char path[1024] = "/";
    if (sscanf(url, "http://127.0.0.1:%d%1023s", &port, path) < 1) {
        fprintf(stderr, "direct: want http://127.0.0.1:PORT/path, got %s\n", url);
        return 1;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("direct: connect");
        return 1;
    }
    char req[1200];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) return 1;
    static char buf[1 << 16];
    size_t have = 0;
    int in_body = 0;
    lat l = {0};
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - have - 1);
        if (r <= 0) break;
        have += (size_t)r;
        buf[have] = 0;
        char *p = buf;
        if (!in_body) {
            char *e = strstr(buf, "\r\n\r\n");
            if (!e) continue;
            p = e + 4;
            in_body = 1;
        }
        for (;;) {  /* whole events only: up to a blank line */
            char *end = strstr(p, "\n\n");
            if (!end) break;
            if (!strncmp(p, "data: ", 6)) lat_add(&l, strtoull(p + 6, NULL, 10));
            p = end + 2;
        }
        have = (size_t)(buf + have - p);
        memmove(buf, p, have);
    }
    close(fd);
    return report_latency(&l);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "direct")) return direct(argv[2]);
    if (argc == 4 && (!strcmp(argv[1], "fd") || !strcmp(argv[1], "chunks") || !strcmp(argv[1], "events")))
        return via_daemon(argv[1], argv[2], argv[3]);
    fprintf(stderr, "usage: stream_bench fd|chunks|events SOCKET URL | stream_bench direct URL\n");
    return 2;
}
