/* One transfer's answer, written as curl writes it: -v, -D, -i/-I, --fail, the body (to
 * stdout or -o FILE, opened at the first byte), -C -'s append, then -w. Also the progress bar
 * and the messages of a failure, with curl's exit codes. */
#define _GNU_SOURCE
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* curl's exit code for a failed transfer: libcurl's own code when the daemon gives one
 * (above fetchctl's own 2 to 5, or 1), else the failure's kind. */
static int curl_exit_code(const fetchd_error *err) {
    json_t *curl_code = json_object_get(err->data, "curlCode");
    if (json_is_integer(curl_code)) {
        json_int_t c = json_integer_value(curl_code);
        if (c == 1 || c > 5)
            return (int)c;
    }
    const char *kind = fetchd_error_data_string(err, "kind");
    if (!kind) return EXIT_RPC;
    if (!strcmp(kind, "dns")) return 6;
    if (!strcmp(kind, "connect")) return 7;
    if (!strcmp(kind, "timeout")) return 28;
    if (!strcmp(kind, "tls")) return 35;
    if (!strcmp(kind, "tooManyRedirects")) return 47;
    if (!strcmp(kind, "reset")) return 56;
    if (!strcmp(kind, "write")) return 23;   /* stdout (bodyTo) could not take the body */
    if (!strcmp(kind, "read")) return 26;    /* stdin (bodyFrom) failed */
    return EXIT_RPC;
}

/* Tabs, newlines and the like in a message become one space (each message is one line). */
static void clean(buf *b, const char *s) {
    int in_space = 0;
    for (; *s; s++) {
        if (*s == '\t' || *s == '\r' || *s == '\n' || *s == '\x1f') {
            if (!in_space)
                buf_addc(b, ' ');
            in_space = 1;
        } else {
            buf_addc(b, *s);
            in_space = 0;
        }
    }
}

void rpc_error_text(buf *out, const fetchd_error *err, int64_t took_us) {
    const char *msg = err->message ? err->message : "error";
    buf m = {0};
    clean(&m, msg);
    buf_adds(out, m.data ? m.data : "");
    buf_addf(out, " (code %d)", err->code);
    buf detail = {0};
    json_t *d = err->data;
    if (json_is_object(d)) {
        const char *keys[] = {"kind", "field", "path", "detail", "limit"};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
            json_t *v = json_object_get(d, keys[i]);
            if (!v || json_is_null(v) || json_is_false(v))
                continue;
            buf text = {0};
            json_text(&text, v);
            const char *t = text.data ? text.data : "";
            if (!strcmp(keys[i], "detail") && strstr(msg, t)) {
                buf_free(&text);
                continue;
            }
            if (detail.len)
                buf_adds(&detail, ": ");
            if (!strcmp(keys[i], "field"))
                buf_adds(&detail, "field ");
            if (!strcmp(keys[i], "limit"))
                buf_adds(&detail, "limit ");
            clean(&detail, t);
            buf_free(&text);
        }
        json_t *attempts = json_object_get(d, "attempts");
        if (attempts && !json_is_null(attempts) && took_us >= 0) {
            /* how many attempts, and how long they took with the waits */
            buf a = {0};
            json_text(&a, attempts);
            buf_addf(&detail, "%s%s attempt%s in %lld.%llds", detail.len ? "; " : "", a.data,
                     strcmp(a.data, "1") ? "s" : "", (long long)(took_us / 1000000),
                     (long long)(took_us % 1000000 / 100000));
            buf_free(&a);
        }
    } else if (d && !json_is_null(d)) {
        buf text = {0};
        json_text(&text, d);
        clean(&detail, text.data ? text.data : "");
        buf_free(&text);
    }
    if (detail.len) {
        buf_adds(out, ": ");
        buf_adds(out, detail.data);
    }
    buf_free(&detail);
    buf_free(&m);
}

static void say_failure(const request_opts *o, const char *msg) {
    if (!o->silent || o->show_error)
        say("%s", msg);
}

/* ------------------------------------------------------------- progress */

static void draw_progress(transfer *t, json_t *p) {
    int64_t recv = json_integer_value(json_object_get(p, "receivedBytes"));
    int64_t sent = json_integer_value(json_object_get(p, "sentBytes"));
    json_t *trecv = json_object_get(p, "totalReceiveBytes"), *tsend = json_object_get(p, "totalSendBytes");
    int64_t total = json_integer_value(trecv), total_send = json_integer_value(tsend);
    const char *label = "download";
    int64_t bytes = recv;
    int has_total = json_is_integer(trecv);
    if ((json_is_integer(tsend) && total_send > 0 && recv == 0 && sent < total_send) ||
        (recv == 0 && sent > 0 && !json_is_integer(tsend))) {
        label = "upload  ";
        bytes = sent;
        total = total_send;
        has_total = json_is_integer(tsend);
    }
    buf line = {0};
    buf_addf(&line, "%s ", label);
    human_bytes(&line, bytes);
    if (has_total && total > 0) {
        int64_t pct = bytes * 100 / total;
        if (pct > 100)
            pct = 100;
        buf_adds(&line, " / ");
        human_bytes(&line, total);
        buf bar = {0};
        buf_addc(&bar, '[');
        for (int i = 0; i < 30; i++)
            buf_addc(&bar, i < pct * 30 / 100 ? '#' : ' ');
        buf_addf(&bar, "] %3d%%  %s", (int)pct, line.data);
        buf_free(&line);
        line = bar;
    }
    int64_t elapsed = now_us() - t->progress_t0;
    if (elapsed > 0) {
        buf_adds(&line, "  ");
        human_bytes(&line, bytes * 1000000 / elapsed);
        buf_adds(&line, "/s");
    }
    buf out = {0};
    buf_addc(&out, '\r');
    buf_pad(&out, line.data, 78);
    (void)!write(2, out.data, out.len);
    buf_free(&out);
    buf_free(&line);
    t->progress_drawn = 1;
    interrupt_progress_drawn(1);
}

static void end_progress_line(transfer *t) {
    if (t->progress_drawn) {
        (void)!write(2, "\n", 1);
        t->progress_drawn = 0;
        interrupt_progress_drawn(0);
    }
}

int on_progress(const char *method, json_t *params, void *user_data) {
    transfer *t = user_data;
    if (!strcmp(method, "progress")) {
        if (t->o->progress && !t->o->parallel)
            draw_progress(t, params);
    } else if (!strcmp(method, "retrying")) {
        end_progress_line(t);
        json_t *delay = json_object_get(params, "delayMs");
        long long ms = json_is_number(delay) ? (long long)json_number_value(delay) : 0;
        buf a = {0};
        json_text(&a, json_object_get(params, "attempt"));
        const char *reason = jstr(params, "reason");
        buf r = {0};
        clean(&r, reason);
        say("retrying in %lld.%llds (attempt %s)%s%s", ms / 1000, ms % 1000 / 100, a.len ? a.data : "?",
            r.len ? ": " : "", r.len ? r.data : "");
        buf_free(&a);
        buf_free(&r);
    }
    return 0;
}

/* ------------------------------------------------------------ streamed to stdout */

int on_stream_head(int status, json_t *head, void *user_data) {
    (void)head;
    transfer *t = user_data;
    /* -f: nothing of an error's body reaches stdout (curl writes none of it) */
    t->drop_chunks = t->o->fail == 1 && status >= 400;
    return 0;
}

int on_stream_chunk(const unsigned char *data, size_t len, void *user_data) {
    transfer *t = user_data;
    if (t->drop_chunks)
        return 0;
    if (write_all(t->body_fd, data, len) != 0) {
        t->stdout_failed = 1;  /* the reader is gone: the job is cancelled, curl's 23 */
        return 1;
    }
    return 0;
}

int on_stream_event(const char *event, const char *data, const char *id, void *user_data) {
    transfer *t = user_data;
    buf b = {0};
    buf_addf(&b, "event: %s\n", event);
    if (id)
        buf_addf(&b, "id: %s\n", id);
    /* one data: line per line of the data, as the stream carried it */
    for (const char *line = data;;) {
        const char *nl = strchr(line, '\n');
        buf_adds(&b, "data: ");
        buf_add(&b, line, nl ? (size_t)(nl - line) : strlen(line));
        buf_addc(&b, '\n');
        if (!nl)
            break;
        line = nl + 1;
    }
    buf_addc(&b, '\n');
    int rc = write_all(1, b.data, b.len);
    buf_free(&b);
    if (rc != 0) {
        t->stdout_failed = 1;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ exchange */

/* The path of a URL as a request line shows it. */
static void request_path(buf *b, const char *url) {
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    p += strcspn(p, "/?#");
    size_t n = strcspn(p, "#");
    if (n == 0)
        buf_addc(b, '/');
    else {
        if (*p == '?')
            buf_addc(b, '/');
        buf_add(b, p, n);
    }
}

static void status_line(buf *b, json_t *hop) {
    json_text(b, json_object_get(hop, "httpVersion"));
    buf_addc(b, ' ');
    json_text(b, json_object_get(hop, "status"));
    buf_addc(b, ' ');
    json_text(b, json_object_get(hop, "statusText"));
}

static void header_lines(buf *b, json_t *list, const char *prefix) {
    size_t i;
    json_t *pair;
    json_array_foreach(list, i, pair) {
        buf_adds(b, prefix);
        json_text(b, json_array_get(pair, 0));
        buf_adds(b, ": ");
        json_text(b, json_array_get(pair, 1));
        buf_adds(b, "\r\n");
    }
}

/* Every hop's status line and headers, as curl -i and -D write them. */
static void hops_headers(buf *b, json_t *exchange) {
    size_t i;
    json_t *hop;
    json_array_foreach(exchange, i, hop) {
        status_line(b, hop);
        buf_adds(b, "\r\n");
        header_lines(b, json_object_get(hop, "responseHeaders"), "");
        buf_adds(b, "\r\n");
    }
}

/* What curl -v writes of the hops: the request ('> ') and response ('< ') headers. */
static void hops_verbose(buf *b, json_t *exchange) {
    size_t i;
    json_t *hop;
    json_array_foreach(exchange, i, hop) {
        if (i > 0)
            buf_addf(b, "* Issue another request to this URL: '%s'\n", jstr(hop, "url"));
        buf_addf(b, "> %s ", jstr(hop, "method"));
        request_path(b, jstr(hop, "url"));
        buf_addf(b, " %s\r\n", jstr(hop, "httpVersion"));
        header_lines(b, json_object_get(hop, "requestHeaders"), "> ");
        buf_adds(b, "> \r\n< ");
        status_line(b, hop);
        buf_adds(b, "\r\n");
        header_lines(b, json_object_get(hop, "responseHeaders"), "< ");
        buf_adds(b, "< \r\n");
    }
}

/* ------------------------------------------------------------- output */

typedef struct output {
    transfer *t;
    int fd;          /* -1 until opened */
    int opened_file; /* fd is -o FILE's */
} output;

static int write_failed(transfer *t, int status, const char *message) {
    const char *m = message ? message : "Failure writing output to destination";
    say_failure(t->o, m);
    write_out(t, t->o->write_out, status, 23, m);
    return 23;
}

/* -o FILE opened at the first byte written, as curl does (a failed -f leaves no file). */
static int open_out(output *out, int status) {
    if (out->fd >= 0)
        return 0;
    if (!out->t->out_file) {
        out->fd = 1;
        return 0;
    }
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (out->t->resume_from > 0 ? O_APPEND : O_TRUNC);
    out->fd = open(out->t->out_file, flags, 0666);
    if (out->fd < 0) {
        char *m = xasprintf("Failed to create the file %s", out->t->out_file);
        int rc = write_failed(out->t, status, m);
        free(m);
        return rc;
    }
    out->opened_file = 1;
    out->t->wrote_file = 1;
    return 0;
}

static int out_write(output *out, int status, const void *data, size_t len) {
    int rc = open_out(out, status);
    if (rc)
        return rc;
    if (len && write_all(out->fd, data, len) != 0)
        return write_failed(out->t, status, NULL);
    return 0;
}

/* The answer's body to stdout or -o FILE. */
static int copy_body(output *out, int status, json_t *result) {
    transfer *t = out->t;
    if (t->mode == MODE_NONE)
        return 0;
    if (t->mode == MODE_JSON) {
        buf b = {0};
        json_write(&b, result, 1);
        buf_addc(&b, '\n');
        int rc = out_write(out, status, b.data, b.len);
        buf_free(&b);
        return rc;
    }
    json_t *b64 = json_object_get(result, "bodyBase64");
    json_t *text = json_object_get(result, "body");
    json_t *parsed = json_object_get(result, "json");
    if (json_is_string(b64)) {
        size_t len;
        unsigned char *bytes = base64_decode(json_string_value(b64), json_string_length(b64), &len);
        if (!bytes)
            return write_failed(t, status, NULL);
        int rc = out_write(out, status, bytes, len);
        free(bytes);
        return rc;
    }
    if (json_is_string(text))
        return out_write(out, status, json_string_value(text), json_string_length(text));
    if (parsed) {
        buf b = {0};
        json_write(&b, parsed, 0);
        int rc = out_write(out, status, b.data, b.len);
        buf_free(&b);
        return rc;
    }
    return 0;
}

/* -C - streamed: the daemon wrote the asked range to a file of its own; it is added to the
 * end of -o FILE here. */
static int append_resumed(transfer *t, int status) {
    int in = open(t->resume_tmp, O_RDONLY | O_CLOEXEC);
    int outfd = in >= 0 ? open(t->out_file, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    int rc = 0;
    if (in < 0 || outfd < 0) {
        rc = write_failed(t, status, NULL);
    } else {
        char chunk[1 << 16];
        ssize_t n;
        while ((n = read(in, chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
            if (n > 0 && write_all(outfd, chunk, (size_t)n) != 0) {
                rc = write_failed(t, status, NULL);
                break;
            }
    }
    if (in >= 0)
        close(in);
    if (outfd >= 0)
        close(outfd);
    unlink(t->resume_tmp);
    return rc;
}

static int close_output(output *out, int rc) {
    if (out->opened_file && out->fd >= 0 && close(out->fd) != 0 && rc == 0)
        rc = write_failed(out->t, out->t->status, NULL);
    return rc;
}

static int handle_error(session *s, transfer *t, fetchd_status st, const fetchd_error *err) {
    const request_opts *o = t->o;
    if (st != FETCHD_ERR_RPC)
        return connection_failure(s, err);
    if (err->code == FETCHD_RPC_CANCELLED) {
        const char *by = fetchd_error_data_string(err, "by");
        buf m = {0};
        buf_adds(&m, "cancelled");
        if (by && *by)
            buf_addf(&m, " by %s", by);
        if (t->job_id && *t->job_id)
            buf_addf(&m, " (job %s)", t->job_id);
        say_failure(o, m.data);
        buf_free(&m);
        return EXIT_CANCELLED;
    }
    buf m = {0};
    rpc_error_text(&m, err, now_us() - t->t_sent);
    if (o->verbose) {
        buf v = {0};
        buf_adds(&v, "* ");
        clean(&v, err->message ? err->message : "error");
        buf_addc(&v, '\n');
        (void)!write(2, v.data, v.len);
        buf_free(&v);
    }
    say_failure(o, m.data);
    buf_free(&m);
    int code = EXIT_RPC;
    if (curl_like(o)) {
        if (err->code == FETCHD_RPC_TRANSPORT)
            code = curl_exit_code(err);
        else if (err->code == FETCHD_RPC_FILE_ERROR)
            code = 23;
    }
    const char *msg = err->message ? err->message : "";
    if (!strncmp(msg, "Transfer failed: ", 17))
        msg += 17;
    write_out(t, o->write_out, 0, code, msg);
    return code;
}

int handle_answer(session *s, transfer *t, fetchd_status st, json_t *result, const fetchd_error *err,
                  pthread_mutex_t *output_lock) {
    const request_opts *o = t->o;
    if (output_lock)
        pthread_mutex_lock(output_lock);
    end_progress_line(t);
    int rc;
    if (t->stdout_failed) {
        t->result = result;
        rc = write_failed(t, (int)json_integer_value(json_object_get(result, "status")), NULL);
        goto done;
    }
    if (st != FETCHD_OK) {
        rc = handle_error(s, t, st, err);
        goto done;
    }
    t->result = result;
    int status = t->status = (int)json_integer_value(json_object_get(result, "status"));
    json_t *exchange = json_object_get(result, "exchange");
    output out = {.t = t, .fd = -1};
    rc = 0;
    if (o->verbose && json_is_array(exchange)) {
        buf v = {0};
        hops_verbose(&v, exchange);
        (void)!write(2, v.data, v.len);
        buf_free(&v);
    }
    buf headers = {0};
    if (json_is_array(exchange))
        hops_headers(&headers, exchange);
    /* -D FILE, -i, -I: the headers of every hop, as curl writes them */
    if (o->dump_header && json_is_array(exchange)) {
        if (!strcmp(o->dump_header, "-")) {
            if (write_all(1, headers.data, headers.len) != 0)
                rc = write_failed(t, status, NULL);
        } else {
            /* the later URLs of one command add to the file, as curl */
            int fd = open(o->dump_header, O_WRONLY | O_CREAT | O_CLOEXEC | (t->index > 0 ? O_APPEND : O_TRUNC), 0666);
            if (fd < 0 || write_all(fd, headers.data, headers.len) != 0) {
                char *m = xasprintf("Failed to open %s", o->dump_header);
                rc = write_failed(t, status, m);
                free(m);
            }
            if (fd >= 0)
                close(fd);
        }
    }
    if (!rc && (o->include || o->head) && json_is_array(exchange))
        rc = out_write(&out, status, headers.data, headers.len);
    buf_free(&headers);
    if (rc)
        goto done_out;
    /* events: an error status ends it as -f would (there is no body to print) */
    if ((o->fail || t->route == ROUTE_EVENTS) && status >= 400) {
        if (o->fail == 2 && (rc = copy_body(&out, status, result)))
            goto done_out;
        char *m = xasprintf("The requested URL returned error: %d", status);
        say_failure(o, m);
        write_out(t, o->write_out, status, 22, m);
        free(m);
        rc = 22;
        goto done_out;
    }
    if (t->route == ROUTE_EVENTS && status != 204 &&
        strncasecmp(jstr(json_object_get(result, "headers"), "content-type"), "text/event-stream", 17)) {
        /* the daemon stopped at an answer that is not an event stream: curl's 1, unsupported */
        char *m = xasprintf("HTTP %d is not an event stream (Content-Type: %s)", status,
                            jstr(json_object_get(result, "headers"), "content-type"));
        say_failure(o, m);
        write_out(t, o->write_out, status, 1, m);
        free(m);
        rc = 1;
        goto done_out;
    }
    if (t->resume_from > 0 && status != 206 && status != 416) {
        /* curl's 33: the server answered the whole body, or an error, to a range */
        const char *m = "HTTP server doesn't seem to support byte ranges. Cannot resume.";
        if (t->resume_tmp)
            unlink(t->resume_tmp);
        t->body_refused = 1;
        say_failure(o, m);
        write_out(t, o->write_out, status, 33, m);
        rc = 33;
        goto done_out;
    }
    if (!strcmp(o->command, "download") && (status < 200 || status > 299))
        say("HTTP %d: nothing written", status);
    if (t->resume_tmp && status == 206)
        rc = append_resumed(t, status);
    else if (t->resume_from > 0 && status == 416)
        ;   /* the file already holds the whole answer: curl's success */
    else if (!o->head)
        rc = copy_body(&out, status, result);
    if (rc)
        goto done_out;
    rc = close_output(&out, 0);
    if (!rc)
        write_out(t, o->write_out, status, 0, "");
    goto done;
done_out:
    rc = close_output(&out, rc);
done:
    if (output_lock)
        pthread_mutex_unlock(output_lock);
    return rc;
}
