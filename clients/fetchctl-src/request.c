/* The JSON-RPC params of one URL of fetch / download / upload, from the parsed command line.
 * Headers, data and form parts keep the order they were given in (curl's order). */
#define _GNU_SOURCE
#include "request.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *curl_mime_type(const char *filename) {
    /* curl's own table (lib/mime.c): anything else is application/octet-stream */
    static const struct { const char *ext, *type; } table[] = {
        {".gif", "image/gif"}, {".jpg", "image/jpeg"}, {".jpeg", "image/jpeg"}, {".png", "image/png"},
        {".svg", "image/svg+xml"}, {".txt", "text/plain"}, {".htm", "text/html"}, {".html", "text/html"},
        {".pdf", "application/pdf"}, {".xml", "application/xml"},
    };
    size_t n = filename ? strlen(filename) : 0;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        size_t e = strlen(table[i].ext);
        if (n >= e && !strcasecmp(filename + n - e, table[i].ext))
            return table[i].type;
    }
    return "application/octet-stream";
}

/* Percent-encodes as curl's --data-urlencode: unreserved characters stay, a space is '+'. */
static void urlencode(buf *b, const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~')
            buf_addc(b, (char)*p);
        else if (*p == ' ')
            buf_addc(b, '+');
        else {
            buf_addc(b, '%');
            buf_addc(b, hex[*p >> 4]);
            buf_addc(b, hex[*p & 15]);
        }
    }
}

/* -d and --data-urlencode joined with '&', in command-line order (curl's). */
static int build_data(const request_opts *o, buf *data) {
    int any = 0;
    for (size_t i = 0; i < o->n_items; i++) {
        const item *it = &o->items[i];
        if (it->kind != ITEM_DATA && it->kind != ITEM_URLENCODE)
            continue;
        if (any)
            buf_addc(data, '&');
        any = 1;
        if (it->kind == ITEM_DATA) {
            buf_adds(data, it->a);
            continue;
        }
        /* "name=content" keeps the name; "=content" and "content" are encoded whole */
        const char *eq = strchr(it->a, '=');
        if (eq) {
            if (eq != it->a) {
                buf_add(data, it->a, (size_t)(eq - it->a) + 1);
            }
            urlencode(data, eq + 1);
        } else {
            urlencode(data, it->a);
        }
    }
    return any;
}

static int has_key_ci(json_t *obj, const char *name) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!strcasecmp(key, name))
            return 1;
    }
    return 0;
}

static json_t *number(const char *s) {
    return is_int(s) ? json_integer(strtoll(s, NULL, 10)) : json_real(strtod(s, NULL));
}

static void set_text(json_t *params, const char *key, const char *s, size_t len) {
    if (valid_utf8(s, len)) {
        json_object_set_new(params, key, json_stringn(s, len));
    } else {
        char *b64 = base64_encode((const unsigned char *)s, len);
        json_object_set_new(params, !strcmp(key, "body") ? "bodyBase64" : key, json_string(b64));
        free(b64);
    }
}

static json_t *build_headers(const transfer *t) {
    const request_opts *o = t->o;
    json_t *h = json_object();
    for (size_t i = 0; i < o->n_items; i++) {
        const item *it = &o->items[i];
        if (it->kind != ITEM_HEADER)
            continue;
        const char *old = json_string_value(json_object_get(h, it->a));
        if (old) {
            char *joined = xasprintf("%s, %s", old, it->b);
            json_object_set_new(h, it->a, json_string(joined));
            free(joined);
        } else {
            json_object_set_new(h, it->a, json_string(it->b));
        }
    }
    for (size_t i = 0; i < o->n_items; i++)
        if (o->items[i].kind == ITEM_REMOVE)
            json_object_set_new(h, o->items[i].a, json_null());
    if (o->user) {
        char *b64 = base64_encode((const unsigned char *)o->user, strlen(o->user));
        char *v = xasprintf("Basic %s", b64);
        json_object_set_new(h, "Authorization", json_string(v));
        free(v);
        free(b64);
    }
    if (o->body == BODY_JSON) {
        if (!has_key_ci(h, "accept"))
            json_object_set_new(h, "Accept", json_string("application/json"));
        if (!has_key_ci(h, "content-type"))
            json_object_set_new(h, "Content-Type", json_string("application/json"));
    }
    /* -d sends a form content type, as curl does (a text body is text/plain by default in
     * the daemon); -T sends none (the daemon would say application/octet-stream). */
    int hasct = has_key_ci(h, "content-type");
    if ((o->body == BODY_DATA || o->body == BODY_FILE || o->body == BODY_STDIN) && !o->get && !hasct)
        json_object_set_new(h, "Content-Type", json_string("application/x-www-form-urlencoded"));
    else if ((o->body == BODY_TFILE || o->body == BODY_TSTDIN) && !hasct)
        json_object_set_new(h, "Content-Type", json_null());
    return h;
}

static void add_form(const transfer *t, json_t *params) {
    const request_opts *o = t->o;
    int from_fetch = !strcmp(o->command, "fetch");
    json_t *files = json_array(), *fields = json_object();
    for (size_t i = 0; i < o->n_items; i++) {
        const item *it = &o->items[i];
        if (it->kind == ITEM_FORM_FILE) {
            json_t *f = json_pack("{s:s,s:s}", "path", it->b, "field", it->a);
            const char *name = it->d;
            if (!name) {
                const char *slash = strrchr(it->b, '/');
                name = slash ? slash + 1 : it->b;
            }
            if (it->c)
                json_object_set_new(f, "mimetype", json_string(it->c));
            else if (from_fetch)  /* curl's guess, not the daemon's longer list */
                json_object_set_new(f, "mimetype", json_string(curl_mime_type(name)));
            if (it->d)
                json_object_set_new(f, "filename", json_string(it->d));
            json_array_append_new(files, f);
        } else if (it->kind == ITEM_FORM_FIELD) {
            set_text(fields, it->a, it->b, strlen(it->b));
        }
    }
    json_object_set_new(params, "files", files);
    if (json_object_size(fields))
        json_object_set_new(params, "fields", fields);
    else
        json_decref(fields);
}

static json_t *build_retry(const request_opts *o) {
    if (!strcmp(o->retry, "0"))
        return json_false();
    json_t *r = json_pack("{s:I}", "maxAttempts", (json_int_t)strtoll(o->retry, NULL, 10) + 1);
    if (o->retry_delay)
        json_object_set_new(r, "delay", number(o->retry_delay));
    if (o->retry_max_time)
        json_object_set_new(r, "maxElapsed", number(o->retry_max_time));
    if (o->retry_all) {
        json_object_set_new(r, "allErrors", json_true());
        if (o->fail) {  /* --retry-all-errors with -f: every HTTP error is an error, as in curl */
            json_t *statuses = json_array();
            for (int s = 400; s < 600; s++)
                json_array_append_new(statuses, json_integer(s));
            json_object_set_new(r, "statuses", statuses);
        }
    }
    return r;
}

json_t *build_params(transfer *t) {
    const request_opts *o = t->o;
    int is_fetch_command = curl_like(o);
    json_t *p = json_object();
    buf data = {0};
    int has_data = build_data(o, &data);
    char *url = t->url;
    if (o->get && has_data) {
        char *u = xasprintf("%s%c%s", url, strchr(url, '?') ? '&' : '?', data.data);
        json_object_set_new(p, "url", json_string(u));
        free(u);
    } else {
        json_object_set_new(p, "url", json_string(url));
    }
    if (o->method)
        json_object_set_new(p, "method", json_string(o->method));
    json_t *headers = build_headers(t);
    json_t *query = json_object();
    json_t *resolve = json_object();
    for (size_t i = 0; i < o->n_items; i++) {
        const item *it = &o->items[i];
        if (it->kind == ITEM_QUERY) {
            json_t *old = json_object_get(query, it->a);
            if (json_is_array(old)) {
                json_array_append_new(old, json_string(it->b));
            } else if (old) {
                json_object_set_new(query, it->a, json_pack("[O,s]", old, it->b));
            } else {
                json_object_set_new(query, it->a, json_string(it->b));
            }
        } else if (it->kind == ITEM_RESOLVE) {
            json_object_set_new(resolve, it->a, json_string(it->b));
        }
    }
    if (json_object_size(query))
        json_object_set(p, "query", query);
    json_decref(query);
    switch (o->body) {
    case BODY_DATA:
        if (!o->get)
            set_text(p, "body", data.data ? data.data : "", data.len);
        break;
    case BODY_FILE:
    case BODY_TFILE:
        json_object_set_new(p, "bodyFile", json_string(o->body_file));
        break;
    case BODY_STDIN:
    case BODY_TSTDIN: {
        if (o->stdin_streams) {
            /* read by the daemon from fetchctl's stdin until EOF, sent chunked (-T -, as curl),
             * or with Content-Length when stdin is a file of known size (--data-binary @-) */
            json_object_set_new(p, "bodyFrom", json_string("fd"));
            if (t->stdin_size >= 0)
                json_object_set_new(p, "bodySize", json_integer(t->stdin_size));
            break;
        }
        char *b64 = base64_encode(o->stdin_data, o->stdin_len);
        json_object_set_new(p, "bodyBase64", json_string(b64));
        free(b64);
        break;
    }
    case BODY_JSON: {
        /* checked here, sent as written (curl sends the bytes it was given) */
        json_error_t jerr;
        json_t *parsed = json_loadb(o->json_text.data ? o->json_text.data : "", o->json_text.len,
                                    JSON_DECODE_ANY, &jerr);
        if (!parsed)
            usage_error("--json: invalid JSON: %s", jerr.text);
        json_decref(parsed);
        json_object_set_new(p, "body", json_stringn(o->json_text.data, o->json_text.len));
        break;
    }
    case BODY_FORM:
        if (!strcmp(t->rpc_method, "upload"))
            add_form(t, p);
        else if (add_client_multipart(o, p, headers, &t->multipart_tmp) != 0) {
            json_decref(p);
            json_decref(headers);
            json_decref(resolve);
            buf_free(&data);
            return NULL;
        }
        break;
    case BODY_NONE:
        break;
    }
    buf_free(&data);
    if (json_object_size(headers))
        json_object_set(p, "headers", headers);
    json_decref(headers);
    if (o->timeout)
        json_object_set_new(p, "timeout", number(o->timeout));
    if (json_object_size(resolve))
        json_object_set(p, "resolve", resolve);
    json_decref(resolve);
    json_object_update(p, o->routing);
    if (t->range)
        json_object_set_new(p, "range", json_string(t->range));
    if (o->max_time)
        json_object_set_new(p, "maxTime", number(o->max_time));
    if (o->connect_timeout)
        json_object_set_new(p, "connectTimeout", number(o->connect_timeout));
    /* as curl: without -L a redirect is the answer, whatever --max-redirs says (download and
     * upload follow) */
    if (is_fetch_command && !o->location)
        json_object_set_new(p, "maxRedirects", json_integer(0));
    else if (o->max_redirects)
        json_object_set_new(p, "maxRedirects", number(o->max_redirects));
    if (o->retry)
        json_object_set_new(p, "retry", build_retry(o));
    if (o->priority)
        json_object_set_new(p, "priority", number(o->priority));
    if (!t->cookie_jar)
        json_object_set_new(p, "cookieJar", json_false());
    else if (*t->cookie_jar)
        json_object_set_new(p, "cookieJar", json_string(t->cookie_jar));
    if (o->max_body && strcmp(t->rpc_method, "download"))
        json_object_set_new(p, "maxBodyBytes", number(o->max_body));
    if (o->progress)
        json_object_set_new(p, "progress", json_true());
    if (t->exchange)
        json_object_set_new(p, "exchange", json_true());
    json_object_set_new(p, "jobId", json_string(t->job_id));
    if (o->comment)
        json_object_set_new(p, "comment", json_string(o->comment));
    if (o->stubs)
        json_object_set_new(p, "stubs", json_string(o->stubs));
    if (t->route == ROUTE_FD)
        json_object_set_new(p, "bodyTo", json_string("fd"));
    else if (t->route == ROUTE_CHUNKS)
        json_object_set_new(p, "responseBody", json_string("stream"));
    else if (t->route == ROUTE_EVENTS)
        json_object_set_new(p, "responseBody", json_string("events"));
    else if (!strcmp(t->rpc_method, "fetch"))
        json_object_set_new(p, "responseBody",
                            json_string(o->json_result ? "auto" : o->head ? "none" : "base64"));
    if (o->cache)
        json_object_set_new(p, "cache", json_string(o->cache));
    else if (is_fetch_command)  /* always current, as curl */
        json_object_set_new(p, "cache", json_string("no-cache"));
    if (!strcmp(t->rpc_method, "download")) {
        json_object_set_new(p, "path", json_string(t->dl_path));
        if (t->overwrite)
            json_object_set_new(p, "overwrite", json_true());
        if (t->no_resume)
            json_object_set_new(p, "resume", json_false());
        if (o->sha256)
            json_object_set_new(p, "sha256", json_string(o->sha256));
    }
    return p;
}
