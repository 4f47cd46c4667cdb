/* A Server-Sent Events source for the streaming bench rows: each connection gets N events
 * (GET /sse?n=N, default 10000) of 100 bytes each, written one write() per event as fast as
 * the socket takes them, then the connection closes. Each event's data starts with the
 * CLOCK_MONOTONIC time of its write in nanoseconds, so a reader on this machine can tell how
 * long the event took to reach it.
 *
 *   sse_server        prints the port it listens on (127.0.0.1), then serves until killed */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define EVENT_BYTES 100

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *serve(void *arg) {
    int fd = (int)(intptr_t)arg;
    char req[4096];
    size_t got = 0;
    while (got < sizeof req - 1) {
        ssize_t r = read(fd, req + got, sizeof req - 1 - got);
        if (r <= 0) { close(fd); return NULL; }
        got += (size_t)r;
        req[got] = 0;
        if (strstr(req, "\r\n\r\n")) break;
    }
    long n = 10000;
    const char *q = strstr(req, "n=");
    if (q && q < strstr(req, " HTTP/")) n = strtol(q + 2, NULL, 10);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
    if (write_all(fd, head, sizeof head - 1) == 0) {
        char ev[EVENT_BYTES + 1];
        for (long i = 0; i < n; i++) {
            /* "data: <20-digit ns> <padding>\n\n", 100 bytes */
            int k = snprintf(ev, sizeof ev, "data: %020llu ", (unsigned long long)now_ns());
            memset(ev + k, 'x', EVENT_BYTES - 2 - (size_t)k);
            ev[EVENT_BYTES - 2] = '\n';
            ev[EVENT_BYTES - 1] = '\n';
            if (write_all(fd, ev, EVENT_BYTES) != 0) break;
        }
    }
    shutdown(fd, SHUT_WR);
    char sink[256];
    while (read(fd, sink, sizeof sink) > 0) {}
    close(fd);
    return NULL;
}

int main(void) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 128) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
        perror("sse_server");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) continue;
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(intptr_t)fd) != 0) { close(fd); continue; }
        pthread_detach(t);
    }
}
