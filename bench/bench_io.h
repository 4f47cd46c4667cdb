/* What the benchmark's C programs share: a monotonic clock and a write that finishes. */
#ifndef FETCHD_BENCH_IO_H
#define FETCHD_BENCH_IO_H
#include <errno.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

static inline double now(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        p += w; n -= (size_t)w;
    }
    return 0;
}
#endif
