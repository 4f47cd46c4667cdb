/* fetchctl top: a live view of every job of every client (subscribe + jobEvent), the hosts
 * with their observed request rates (getMetrics), limits and pauses (getRateLimits), and the
 * client processes, redrawn in place every INTERVAL seconds (default 1). q or Ctrl-C ends it
 * and restores the terminal. --once prints one frame without the terminal control sequences. */
#define _GNU_SOURCE
#include "fetchctl.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* How long one round of answers may take before the view gives up. */
#define TOP_ANSWER_TIMEOUT_MS 5000
/* Events kept for the RECENT EVENTS pane. */
#define RECENT_EVENTS 8

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* What the jobEvent notifications told so far (filled on libfetchd's reader thread). */
typedef struct events {
    pthread_mutex_t lock;
    json_t *clients;    /* jobId -> {"pid", "command"} of live jobs */
    char *recent[RECENT_EVENTS];
    size_t n_recent;
} events;

static void on_notification(const char *method, json_t *params, void *user_data) {
    events *e = user_data;
    if (!method || strcmp(method, "jobEvent"))
        return;
    const char *id = jstr(params, "jobId"), *ev = jstr(params, "event");
    json_t *conn = json_object_get(params, "connection");
    buf pid = {0}, status = {0};
    json_t *p = json_object_get(conn, "pid");
    if (p && !json_is_null(p))
        json_text(&pid, p);
    else
        buf_adds(&pid, "-");
    json_text(&status, json_object_get(params, "status"));
    const char *command = json_object_get(conn, "command") ? jstr(conn, "command") : "?";
    char clock[16];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(clock, sizeof clock, "%H:%M:%S", &tm);
    char *line = xasprintf("%s %s %s%s%s %s (pid %s: %.40s)", clock, id, ev, status.len ? " " : "",
                           status.len ? status.data : "", jstr(params, "url"), pid.data, command);
    for (char *c = line; *c; c++)
        if (*c == '\t' || *c == '\n')
            *c = ' ';
    pthread_mutex_lock(&e->lock);
    if (!strcmp(ev, "finished") || !strcmp(ev, "failed") || !strcmp(ev, "cancelled"))
        json_object_del(e->clients, id);
    else
        json_object_set_new(e->clients, id, json_pack("{s:s,s:s}", "pid", pid.data, "command", command));
    if (e->n_recent == RECENT_EVENTS) {
        free(e->recent[0]);
        memmove(e->recent, e->recent + 1, (RECENT_EVENTS - 1) * sizeof *e->recent);
        e->n_recent--;
    }
    e->recent[e->n_recent++] = line;
    pthread_mutex_unlock(&e->lock);
    buf_free(&pid);
    buf_free(&status);
}

/* ------------------------------------------------------------- frame */

/* Text cut or padded to exactly n characters (left-aligned), or right-aligned. */
static void cell(buf *b, const char *s, size_t n, int right) {
    size_t len = strlen(s);
    if (len >= n) {
        buf_add(b, s, n);
        return;
    }
    if (right)
        for (size_t i = len; i < n; i++)
            buf_addc(b, ' ');
    buf_adds(b, s);
    if (!right)
        for (size_t i = len; i < n; i++)
            buf_addc(b, ' ');
}

static void cell_json(buf *b, json_t *v, const char *fallback, size_t n, int right) {
    buf t = {0};
    json_alt(&t, v, fallback);
    cell(b, t.data, n, right);
    buf_free(&t);
}

/* A pane's heading: the cells, each followed by its separator. */
typedef struct column {
    const char *name;
    size_t width;
    int right;
    const char *after;
} column;

static void heading(buf *b, const column *c, size_t n) {
    for (size_t i = 0; i < n; i++) {
        cell(b, c[i].name, c[i].width, c[i].right);
        buf_adds(b, c[i].after);
    }
}

static void size_text(buf *b, json_t *v) {
    if (!json_is_number(v)) {
        buf_adds(b, "?");
        return;
    }
    double n = json_number_value(v);
    if (n < 1024) {
        json_text(b, v);
        buf_adds(b, " B");
        return;
    }
    const char *unit = n < 1048576 ? "KiB" : n < 1073741824 ? "MiB" : "GiB";
    double scale = n < 1048576 ? 1024 : n < 1073741824 ? 1048576 : 1073741824;
    long long tenths = (long long)floor(n / scale * 10);
    if (tenths % 10)
        buf_addf(b, "%lld.%lld %s", tenths / 10, tenths % 10, unit);
    else
        buf_addf(b, "%lld %s", tenths / 10, unit);
}

static void duration(buf *b, double seconds) {
    long long s = (long long)floor(seconds);
    if (s < 60)
        buf_addf(b, "%llds", s);
    else if (s < 3600)
        buf_addf(b, "%lldm%llds", s / 60, s % 60);
    else
        buf_addf(b, "%lldh%lldm", s / 3600, s / 60 % 60);
}

/* Requests seen so far by origin (scheme://host:port), from getMetrics' JSON. */
static json_t *request_counts(json_t *metrics) {
    json_t *counts = json_object();
    size_t i, j;
    json_t *m, *sample;
    json_array_foreach(json_object_get(metrics, "metrics"), i, m) {
        if (strcmp(jstr(m, "name"), "http_client_request_duration_seconds"))
            continue;
        json_array_foreach(json_object_get(m, "samples"), j, sample) {
            json_t *labels = json_object_get(sample, "labels");
            char *key = xasprintf("%s://%s:%s", jstr(labels, "url_scheme"), jstr(labels, "server_address"),
                                  jstr(labels, "server_port"));
            double before = json_number_value(json_object_get(counts, key));
            json_object_set_new(counts, key, json_real(before + json_number_value(json_object_get(sample, "count"))));
            free(key);
        }
    }
    return counts;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct lines {
    char **v;
    size_t n;
} lines;

static void line(lines *l, buf *b) {
    l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
    l->v[l->n++] = b->data ? b->data : xstrdup("");
    memset(b, 0, sizeof *b);
}

static void text_line(lines *l, const char *s) {
    buf b = {0};
    buf_adds(&b, s);
    line(l, &b);
}

static void jobs_pane(lines *l, json_t *jobs, json_t *clients) {
    buf b = {0};
    buf_addf(&b, "JOBS (%zu)", json_array_size(jobs));
    line(l, &b);
    static const column columns[] = {
        {"JOB", 16, 0, " "}, {"KIND", 8, 0, " "}, {"STATE", 14, 0, " "}, {"PROGRESS", 22, 0, " "},
        {"CLIENT", 24, 0, " URL"},
    };
    heading(&b, columns, sizeof columns / sizeof *columns);
    line(l, &b);
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j) {
        cell_json(&b, json_object_get(j, "jobId"), "", 16, 0); buf_addc(&b, ' ');
        cell_json(&b, json_object_get(j, "kind"), "", 8, 0); buf_addc(&b, ' ');
        cell_json(&b, json_object_get(j, "phase"), "", 14, 0); buf_addc(&b, ' ');
        buf p = {0};
        json_t *total = json_object_get(j, "totalBytes"), *recv = json_object_get(j, "receivedBytes");
        size_text(&p, recv);
        if (json_is_number(total)) {
            buf_adds(&p, " / ");
            size_text(&p, total);
            if (json_number_value(total) > 0)
                buf_addf(&p, " %lld%%", (long long)floor(json_number_value(recv) * 100 / json_number_value(total)));
        }
        json_t *attempt = json_object_get(j, "attempt");
        if (json_is_number(attempt) && json_number_value(attempt) > 1) {
            buf_adds(&p, " #");
            json_text(&p, attempt);
        }
        cell(&b, p.data, 22, 0);
        buf_free(&p);
        buf_addc(&b, ' ');
        json_t *who = json_object_get(clients, jstr(j, "jobId"));
        char *client = who ? xasprintf("%s %s", jstr(who, "pid"), jstr(who, "command")) : xstrdup("-");
        cell(&b, client, 24, 0);
        free(client);
        buf_addc(&b, ' ');
        buf_adds(&b, jstr(j, "url"));
        line(l, &b);
    }
}

static void hosts_pane(lines *l, json_t *limits, json_t *now, json_t *before, double dt) {
    buf b = {0};
    text_line(l, "HOSTS");
    static const column columns[] = {
        {"HOST", 34, 0, " "}, {"RUN", 4, 1, " "}, {"QUEUE", 5, 1, " "}, {"REQ/S", 7, 1, "  "},
        {"LIMIT (conc, rps, burst)", 26, 0, " PAUSED UNTIL"},
    };
    heading(&b, columns, sizeof columns / sizeof *columns);
    line(l, &b);
    json_t *hosts = json_object_get(limits, "hosts"), *lims = json_object_get(limits, "limits");
    /* the busy hosts and those with requests counted, sorted, each once */
    char **names = xcalloc(json_array_size(hosts) + json_object_size(now) + 1, sizeof *names);
    size_t n = 0, i;
    json_t *h;
    const char *key;
    json_array_foreach(hosts, i, h) names[n++] = (char *)jstr(h, "host");
    json_object_foreach(now, key, h) names[n++] = (char *)key;
    qsort(names, n, sizeof *names, compare_strings);
    for (i = 0; i < n; i++) {
        if (i && !strcmp(names[i], names[i - 1]))
            continue;
        json_t *active = NULL, *lim = NULL, *x;
        size_t k;
        json_array_foreach(hosts, k, x) if (!active && !strcmp(jstr(x, "host"), names[i])) active = x;
        const char *limit_name = active && json_is_string(json_object_get(active, "limit")) ? jstr(active, "limit") : "*";
        json_array_foreach(lims, k, x) if (!lim && !strcmp(jstr(x, "host"), limit_name)) lim = x;
        double count = json_number_value(json_object_get(now, names[i]));
        json_t *prev = json_object_get(before, names[i]);
        double rate = (count - (prev ? json_number_value(prev) : count)) / dt;
        cell(&b, names[i], 34, 0); buf_addc(&b, ' ');
        cell_json(&b, json_object_get(active, "running"), "0", 4, 1); buf_addc(&b, ' ');
        cell_json(&b, json_object_get(active, "queued"), "0", 5, 1); buf_addc(&b, ' ');
        json_t *r = json_real(round(rate * 10) / 10);
        cell_json(&b, r, "0", 7, 1);
        json_decref(r);
        buf_adds(&b, "  ");
        buf t = {0};
        buf_adds(&t, lim && json_is_string(json_object_get(lim, "host")) ? jstr(lim, "host") : "*");
        buf_adds(&t, ": ");
        json_t *mc = json_object_get(lim, "maxConcurrent"), *rps = json_object_get(lim, "requestsPerSecond"),
               *burst = json_object_get(lim, "burst");
        json_alt(&t, mc, "-");
        buf_adds(&t, ", ");
        json_alt(&t, rps, "-");
        buf_adds(&t, ", ");
        json_alt(&t, burst, "1");
        cell(&b, t.data, 26, 0);
        buf_free(&t);
        buf_addc(&b, ' ');
        json_alt(&b, json_object_get(active, "pausedUntil"), "-");
        line(l, &b);
    }
    free(names);
}

static void clients_pane(lines *l, json_t *clients) {
    buf b = {0};
    text_line(l, "CLIENTS");
    static const column columns[] = {{"PID", 8, 0, " "}, {"JOBS", 4, 1, "  COMMAND"}};
    heading(&b, columns, 2);
    line(l, &b);
    /* one row per client process, by pid */
    json_t *by_pid = json_object();
    const char *id;
    json_t *who;
    json_object_foreach(clients, id, who) {
        json_t *row = json_object_get(by_pid, jstr(who, "pid"));
        if (!row)
            json_object_set_new(by_pid, jstr(who, "pid"), json_pack("{s:s,s:i}", "command", jstr(who, "command"), "jobs", 0));
        row = json_object_get(by_pid, jstr(who, "pid"));
        json_object_set_new(row, "jobs", json_integer(json_integer_value(json_object_get(row, "jobs")) + 1));
    }
    size_t n = json_object_size(by_pid), i = 0;
    char **pids = xcalloc(n + 1, sizeof *pids);
    json_object_foreach(by_pid, id, who) pids[i++] = (char *)id;
    qsort(pids, n, sizeof *pids, compare_strings);
    for (i = 0; i < n; i++) {
        json_t *row = json_object_get(by_pid, pids[i]);
        cell(&b, pids[i], 8, 0); buf_addc(&b, ' ');
        cell_json(&b, json_object_get(row, "jobs"), "0", 4, 1);
        buf_addf(&b, "  %s", jstr(row, "command"));
        line(l, &b);
    }
    free(pids);
    json_decref(by_pid);
}

static void frame(buf *out, json_t *status, json_t *jobs, json_t *limits, json_t *now, json_t *before, double dt,
                  events *e, size_t rows, size_t cols) {
    lines l = {0};
    buf b = {0};
    json_t *counts = json_object_get(status, "jobs");
    buf_adds(&b, "fetchd ");
    json_text(&b, json_object_get(status, "version"));
    buf_adds(&b, "  pid ");
    json_text(&b, json_object_get(status, "pid"));
    buf_adds(&b, "  up ");
    duration(&b, json_number_value(json_object_get(status, "uptimeSeconds")));
    buf_adds(&b, "  clients ");
    json_text(&b, json_object_get(status, "connections"));
    buf_adds(&b, "  jobs: ");
    const char *names[] = {"running", "queued", "waiting", "finished", "failed"};
    const char *shown[] = {"running", "queued", "retrying", "finished", "failed"};
    for (int i = 0; i < 5; i++) {
        json_text(&b, json_object_get(counts, names[i]));
        buf_addf(&b, " %s%s", shown[i], i < 4 ? ", " : "");
    }
    line(&l, &b);
    text_line(&l, "");
    pthread_mutex_lock(&e->lock);
    jobs_pane(&l, json_object_get(jobs, "jobs"), e->clients);
    text_line(&l, "");
    hosts_pane(&l, limits, now, before, dt);
    text_line(&l, "");
    clients_pane(&l, e->clients);
    text_line(&l, "");
    text_line(&l, "RECENT EVENTS");
    for (size_t i = 0; i < e->n_recent; i++)
        text_line(&l, e->recent[i]);
    pthread_mutex_unlock(&e->lock);
    text_line(&l, "");
    text_line(&l, "q: quit");
    for (size_t i = 0; i < l.n; i++) {
        if (i < rows) {
            size_t len = strlen(l.v[i]), chars = 0, cut = len;
            for (size_t k = 0; k < len; k++)   /* cols characters, not bytes */
                if (((unsigned char)l.v[i][k] & 0xC0) != 0x80 && chars++ == cols) {
                    cut = k;
                    break;
                }
            if (i)
                buf_addc(out, '\n');
            buf_add(out, l.v[i], cut);
        }
        free(l.v[i]);
    }
    free(l.v);
}

/* ---------------------------------------------------------------- loop */

static json_t *ask(fetchd_client *c, const char *method, json_t *params) {
    json_t *result = NULL;
    fetchd_status st = fetchd_call(c, method, params, &result, NULL);
    json_decref(params);
    return st == FETCHD_OK ? result : NULL;
}

int cmd_top(const char *socket_opt, int argc, char **argv) {
    double interval = 1;
    int once = 0;
    const char *use = "usage: fetchctl top [--interval SECONDS] [--once]";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--interval")) {
            if (i + 1 >= argc || !is_number(argv[i + 1]))
                usage_error("%s", use);
            interval = strtod(argv[++i], NULL);
        } else if (!strcmp(argv[i], "--once")) {
            once = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_usage(stdout);
            return EXIT_OK;
        } else {
            usage_error("%s", use);
        }
    }
    session s = {0};
    session_open(&s, socket_opt);
    events e = {.lock = PTHREAD_MUTEX_INITIALIZER, .clients = json_object()};
    fetchd_set_notification_callback(s.client, on_notification, &e);
    fetchd_set_timeout(s.client, TOP_ANSWER_TIMEOUT_MS);
    int tty = isatty(1) && !once, keys = isatty(0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct termios saved;
    int raw = keys && !once && tcgetattr(0, &saved) == 0;
    if (raw) {
        struct termios t = saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 1;
        t.c_cc[VTIME] = 0;
        tcsetattr(0, TCSANOW, &t);
    }
    if (tty)
        (void)!write(1, "\033[?1049h\033[?25l", 14);
    int rc = EXIT_OK;
    json_t *subscribed = ask(s.client, "subscribe", json_pack("{s:b}", "jobs", 1));
    json_t *before = NULL;
    int64_t previous = 0;
    while (!stop_requested) {
        json_t *status = subscribed ? ask(s.client, "getStatus", NULL) : NULL;
        json_t *jobs = status ? ask(s.client, "listJobs", NULL) : NULL;
        json_t *limits = jobs ? ask(s.client, "getRateLimits", NULL) : NULL;
        json_t *metrics = limits ? ask(s.client, "getMetrics", json_pack("{s:s}", "format", "json")) : NULL;
        if (!metrics) {
            json_decref(status);
            json_decref(jobs);
            json_decref(limits);
            if (stop_requested)
                break;
            rc = EXIT_UNREACHABLE;
            break;
        }
        int64_t now_t = now_us();
        double dt = previous ? (double)(now_t - previous) / 1e6 : 1;
        if (dt <= 0)
            dt = 1;
        previous = now_t;
        json_t *now = request_counts(metrics);
        size_t rows = 30, cols = 100;
        struct winsize ws;
        if (tty && ioctl(1, TIOCGWINSZ, &ws) == 0) {
            if (ws.ws_row > 5) rows = ws.ws_row;
            if (ws.ws_col > 20) cols = ws.ws_col;
        }
        buf out = {0};
        if (tty)
            buf_adds(&out, "\033[H");
        buf f = {0};
        frame(&f, status, jobs, limits, now, before ? before : now, dt, &e, rows, cols);
        if (tty) {
            for (size_t i = 0; i < f.len; i++) {
                if (f.data[i] == '\n')
                    buf_adds(&out, "\033[K");
                buf_addc(&out, f.data[i]);
            }
            buf_adds(&out, "\033[J");
        } else {
            buf_add(&out, f.data, f.len);
            buf_addc(&out, '\n');
        }
        (void)!write_all(1, out.data, out.len);
        buf_free(&out);
        buf_free(&f);
        json_decref(before);
        before = now;
        json_decref(status);
        json_decref(jobs);
        json_decref(limits);
        json_decref(metrics);
        if (once)
            break;
        if (keys) {
            struct pollfd p = {.fd = 0, .events = POLLIN};
            if (poll(&p, 1, (int)(interval * 1000)) > 0) {
                char key;
                if (read(0, &key, 1) == 1 && (key == 'q' || key == 'Q'))
                    break;
            }
        } else {
            struct timespec ts = {(time_t)interval, (long)((interval - floor(interval)) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    json_decref(before);
    json_decref(subscribed);
    if (tty)
        (void)!write(1, "\033[?25h\033[?1049l", 14);
    if (raw)
        tcsetattr(0, TCSANOW, &saved);
    fetchd_set_notification_callback(s.client, NULL, NULL);
    if (rc == EXIT_UNREACHABLE)
        say("the daemon closed the connection or stopped answering");
    session_close(&s);
    json_decref(e.clients);
    for (size_t i = 0; i < e.n_recent; i++)
        free(e.recent[i]);
    return rc;
}
