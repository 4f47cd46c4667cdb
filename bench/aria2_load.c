/* aria2_load: drive aria2 the way fetchd's clients drive fetchd (benchmark, not a test).
 *
 *   aria2_load PORT URL TOTAL INFLIGHT PREFIX
 *
 * One WebSocket connection to aria2's JSON-RPC (ws://127.0.0.1:PORT/jsonrpc, the transport on
 * which aria2 pushes completion notifications). One `aria2.addUri` message per request, saved
 * as PREFIX-N; INFLIGHT requests are kept going: each `aria2.onDownloadComplete` notification
 * (or `onDownloadError`, or an error answer to addUri) lets the next request go. This is what
 * fetchd_load does with `fetch` on fetchd's socket: one message per request on a persistent
 * connection, the outcome pushed back. (aria2 sends the notifications of every download to every
 * WebSocket client, so this uses one connection and counts them all: nothing else runs on the
 * aria2 instance during a round.)
 * Prints one JSON line: {"requests":N,"ok":N,"errors":N,"seconds":S}. Exit 1 on any error.
 * Every loop is bounded: it stops after TOTAL outcomes or after 120 s.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "bench_io.h"

/* Appends one masked text frame (clients must mask; a zero key leaves the bytes as they are). */
static size_t frame(char *out, const char *payload, size_t n) {
    size_t o = 0;
    out[o++] = (char)0x81;
    if (n < 126) out[o++] = (char)(0x80 | n);
    else { out[o++] = (char)(0x80 | 126); out[o++] = (char)(n >> 8); out[o++] = (char)(n & 0xff); }
    memset(out + o, 0, 4); o += 4;
    memcpy(out + o, payload, n);
    return o + n;
}

/* Writes k addUri messages in one write(). */
static void send_batch(int fd, char *out, const char *url, const char *prefix, long *sent, long k) {
    size_t o = 0;
    char msg[1024];
    for (long j = 0; j < k; j++, (*sent)++) {
        int n = snprintf(msg, sizeof msg,
                         "{\"jsonrpc\":\"2.0\",\"id\":\"%ld\",\"method\":\"aria2.addUri\",\"params\":[[\"%s\"],{\"out\":\"%s-%ld\"}]}",
                         *sent, url, prefix, *sent);
        if (n <= 0 || n >= (int)sizeof msg) { fprintf(stderr, "aria2_load: URL too long\n"); exit(2); }
        o += frame(out + o, msg, (size_t)n);
    }
    if (write_all(fd, out, o) != 0) { perror("write"); exit(2); }
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: aria2_load PORT URL TOTAL INFLIGHT PREFIX\n"); return 2; }
    int port = atoi(argv[1]);
    const char *url = argv[2], *prefix = argv[5];
    long total = atol(argv[3]); long inflight = atol(argv[4]);
    if (port <= 0 || total <= 0 || inflight <= 0 || inflight > 4096 || strlen(url) > 512) return 2;

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 2; }
    int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    char hs[512];
    int hn = snprintf(hs, sizeof hs,
                      "GET /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: ZmV0Y2hkLWJlbmNoLWtleQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", port);
    if (write_all(fd, hs, (size_t)hn) != 0) { perror("write"); return 2; }
    size_t cap = 1 << 20, len = 0;
    char *in = malloc(cap), *out = malloc((size_t)inflight * 1100 + 1100);
    char *end = NULL;
    double deadline = now() + 10;
    while (!end) {
        if (now() > deadline || len == cap) { fprintf(stderr, "aria2_load: no handshake\n"); return 2; }
        ssize_t r = read(fd, in + len, cap - len - 1);
        if (r <= 0) { fprintf(stderr, "aria2_load: closed during the handshake\n"); return 2; }
        len += (size_t)r; in[len] = 0;
        end = strstr(in, "\r\n\r\n");
    }
    if (strncmp(in, "HTTP/1.1 101", 12) != 0) { fprintf(stderr, "aria2_load: %.200s\n", in); return 2; }
    size_t used = (size_t)(end + 4 - in);
    memmove(in, in + used, len - used); len -= used;

    long sent = 0, done = 0, ok = 0, err = 0;
    double t0 = now();
    deadline = t0 + 120;
    send_batch(fd, out, url, prefix, &sent, total < inflight ? total : inflight);
    while (done < total) {
        /* Parse every whole frame in the buffer. */
        size_t p = 0; long finished = 0;
        for (;;) {
            if (len - p < 2) break;
            unsigned char b0 = (unsigned char)in[p], b1 = (unsigned char)in[p + 1];
            size_t hdr = 2; uint64_t n = b1 & 0x7f;
            if (n == 126) { if (len - p < 4) break; n = ((uint64_t)(unsigned char)in[p + 2] << 8) | (unsigned char)in[p + 3]; hdr = 4; }
            else if (n == 127) {
                if (len - p < 10) break;
                n = 0; for (int i = 0; i < 8; i++) n = (n << 8) | (unsigned char)in[p + 2 + i];
                hdr = 10;
            }
            if (b1 & 0x80) { fprintf(stderr, "aria2_load: masked frame from the server\n"); return 2; }
            if (len - p < hdr + n) break;
            char *payload = in + p + hdr;
            int opcode = b0 & 0x0f;
            if (opcode == 8) { fprintf(stderr, "aria2_load: aria2 closed the WebSocket\n"); return 2; }
            if (opcode == 1) {
                char saved = payload[n]; payload[n] = 0;
                if (strstr(payload, "\"aria2.onDownloadComplete\"")) { ok++; finished++; }
                else if (strstr(payload, "\"aria2.onDownloadError\"")) {
                    err++; finished++;
                    if (err <= 3) fprintf(stderr, "aria2_load: %.300s\n", payload);
                } else if (strstr(payload, "\"error\"") && !strstr(payload, "\"method\"")) {
                    err++; finished++;  /* addUri refused: no download, no notification */
                    if (err <= 3) fprintf(stderr, "aria2_load: %.300s\n", payload);
                }
                payload[n] = saved;
            }
            p += hdr + (size_t)n;
        }
        memmove(in, in + p, len - p); len -= p;
        done += finished;
        long more = total - sent; if (more > finished) more = finished;
        if (more > 0) send_batch(fd, out, url, prefix, &sent, more);
        if (done >= total) break;
        if (now() > deadline) { fprintf(stderr, "aria2_load: timeout (%ld of %ld)\n", done, total); return 2; }
        if (len == cap) { cap *= 2; in = realloc(in, cap); }
        ssize_t r = read(fd, in + len, cap - len - 1);
        if (r <= 0) { if (r < 0 && errno == EINTR) continue; fprintf(stderr, "aria2_load: aria2 closed\n"); return 2; }
        len += (size_t)r;
    }
    double t1 = now();
    close(fd);
    printf("{\"requests\":%ld,\"ok\":%ld,\"errors\":%ld,\"seconds\":%.6f}\n", total, ok, err, t1 - t0);
    return (err || ok != total) ? 1 : 0;
}
