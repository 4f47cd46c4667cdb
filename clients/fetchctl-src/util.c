/* Small helpers: buffers, messages, paths, numbers, base64, files. */
#define _GNU_SOURCE
#include "fetchctl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ memory */

static _Noreturn void out_of_memory(void) {
    static const char msg[] = "fetchctl: out of memory\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(EXIT_USAGE);
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        out_of_memory();
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory();
    return p;
}

void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p)
        out_of_memory();
    return p;
}

char *xstrdup(const char *s) {
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *xasprintf(const char *fmt, ...) {
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        out_of_memory();
    va_end(ap);
    return s;
}

/* ----------------------------------------------------------------- buffers */

static void buf_reserve(buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_add(buf *b, const void *data, size_t len) {
    buf_reserve(b, len);
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
}

void buf_adds(buf *b, const char *s) {
    buf_add(b, s, strlen(s));
}

void buf_addc(buf *b, char c) {
    buf_add(b, &c, 1);
}

void buf_addf(buf *b, const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        buf_reserve(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void buf_free(buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void buf_pad(buf *b, const char *s, size_t width) {
    size_t n = strlen(s);
    buf_add(b, s, n);
    /* jq counted characters (code points), not bytes */
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            chars++;
    for (; chars < width; chars++)
        buf_addc(b, ' ');
}

/* ---------------------------------------------------------------- messages */

/* "fetchctl: MESSAGE" and tail on stderr, in one write. */
static void message(const char *tail, const char *fmt, va_list ap) {
    buf b = {0};
    buf_adds(&b, "fetchctl: ");
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) >= 0) {
        buf_adds(&b, s);
        free(s);
    }
    buf_adds(&b, tail);
    (void)!write(2, b.data, b.len);
    buf_free(&b);
}

void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    message("\n", fmt, ap);
    va_end(ap);
}

void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    message("\nTry 'fetchctl --help' for more information.\n", fmt, ap);
    va_end(ap);
    exit(EXIT_USAGE);
}

/* ------------------------------------------------------------------- paths */

char *abs_path(const char *p) {
    while (p[0] == '.' && p[1] == '/')
        p += 2;
    if (p[0] == '/')
        return xstrdup(p);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return xstrdup(p);
    if (p[0] == 0 || (p[0] == '.' && p[1] == 0))
        return xstrdup(cwd);
    size_t n = strlen(cwd);
    while (n > 1 && cwd[n - 1] == '/')
        cwd[--n] = 0;
    return xasprintf("%s/%s", strcmp(cwd, "/") ? cwd : "", p);
}

/* ----------------------------------------------------------------- numbers */

int is_int(const char *s) {
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

int is_signed_int(const char *s) {
    return is_int(*s == '-' ? s + 1 : s);
}

int is_number(const char *s) {
    const char *dot = strchr(s, '.');
    if (!dot)
        return is_int(s);
    char *head = xstrndup(s, (size_t)(dot - s));
    int ok = is_int(head) && is_int(dot + 1);
    free(head);
    return ok;
}

void human_bytes(buf *b, int64_t n) {
    if (n < 1024)
        buf_addf(b, "%lld B", (long long)n);
    else if (n < 1048576)
        buf_addf(b, "%lld.%lld KiB", (long long)(n / 1024), (long long)(n % 1024 * 10 / 1024));
    else if (n < 1073741824)
        buf_addf(b, "%lld.%lld MiB", (long long)(n / 1048576), (long long)(n % 1048576 * 10 / 1048576));
    else
        buf_addf(b, "%lld.%lld GiB", (long long)(n / 1073741824), (long long)(n % 1073741824 * 10 / 1073741824));
}

int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ------------------------------------------------------------------- files */

int readable_file(const char *path) {
    struct stat st;
    return access(path, R_OK) == 0 && stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

char *read_file(const char *path, size_t *len) {
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (fd)
            close(fd);
        errno = EISDIR;
        return NULL;
    }
    buf b = {0};
    buf_add(&b, "", 0);
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            if (fd)
                close(fd);
            buf_free(&b);
            errno = e;
            return NULL;
        }
        if (n == 0)
            break;
        buf_add(&b, chunk, (size_t)n);
    }
    if (fd)
        close(fd);
    *len = b.len;
    return b.data;
}

char *next_line(char **cursor, char *end) {
    char *line = *cursor;
    if (line >= end)
        return NULL;
    char *nl = memchr(line, '\n', (size_t)(end - line));
    char *stop = nl ? nl : end;
    if (stop > line && stop[-1] == '\r')
        stop--;
    *stop = 0;
    *cursor = nl ? nl + 1 : end;
    return line;
}

int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* -------------------------------------------------------------------- text */

int valid_utf8(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n;
        unsigned min;
        if (c == 0)
            return 0;
        if (c < 0x80) {
            p++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) n = 1, min = 0x80, c &= 0x1F;
        else if ((c & 0xF0) == 0xE0) n = 2, min = 0x800, c &= 0x0F;
        else if ((c & 0xF8) == 0xF0) n = 3, min = 0x10000, c &= 0x07;
        else return 0;
        if ((size_t)(end - p) <= n)
            return 0;
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            c = (c << 6) | (p[i] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return 0;
        p += n + 1;
    }
    return 1;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const unsigned char *data, size_t len) {
    char *out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
    size_t i = 0;
    for (; i + 2 < len; i += 3) {
        unsigned v = (unsigned)data[i] << 16 | (unsigned)data[i + 1] << 8 | data[i + 2];
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = B64[(v >> 6) & 63];
        *o++ = B64[v & 63];
    }
    if (i < len) {
        unsigned v = (unsigned)data[i] << 16 | (i + 1 < len ? (unsigned)data[i + 1] << 8 : 0);
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = i + 1 < len ? B64[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = 0;
    return out;
}

size_t base64_decoded_size(const char *in) {
    size_t n = strlen(in);
    while (n && in[n - 1] == '=')
        n--;
    return n * 3 / 4;
}

unsigned char *base64_decode(const char *in, size_t in_len, size_t *out_len) {
    return fetchd_base64_decode(in, in_len, out_len);
}

/* -------------------------------------------------------------------- json */

const char *jstr(json_t *obj, const char *key) {
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

void json_alt(buf *b, json_t *v, const char *fallback) {
    if (!v || json_is_null(v) || json_is_false(v))
        buf_adds(b, fallback);
    else
        json_text(b, v);
}

void json_text(buf *b, json_t *v) {
    if (!v || json_is_null(v))
        return;
    if (json_is_string(v))
        buf_add(b, json_string_value(v), json_string_length(v));
    else
        json_write(b, v, 0);
}
