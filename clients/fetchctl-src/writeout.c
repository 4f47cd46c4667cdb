/* -w FORMAT: curl's variables, printed to stdout after the body (after a failure too, with
 * http_code 000). Unknown variables are printed as written. */
#define _GNU_SOURCE
#include "request.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What -w reads of a transfer, gathered once. */
typedef struct facts {
    const char *url_effective, *content_type, *remote_ip, *method, *http_version;
    json_int_t size, redirects, sent;
    double dns, connect, tls, first, total;   /* seconds */
    json_t *last_hop;
} facts;

static double seconds(json_t *timings, const char *key) {
    json_t *v = json_object_get(timings, key);
    return json_is_number(v) ? json_number_value(v) / 1000.0 : 0;
}

static void gather(const transfer *t, facts *f) {
    memset(f, 0, sizeof *f);
    json_t *r = t->result;
    f->url_effective = jstr(r, "url");
    f->content_type = jstr(json_object_get(r, "headers"), "content-type");
    f->remote_ip = jstr(r, "remoteAddress");
    f->size = json_integer_value(json_object_get(r, "bytes"));
    /* a download answered outside 2xx wrote nothing (bytes 0) but received the body it carries */
    json_t *text = json_object_get(r, "body"), *b64 = json_object_get(r, "bodyBase64");
    json_int_t carried = json_is_string(text) ? (json_int_t)json_string_length(text)
                       : json_is_string(b64) ? (json_int_t)base64_decoded_size(json_string_value(b64)) : 0;
    if (carried > f->size)
        f->size = carried;
    if (t->body_refused)
        f->size = 0;
    f->redirects = json_integer_value(json_object_get(r, "redirects"));
    f->sent = json_integer_value(json_object_get(r, "sentBytes"));
    json_t *timings = json_object_get(r, "timings");
    f->dns = seconds(timings, "dnsMs");
    f->connect = seconds(timings, "connectMs");
    f->tls = seconds(timings, "tlsMs");
    f->first = seconds(timings, "firstByteMs");
    f->total = seconds(timings, "totalMs");
    const char *v = jstr(r, "httpVersion");
    if (!strncmp(v, "HTTP/", 5))
        v += 5;
    f->http_version = *v ? v : "0";
    json_t *exchange = json_object_get(r, "exchange");
    size_t n = json_array_size(exchange);
    f->last_hop = n ? json_array_get(exchange, n - 1) : NULL;
    f->method = jstr(f->last_hop, "method");
}

/* The last answer's headers by lowercase name, each with its values, as curl's
 * %{header_json} writes them. */
static void header_json(buf *b, json_t *hop) {
    json_t *grouped = json_object();
    size_t i;
    json_t *pair;
    json_array_foreach(json_object_get(hop, "responseHeaders"), i, pair) {
        char *name = xstrdup(json_string_value(json_array_get(pair, 0)) ? json_string_value(json_array_get(pair, 0)) : "");
        for (char *c = name; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        json_t *list = json_object_get(grouped, name);
        if (!list) {
            list = json_array();
            json_object_set_new(grouped, name, list);
        }
        json_array_append(list, json_array_get(pair, 1));
        free(name);
    }
    if (!hop) {
        buf_adds(b, "{}");
        json_decref(grouped);
        return;
    }
    json_write_lines(b, grouped);
    json_decref(grouped);
}

/* Removes "." and ".." segments (RFC 3986 5.2.4) from a path that starts with '/'. */
static void remove_dot_segments(buf *out, const char *path) {
    char *p = xstrdup(path);
    char **segs = xcalloc(strlen(p) + 2, sizeof *segs);
    size_t n = 0;
    int trailing = 0;
    char *save = NULL;
    for (char *s = strtok_r(p, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        trailing = 0;
        if (!strcmp(s, ".")) {
            trailing = 1;
        } else if (!strcmp(s, "..")) {
            if (n)
                n--;
            trailing = 1;
        } else {
            segs[n++] = s;
        }
    }
    size_t len = strlen(path);
    if (len && path[len - 1] == '/')
        trailing = 1;
    for (size_t i = 0; i < n; i++) {
        buf_addc(out, '/');
        buf_adds(out, segs[i]);
    }
    if (trailing || n == 0)
        buf_addc(out, '/');
    free(segs);
    free(p);
}

/* A Location resolved against the URL it came from (RFC 3986 5.2), as curl's redirect_url. */
static char *resolve_location(const char *base, const char *ref) {
    const char *scheme_end = strstr(base, "://");
    if (!scheme_end)
        return xstrdup(ref);
    /* an absolute reference: it has a scheme */
    const char *c = ref;
    while (isalnum((unsigned char)*c) || *c == '+' || *c == '-' || *c == '.')
        c++;
    if (c != ref && *c == ':' && isalpha((unsigned char)*ref))
        return xstrdup(ref);
    buf out = {0};
    size_t scheme_len = (size_t)(scheme_end - base);
    if (ref[0] == '/' && ref[1] == '/') {
        buf_add(&out, base, scheme_len + 1);
        buf_adds(&out, ref);
        return out.data;
    }
    const char *authority = scheme_end + 3;
    const char *path = authority + strcspn(authority, "/?#");
    buf_add(&out, base, (size_t)(path - base));
    if (ref[0] == '/') {
        size_t plen = strcspn(ref, "?#");
        char *p = xstrndup(ref, plen);
        remove_dot_segments(&out, p);
        free(p);
        buf_adds(&out, ref + plen);
        return out.data;
    }
    size_t base_path_len = strcspn(path, "?#");
    if (ref[0] == 0 || ref[0] == '?' || ref[0] == '#') {
        buf_add(&out, path, base_path_len);
        if (ref[0] == '#') {
            size_t q = strcspn(path, "#");
            out.len -= base_path_len;
            buf_add(&out, path, q);
        }
        buf_adds(&out, ref);
        return out.data;
    }
    /* merge: the base path up to its last '/', then the reference */
    buf merged = {0};
    const char *last_slash = NULL;
    for (const char *q = path; q < path + base_path_len; q++)
        if (*q == '/')
            last_slash = q;
    if (last_slash)
        buf_add(&merged, path, (size_t)(last_slash - path) + 1);
    else
        buf_addc(&merged, '/');
    size_t plen = strcspn(ref, "?#");
    buf_add(&merged, ref, plen);
    remove_dot_segments(&out, merged.data);
    buf_adds(&out, ref + plen);
    buf_free(&merged);
    return out.data;
}

/* %{redirect_url}: where a redirect that was not followed would have gone. */
static char *redirect_url(const facts *f) {
    json_t *hop = f->last_hop;
    json_int_t status = json_integer_value(json_object_get(hop, "status"));
    if (!hop || status < 300 || status > 399)
        return NULL;
    size_t i;
    json_t *pair;
    json_array_foreach(json_object_get(hop, "responseHeaders"), i, pair) {
        const char *name = json_string_value(json_array_get(pair, 0));
        const char *value = json_string_value(json_array_get(pair, 1));
        if (name && value && !strcasecmp(name, "location"))
            return resolve_location(jstr(hop, "url"), value);
    }
    return NULL;
}

static char *scheme_of(const char *url) {
    const char *end = strstr(url, "://");
    char *s = end ? xstrndup(url, (size_t)(end - url)) : xstrdup(url);
    for (char *c = s; *c; c++)
        *c = (char)toupper((unsigned char)*c);
    return s;
}

static void json_member(buf *b, const char *key, json_t *value) {
    if (b->len > 1)   /* b holds only this object: past its '{' */
        buf_addc(b, ',');
    buf_addf(b, "\"%s\":", key);
    json_write(b, value, 0);
    json_decref(value);
}

static json_t *string_or_null(const char *s) {
    return s && *s ? json_string(s) : json_null();
}

static void json_time(buf *b, const char *key, double v) {
    buf_addf(b, ",\"%s\":%.6f", key, v);
}

/* %{json}: the variables above as one object, keys in curl's (alphabetical) order. */
static void all_json(buf *b, const transfer *t, const facts *f, int code, int exit_code, const char *errormsg) {
    char *scheme = scheme_of(t->url);
    char *redirect = redirect_url(f);
    buf_addc(b, '{');
    json_member(b, "content_type", string_or_null(f->content_type));
    json_member(b, "errormsg", string_or_null(errormsg));
    json_member(b, "exitcode", json_integer(exit_code));
    json_member(b, "filename_effective", string_or_null(t->out_file));
    json_member(b, "http_code", json_integer(code));
    json_member(b, "http_version", json_string(f->http_version));
    json_member(b, "method", json_string(f->method));
    json_member(b, "num_redirects", json_integer(f->redirects));
    json_member(b, "redirect_url", string_or_null(redirect));
    json_member(b, "remote_ip", json_string(f->remote_ip));
    json_member(b, "response_code", json_integer(code));
    json_member(b, "scheme", json_string(scheme));
    json_member(b, "size_download", json_integer(f->size));
    json_member(b, "size_upload", json_integer(f->sent));
    json_time(b, "time_appconnect", f->tls);
    json_time(b, "time_connect", f->connect);
    json_time(b, "time_namelookup", f->dns);
    json_time(b, "time_starttransfer", f->first);
    json_time(b, "time_total", f->total);
    json_member(b, "url", json_string(t->url));
    json_member(b, "url_effective", json_string(*f->url_effective ? f->url_effective : t->url));
    json_member(b, "urlnum", json_integer((json_int_t)t->index));
    buf_addc(b, '}');
    free(scheme);
    free(redirect);
}

static void variable(buf *b, const char *name, const transfer *t, const facts *f, int code, int exit_code,
                     const char *errormsg) {
#define IS(n) (!strcmp(name, n))
    if (IS("http_code") || IS("response_code")) buf_addf(b, "%03d", code);
    else if (IS("url_effective")) buf_adds(b, f->url_effective);
    else if (IS("content_type")) buf_adds(b, f->content_type);
    else if (IS("size_download")) buf_addf(b, "%" JSON_INTEGER_FORMAT, f->size);
    else if (IS("num_redirects")) buf_addf(b, "%" JSON_INTEGER_FORMAT, f->redirects);
    else if (IS("remote_ip")) buf_adds(b, f->remote_ip);
    else if (IS("exitcode")) buf_addf(b, "%d", exit_code);
    else if (IS("errormsg")) buf_adds(b, errormsg);
    else if (IS("size_upload")) buf_addf(b, "%" JSON_INTEGER_FORMAT, f->sent);
    else if (IS("http_version")) buf_adds(b, f->http_version);
    else if (IS("method")) buf_adds(b, f->method);
    else if (IS("scheme")) {
        char *s = scheme_of(t->url);
        buf_adds(b, s);
        free(s);
    } else if (IS("url")) buf_adds(b, t->url);
    else if (IS("urlnum")) buf_addf(b, "%zu", t->index);
    else if (IS("filename_effective")) buf_adds(b, t->out_file ? t->out_file : "");
    else if (IS("header_json")) header_json(b, f->last_hop);
    else if (IS("redirect_url")) {
        char *r = redirect_url(f);
        if (r)
            buf_adds(b, r);
        free(r);
    } else if (IS("json")) {
        buf j = {0};
        all_json(&j, t, f, code, exit_code, errormsg);
        buf_add(b, j.data, j.len);
        buf_free(&j);
    }
    else if (IS("time_namelookup")) buf_addf(b, "%.6f", f->dns);
    else if (IS("time_connect")) buf_addf(b, "%.6f", f->connect);
    else if (IS("time_appconnect")) buf_addf(b, "%.6f", f->tls);
    else if (IS("time_starttransfer")) buf_addf(b, "%.6f", f->first);
    else if (IS("time_total")) buf_addf(b, "%.6f", f->total);
    else buf_addf(b, "%%{%s}", name);
#undef IS
}

void write_out(const transfer *t, const char *format, int http_code, int exit_code, const char *errormsg) {
    if (!format || !*format)
        return;
    facts f;
    gather(t, &f);
    buf out = {0};
    for (const char *p = format; *p;) {
        const char *close;
        if (p[0] == '%' && p[1] == '{' && (close = strchr(p + 2, '}'))) {
            char *name = xstrndup(p + 2, (size_t)(close - p - 2));
            variable(&out, name, t, &f, http_code, exit_code, errormsg ? errormsg : "");
            free(name);
            p = close + 1;
        } else if (p[0] == '\\' && (p[1] == 'n' || p[1] == 't' || p[1] == 'r')) {
            buf_addc(&out, p[1] == 'n' ? '\n' : p[1] == 't' ? '\t' : '\r');
            p += 2;
        } else if (p[0] == '%' && p[1] == '%') {
            buf_addc(&out, '%');
            p += 2;
        } else {
            buf_addc(&out, *p++);
        }
    }
    if (out.len)
        (void)!write_all(1, out.data, out.len);
    buf_free(&out);
}
