/* What the test programs of libfetchd share: CHECK counts each check and prints a line for
 * each one that fails; url() joins the test server's base URL and a path (malloc'd). */
#ifndef FETCHD_TESTS_CHECK_H
#define FETCHD_TESTS_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static const char *base;
static int checks, failures;

#define CHECK(cond, ...) do { \
        checks++; \
        if (!(cond)) { \
            failures++; \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__); \
            fputc('\n', stderr); \
        } \
    } while (0)

static inline char *url(const char *path) {
    char *u = NULL;
    if (asprintf(&u, "%s%s", base, path) < 0)
        abort();
    return u;
}
#endif
