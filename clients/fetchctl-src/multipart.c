/* -F parts in the order they were given, as curl sends them. The daemon's `upload` streams
 * files from disk but sends its form fields before its files and takes one value per field
 * name; when the command line needs more (a field after a file, a repeated field name),
 * fetchctl writes the multipart/form-data body itself, as curl formats it. */
#define _GNU_SOURCE
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bodies up to this size go inline (bodyBase64); larger ones through a temporary file. */
#define INLINE_MULTIPART_MAX (4u << 20)

int form_needs_client_body(const request_opts *o) {
    int seen_file = 0;
    for (size_t i = 0; i < o->n_items; i++) {
        const item *it = &o->items[i];
        if (it->kind == ITEM_FORM_FILE)
            seen_file = 1;
        if (it->kind != ITEM_FORM_FIELD)
            continue;
        if (seen_file || !valid_utf8(it->b, strlen(it->b)))
            return 1;
        for (size_t j = 0; j < i; j++)
            if (o->items[j].kind == ITEM_FORM_FIELD && !strcmp(o->items[j].a, it->a))
                return 1;
    }
    return 0;
}

/* A name or file name in a Content-Disposition, escaped as curl 7.88 does. */
static void quoted(buf *b, const char *s) {
    buf_addc(b, '"');
    for (; *s; s++) {
        if (*s == '"') buf_adds(b, "%22");
        else if (*s == '\r') buf_adds(b, "%0D");
        else if (*s == '\n') buf_adds(b, "%0A");
        else buf_addc(b, *s);
    }
    buf_addc(b, '"');
}

/* The part's head (boundary line and headers) into b. */
static void part_head(buf *b, const char *boundary, const item *it) {
    buf_addf(b, "--%s\r\nContent-Disposition: form-data; name=", boundary);
    quoted(b, it->a);
    if (it->kind == ITEM_FORM_FILE) {
        const char *name = it->d;
        if (!name) {
            const char *slash = strrchr(it->b, '/');
            name = slash ? slash + 1 : it->b;
        }
        buf_adds(b, "; filename=");
        quoted(b, name);
        buf_addf(b, "\r\nContent-Type: %s", it->c ? it->c : curl_mime_type(name));
    }
    buf_adds(b, "\r\n\r\n");
}

static int copy_file(int out, const char *path) {
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    char chunk[1 << 16];
    for (;;) {
        ssize_t n = read(in, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(in);
            return n < 0 ? -1 : 0;
        }
        if (write_all(out, chunk, (size_t)n) != 0) {
            close(in);
            return -1;
        }
    }
}

int add_client_multipart(const request_opts *o, json_t *params, json_t *headers, char **tmp_path) {
    char boundary[64];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    srandom((unsigned)(ts.tv_nsec ^ getpid()));
    snprintf(boundary, sizeof boundary, "------------------------%08lx%08lx", (unsigned long)random(),
             (unsigned long)random());
    /* the size first: files are checked (curl's 26) and small bodies kept in memory */
    size_t total = 0;
    for (size_t i = 0; i < o->n_items; i++) {
        const item *it = &o->items[i];
        if (it->kind == ITEM_FORM_FIELD) {
            total += strlen(it->b) + 256;
        } else if (it->kind == ITEM_FORM_FILE) {
            struct stat st;
            if (stat(it->b, &st) != 0 || S_ISDIR(st.st_mode) || access(it->b, R_OK) != 0) {
                if (!o->silent || o->show_error)
                    say("Failed to open/read local data from file/application: %s", it->b);
                return 26;
            }
            total += (size_t)st.st_size + 512;
        }
    }
    int fd = -1;
    if (total > INLINE_MULTIPART_MAX) {
        const char *dir = getenv("TMPDIR");
        char *path = xasprintf("%s/fetchctl-form-XXXXXX", dir && *dir ? dir : "/tmp");
        fd = mkstemp(path);
        if (fd < 0) {
            say("cannot create a temporary file for the form (%s): %s", path, strerror(errno));
            free(path);
            return 26;
        }
        *tmp_path = path;
    }
    buf body = {0};
    int failed = 0;
    for (size_t i = 0; i < o->n_items && !failed; i++) {
        const item *it = &o->items[i];
        if (it->kind != ITEM_FORM_FILE && it->kind != ITEM_FORM_FIELD)
            continue;
        part_head(&body, boundary, it);
        if (it->kind == ITEM_FORM_FIELD) {
            buf_adds(&body, it->b);
        } else if (fd < 0) {
            size_t len;
            char *content = read_file(it->b, &len);
            if (!content) {
                failed = 1;
                break;
            }
            buf_add(&body, content, len);
            free(content);
        } else {
            if (write_all(fd, body.data, body.len) != 0 || copy_file(fd, it->b) != 0)
                failed = 1;
            body.len = 0;
        }
        buf_adds(&body, "\r\n");
    }
    buf_addf(&body, "--%s--\r\n", boundary);
    if (!failed && fd >= 0 && write_all(fd, body.data, body.len) != 0)
        failed = 1;
    if (fd >= 0)
        close(fd);
    if (failed) {
        if (!o->silent || o->show_error)
            say("Failed to open/read local data from file/application");
        buf_free(&body);
        return 26;
    }
    if (fd >= 0) {
        json_object_set_new(params, "bodyFile", json_string(*tmp_path));
    } else {
        char *b64 = base64_encode((const unsigned char *)body.data, body.len);
        json_object_set_new(params, "bodyBase64", json_string(b64));
        free(b64);
    }
    buf_free(&body);
    int has_ct = 0;
    const char *key;
    json_t *v;
    json_object_foreach(headers, key, v) {
        if (!strcasecmp(key, "content-type"))
            has_ct = 1;
    }
    if (!has_ct) {
        char *ct = xasprintf("multipart/form-data; boundary=%s", boundary);
        json_object_set_new(headers, "Content-Type", json_string(ct));
        free(ct);
    }
    if (!o->method)
        json_object_set_new(params, "method", json_string("POST"));
    return 0;
}
