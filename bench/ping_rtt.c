/* ping_rtt: `ping` round trips over a Unix socket, one in flight (benchmark, not a test).
 *
 *   ping_rtt SOCKET COUNT
 *
 * Sends {"jsonrpc":"2.0","id":N,"method":"ping"} and waits for the answer line, COUNT times
 * (after 200 unmeasured warm-up pings). Prints {"count":N,"p50_us":X,"p99_us":Y,"mean_us":Z}.
 * Bounded: COUNT <= 1,000,000 and 60 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "bench_io.h"

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: ping_rtt SOCKET COUNT\n"); return 2; }
    long count = atol(argv[2]);
    if (count <= 0 || count > 1000000) return 2;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 2; }
    double *rtt = malloc((size_t)count * sizeof *rtt), deadline = now() + 60, sum = 0;
    char out[128], in[4096];
    for (long i = -200; i < count; i++) {
        if (now() > deadline) { fprintf(stderr, "ping_rtt: timeout\n"); return 1; }
        int n = snprintf(out, sizeof out, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"ping\"}\n", i + 200);
        double t0 = now();
        if (write(fd, out, (size_t)n) != n) { perror("write"); return 1; }
        size_t len = 0;
        for (;;) {
            ssize_t r = read(fd, in + len, sizeof in - len);
            if (r <= 0) { fprintf(stderr, "ping_rtt: closed\n"); return 1; }
            len += (size_t)r;
            if (memchr(in, '\n', len)) break;
            if (len == sizeof in) { fprintf(stderr, "ping_rtt: long answer\n"); return 1; }
        }
        double t = (now() - t0) * 1e6;
        if (i == -200 && !strstr(in, "\"pong\"")) { fprintf(stderr, "ping_rtt: unexpected %.200s\n", in); return 1; }
        if (i >= 0) { rtt[i] = t; sum += t; }
    }
    qsort(rtt, (size_t)count, sizeof *rtt, cmp);
    printf("{\"count\":%ld,\"p50_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f}\n", count,
           rtt[count / 2], rtt[(long)(count * 0.99)], sum / count);
    return 0;
}
