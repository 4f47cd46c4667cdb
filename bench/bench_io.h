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

#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints ,"p50_us":..,"p90_us":..,"p99_us":..,"max_us":.. for n latencies in seconds (sorts them). */
static inline void print_latencies(double *lat, long n) {
    if (n <= 0) return;
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    long i50 = (n - 1) * 50 / 100, i90 = (n - 1) * 90 / 100, i99 = (n - 1) * 99 / 100;
    printf(",\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f",
           lat[i50] * 1e6, lat[i90] * 1e6, lat[i99] * 1e6, lat[n - 1] * 1e6);
}
#endif
