/* fetchd_load: drive fetchd with small `fetch` requests as fast as possible (benchmark, not a test).
 *
 *   fetchd_load SOCKET URL TOTAL PROCS INFLIGHT
 *
 * Forks PROCS client processes; each opens one connection to the daemon's Unix socket and keeps
 * INFLIGHT requests pipelined on it (writes request lines, counts answer lines) until it has
 * sent its share of TOTAL. Concurrency seen by the daemon = PROCS x INFLIGHT. Plain sockets, no
 * JSON library: an answer counts as ok when its line contains "status":200.
 * Prints one JSON line: {"requests":N,"ok":N,"errors":N,"seconds":S}; with PROCS and INFLIGHT 1
 * also each request's latency (its line written -> its answer line read) as p50_us, p90_us,
 * p99_us, max_us. Exit 1 on any error.
 * Every loop is bounded: each client stops after its share or after 120 s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench_io.h"

static int connect_unix(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); exit(2); }
    return fd;
}

/* Writes k request lines in one write(). */
static void send_batch(int fd, char *out, const char *url, int id, long *sent, long k) {
    size_t o = 0;
    for (long j = 0; j < k; j++, (*sent)++)
        o += (size_t)sprintf(out + o, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"fetch\",\"params\":{\"url\":\"%s\"}}\n",
                             (long)id * 100000000L + *sent, url);
    if (write_all(fd, out, o) != 0) { perror("write"); exit(2); }
}

/* One client: returns ok count in *ok, errors in *err. */
static void client(const char *sock, const char *url, long share, int inflight, int go_fd, int id,
                   long *ok_out, long *err_out, double *lat) {
    int fd = connect_unix(sock);
    char c; if (read(go_fd, &c, 1) != 1) exit(2);   /* barrier: wait for the start signal */
    size_t cap = 1 << 20, len = 0;
    char *in = malloc(cap), *out = malloc((size_t)inflight * 512 + 512);
    long sent = 0, answered = 0, ok = 0, err = 0;
    double deadline = now() + 120;
    long first = share < inflight ? share : inflight;
    double sent_at = now();
    send_batch(fd, out, url, id, &sent, first);
    while (answered < share) {
        if (now() > deadline) { fprintf(stderr, "fetchd_load: timeout\n"); exit(2); }
        if (len == cap) { cap *= 2; in = realloc(in, cap); }
        ssize_t r = read(fd, in + len, cap - len);
        if (r <= 0) { if (r < 0 && errno == EINTR) continue; fprintf(stderr, "fetchd_load: daemon closed\n"); exit(2); }
        len += (size_t)r;
        char *start = in, *nl;
        long got = 0;
        while ((nl = memchr(start, '\n', (size_t)(in + len - start))) != NULL) {
            *nl = 0;
            if (strstr(start, "\"status\":200")) ok++; else { err++; if (err <= 3) fprintf(stderr, "fetchd_load: %.300s\n", start); }
            if (lat) lat[answered + got] = now() - sent_at;
            got++; start = nl + 1;
        }
        answered += got;
        memmove(in, start, (size_t)(in + len - start)); len = (size_t)(in + len - start);
        long more = share - sent; if (more > got) more = got;
        if (more > 0) { sent_at = now(); send_batch(fd, out, url, id, &sent, more); }
    }
    close(fd);
    *ok_out = ok; *err_out = err;
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: fetchd_load SOCKET URL TOTAL PROCS INFLIGHT\n"); return 2; }
    const char *sock = argv[1], *url = argv[2];
    long total = atol(argv[3]); int procs = atoi(argv[4]), inflight = atoi(argv[5]);
    if (total <= 0 || procs <= 0 || procs > 256 || inflight <= 0 || inflight > 4096) return 2;
    int go[2], res[2];
    if (pipe(go) || pipe(res)) return 2;
    pid_t pids[256];
    int lat_pipe[2];
    double *lat = procs == 1 && inflight == 1 ? calloc((size_t)total, sizeof *lat) : NULL;
    if (pipe(lat_pipe)) return 2;
    for (int i = 0; i < procs; i++) {
        long share = total / procs + (i < total % procs ? 1 : 0);
        pid_t p = fork();
        if (p == 0) {
            close(go[1]); close(res[0]);
            long ok = 0, err = 0;
            client(sock, url, share, inflight, go[0], i, &ok, &err, lat);
            long r2[2] = {ok, err};
            if (write(res[1], r2, sizeof r2) != sizeof r2) _exit(2);
            if (lat && write_all(lat_pipe[1], (const char *)lat, (size_t)share * sizeof *lat) != 0) _exit(2);
            _exit(0);
        }
        pids[i] = p;
    }
    close(go[0]); close(res[1]);
    usleep(100000);                                  /* let every client connect */
    double t0 = now();
    char buf[256]; memset(buf, 'g', sizeof buf);
    if (write(go[1], buf, (size_t)procs) != procs) return 2;
    long ok = 0, err = 0; int failed = 0;
    for (int i = 0; i < procs; i++) {
        long r2[2];
        if (read(res[0], r2, sizeof r2) != sizeof r2) { failed = 1; break; }
        ok += r2[0]; err += r2[1];
    }
    double t1 = now();
    long got_lat = 0;
    if (lat && !failed) {
        close(lat_pipe[1]);
        size_t want = (size_t)total * sizeof *lat, have = 0;
        while (have < want) {
            ssize_t r = read(lat_pipe[0], (char *)lat + have, want - have);
            if (r <= 0) { if (r < 0 && errno == EINTR) continue; break; }
            have += (size_t)r;
        }
        got_lat = (long)(have / sizeof *lat);
    }
    for (int i = 0; i < procs; i++) { int st; waitpid(pids[i], &st, 0); if (!WIFEXITED(st) || WEXITSTATUS(st)) failed = 1; }
    printf("{\"requests\":%ld,\"ok\":%ld,\"errors\":%ld,\"seconds\":%.6f", total, ok, err, t1 - t0);
    if (lat) print_latencies(lat, got_lat);
    printf("}\n");
    return (failed || err || ok != total) ? 1 : 0;
}
