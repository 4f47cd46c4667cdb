/* The short texts fetchctl prints for the daemon's answers (status, jobs, limits, auth,
 * logging...), as the shell client printed them. */
#define _GNU_SOURCE
#include "fetchctl.h"

#include <math.h>
#include <string.h>

static void pad_value(buf *b, json_t *v, const char *fallback, size_t width) {
    buf t = {0};
    json_alt(&t, v, fallback ? fallback : "");
    buf_pad(b, t.data ? t.data : "", width);
    buf_free(&t);
}

/* A table's heading: each name padded to its width, the last one as it is. */
static void heading(buf *out, const char *const *names, const size_t *widths, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        buf_pad(out, names[i], widths[i]);
    buf_adds(out, names[n - 1]);
    buf_addc(out, '\n');
}

/* A size as the jobs table writes it: "?", "512 B", "1.5 KiB" (one decimal, dropped when 0). */
static void table_size(buf *b, json_t *v) {
    if (!json_is_number(v)) {
        buf_adds(b, "?");
        return;
    }
    double n = json_number_value(v);
    const char *unit = "B";
    double scale = 1;
    if (n < 1024) {
        json_text(b, v);
        buf_adds(b, " B");
        return;
    }
    if (n < 1048576) unit = "KiB", scale = 1024;
    else if (n < 1073741824) unit = "MiB", scale = 1048576;
    else unit = "GiB", scale = 1073741824;
    long long tenths = (long long)floor(n * 10 / scale);
    if (tenths % 10)
        buf_addf(b, "%lld.%lld %s", tenths / 10, tenths % 10, unit);
    else
        buf_addf(b, "%lld %s", tenths / 10, unit);
}

static json_t *get(json_t *o, const char *key) {
    return json_is_object(o) ? json_object_get(o, key) : NULL;
}

static void format_status(buf *out, json_t *r, const char *sock) {
    json_t *jobs = get(r, "jobs"), *logging = get(r, "logging");
    buf_adds(out, "fetchd ");
    json_alt(out, get(r, "version"), "?");
    buf_adds(out, " (pid ");
    json_alt(out, get(r, "pid"), "?");
    buf_addf(out, ") on %s\nup %lld", sock, (long long)floor(json_number_value(get(r, "uptimeSeconds"))));
    buf_adds(out, "s, ");
    json_alt(out, get(r, "connections"), "?");
    buf_adds(out, " connection(s)\njobs: ");
    const char *names[] = {"queued", "running", "waiting", "finished", "failed"};
    for (int i = 0; i < 5; i++) {
        json_alt(out, get(jobs, names[i]), "0");
        buf_addf(out, " %s%s", names[i], i < 4 ? ", " : "\n");
    }
    buf_adds(out, "logging: ");
    if (json_is_true(get(logging, "enabled"))) {
        buf_adds(out, "on, ");
        json_alt(out, get(logging, "directory"), "?");
        buf_adds(out, "\n");
    } else {
        buf_adds(out, "off\n");
    }
}

static void format_jobs(buf *out, json_t *r) {
    json_t *jobs = get(r, "jobs");
    if (json_array_size(jobs) == 0) {
        buf_adds(out, "no jobs\n");
        return;
    }
    static const char *const names[] = {"JOBID", "STATE", "TRY", "RECEIVED", "REQUEST"};
    static const size_t widths[] = {28, 8, 4, 22};
    heading(out, names, widths, 5);
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j) {
        pad_value(out, get(j, "jobId"), NULL, 27);
        buf_addc(out, ' ');
        pad_value(out, get(j, "state"), NULL, 8);
        pad_value(out, get(j, "attempt"), NULL, 4);
        buf sizes = {0};
        table_size(&sizes, get(j, "receivedBytes"));
        buf_addc(&sizes, '/');
        table_size(&sizes, get(j, "totalBytes"));
        buf_pad(out, sizes.data, 22);
        buf_free(&sizes);
        json_alt(out, get(j, "method"), "");
        buf_addc(out, ' ');
        json_alt(out, get(j, "url"), "");
        const char *comment = jstr(j, "comment");
        if (*comment)
            buf_addf(out, "  # %s", comment);
        buf_addc(out, '\n');
    }
}

static void format_limits(buf *out, json_t *r) {
    static const char *const names[] = {"HOST", "CONCURRENT", "RPS", "BURST", "RUNNING", "QUEUED", "PAUSED UNTIL"};
    static const size_t widths[] = {32, 11, 9, 6, 8, 7};
    heading(out, names, widths, 7);
    size_t i;
    json_t *l;
    json_array_foreach(get(r, "limits"), i, l) {
        pad_value(out, get(l, "host"), NULL, 31);
        buf_addc(out, ' ');
        pad_value(out, get(l, "maxConcurrent"), "none", 11);
        pad_value(out, get(l, "requestsPerSecond"), "none", 9);
        pad_value(out, get(l, "burst"), NULL, 6);
        pad_value(out, get(l, "running"), NULL, 8);
        pad_value(out, get(l, "queued"), NULL, 7);
        json_alt(out, get(l, "pausedUntil"), "-");
        buf_addc(out, '\n');
    }
    json_t *hosts = get(r, "hosts");
    if (json_array_size(hosts)) {
        static const char *const active[] = {"ACTIVE HOST", "LIMIT", "RUNNING", "QUEUED", "PAUSED UNTIL"};
        static const size_t active_widths[] = {32, 20, 8, 7};
        buf_addc(out, '\n');
        heading(out, active, active_widths, 5);
        json_array_foreach(hosts, i, l) {
            pad_value(out, get(l, "host"), NULL, 31);
            buf_addc(out, ' ');
            json_t *limit = get(l, "limit");
            pad_value(out, limit, json_is_null(limit) || !limit ? "null" : NULL, 19);
            buf_addc(out, ' ');
            pad_value(out, get(l, "running"), NULL, 8);
            pad_value(out, get(l, "queued"), NULL, 7);
            json_alt(out, get(l, "pausedUntil"), "-");
            buf_addc(out, '\n');
        }
    }
    buf_adds(out, "\nwaiting: ");
    json_alt(out, get(r, "queued"), "0");
    buf_adds(out, " of at most ");
    json_alt(out, get(r, "maxQueued"), "?");
    buf_addc(out, '\n');
}

static void format_auths(buf *out, json_t *r) {
    json_t *rules = get(r, "rules");
    if (json_array_size(rules) == 0) {
        buf_adds(out, "no auth rules\n");
        return;
    }
    static const char *const names[] = {"HOST", "TYPE", "CREDENTIAL", "EXPIRES", "LAST ERROR"};
    static const size_t widths[] = {32, 10, 11, 25};
    heading(out, names, widths, 5);
    size_t i;
    json_t *rule;
    json_array_foreach(rules, i, rule) {
        pad_value(out, get(rule, "host"), NULL, 31);
        buf_addc(out, ' ');
        pad_value(out, get(rule, "type"), NULL, 10);
        buf_pad(out, json_is_true(get(rule, "hasCredential")) ? "held" : "-", 11);
        pad_value(out, get(rule, "expiresAt"), "-", 25);
        json_alt(out, get(rule, "lastError"), "-");
        buf_addc(out, '\n');
    }
}

void format_simple(buf *out, print_mode mode, json_t *r, const char *sock, const char *name) {
    switch (mode) {
    case MODE_STATUS: format_status(out, r, sock); break;
    case MODE_JOBS: format_jobs(out, r); break;
    case MODE_PING:
        json_text(out, r);
        buf_addc(out, '\n');
        break;
    case MODE_CANCEL:
        if (json_is_true(get(r, "cancelled")))
            buf_addf(out, "cancelled %s\n", name);
        else
            buf_addf(out, "fetchctl: %s: no such live job (unknown or already finished)\n", name);
        break;
    case MODE_LOGGING:
        buf_adds(out, "logging: ");
        if (json_is_true(get(r, "enabled"))) {
            buf_adds(out, "on, ");
            json_alt(out, get(r, "directory"), "?");
        } else {
            buf_adds(out, "off");
        }
        buf_addc(out, '\n');
        if (get(r, "bodies")) {
            buf_adds(out, "directory: ");
            json_alt(out, get(r, "directory"), "?");
            buf_adds(out, "\nbodies: ");
            if (json_is_true(get(r, "bodies"))) {
                buf_adds(out, "on, up to ");
                json_alt(out, get(r, "maxBodyBytes"), "?");
                buf_adds(out, " bytes");
            } else {
                buf_adds(out, "off");
            }
            buf_addf(out, "\nredact: %s\n", json_is_false(get(r, "redact")) ? "off" : "on");
        }
        break;
    case MODE_LIMIT:
        json_text(out, get(r, "host"));
        buf_adds(out, ": maxConcurrent ");
        json_alt(out, get(r, "maxConcurrent"), "none");
        buf_adds(out, ", rps ");
        json_alt(out, get(r, "requestsPerSecond"), "none");
        buf_adds(out, ", burst ");
        if (get(r, "burst") && !json_is_null(get(r, "burst")))
            json_text(out, get(r, "burst"));
        else
            buf_adds(out, "null");
        buf_addc(out, '\n');
        break;
    case MODE_LIMITS: format_limits(out, r); break;
    case MODE_AUTH:
        json_text(out, get(r, "host"));
        if (get(r, "removed"))
            buf_addf(out, ": %s\n", json_is_true(get(r, "removed")) ? "rule removed" : "no rule to remove");
        else {
            buf_adds(out, ": ");
            json_text(out, get(r, "type"));
            buf_adds(out, " rule set\n");
        }
        break;
    case MODE_AUTHS: format_auths(out, r); break;
    case MODE_TEXT: json_text(out, get(r, "text")); break;
    case MODE_JSON:
    case MODE_BODY:
    case MODE_NONE:
        json_write(out, r, 1);
        buf_addc(out, '\n');
        break;
    }
}
