/* upload_sink: an HTTP/1.1 server on 127.0.0.1 that reads every request body fully and drops it
 * (benchmark, not a test; nginx's `return` does not promise to read a body first).
 *
 *   upload_sink PORT
 *
 * One thread per connection, keep-alive. Honours `Expect: 100-continue`, Content-Length and
 * chunked bodies. Answers 200 with the number of body bytes it read as the text body, so the
 * benchmark can check that the whole upload arrived. Runs until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF (1 << 20)
typedef struct { int fd; char *buf; size_t start, len; } conn;

static int fill(conn *c) {                       /* read more; keeps unread bytes */
    if (c->start > 0) { memmove(c->buf, c->buf + c->start, c->len); c->start = 0; }
    if (c->len == BUF) return -1;
    ssize_t r = read(c->fd, c->buf + c->len, BUF - c->len);
    if (r <= 0) return -1;
    c->len += (size_t)r; return 0;
}
static char *find_line(conn *c) {               /* returns a NUL-terminated line, consumed */
    for (;;) {
        char *p = memmem(c->buf + c->start, c->len, "\r\n", 2);
        if (p) { *p = 0; char *l = c->buf + c->start; size_t n = (size_t)(p - l) + 2; c->start += n; c->len -= n; return l; }
        if (fill(c)) return NULL;
    }
}
static long long skip(conn *c, long long n) {   /* consume n body bytes */
    long long got = 0;
    while (got < n) {
        if (c->len == 0) { c->start = 0; ssize_t r = read(c->fd, c->buf, BUF); if (r <= 0) return -1; c->len = (size_t)r; }
        size_t k = c->len < (size_t)(n - got) ? c->len : (size_t)(n - got);
        c->start += k; c->len -= k; got += (long long)k;
    }
    return got;
}

static void *serve(void *arg) {
    conn c = {.fd = (int)(long)arg, .buf = malloc(BUF)};
    for (;;) {
        char *l = find_line(&c);
        if (!l) break;
        if (!*l) continue;
        long long clen = 0; int chunked = 0, expect = 0, close_after = 0;
        while ((l = find_line(&c)) && *l) {
            if (!strncasecmp(l, "content-length:", 15)) clen = atoll(l + 15);
            else if (!strncasecmp(l, "transfer-encoding:", 18) && strcasestr(l, "chunked")) chunked = 1;
            else if (!strncasecmp(l, "expect:", 7) && strcasestr(l, "100-continue")) expect = 1;
            else if (!strncasecmp(l, "connection:", 11) && strcasestr(l, "close")) close_after = 1;
        }
        if (!l) break;
        if (expect && write(c.fd, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 25) break;
        long long body = 0;
        if (chunked) {
            for (;;) {
                char *s = find_line(&c); if (!s) goto out;
                long long n = strtoll(s, NULL, 16);
                if (n == 0) { while ((s = find_line(&c)) && *s) {} if (!s) goto out; break; }
                if (skip(&c, n) < 0 || !find_line(&c)) goto out;
                body += n;
            }
        } else if (clen > 0) {
            if (skip(&c, clen) < 0) break;
            body = clen;
        }
        char num[32], resp[256];
        int nl = snprintf(num, sizeof num, "%lld", body);
        int n = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", nl, num);
        if (write(c.fd, resp, (size_t)n) != n || close_after) break;
    }
out:
    close(c.fd); free(c.buf);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: upload_sink PORT\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 128)) { perror("upload_sink"); return 1; }
    for (;;) {
        int fd = accept(s, NULL, NULL);
        if (fd < 0) continue;
        pthread_t t; pthread_create(&t, NULL, serve, (void *)(long)fd); pthread_detach(t);
    }
}
