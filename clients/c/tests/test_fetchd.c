/* Tests for libfetchd against a real daemon and the integration test server.
 *
 *   tests/test_fetchd SOCKET TEST_SERVER_URL CLOSED_PORT TMPDIR
 *   tests/test_fetchd --peer SOCKET refused OWNER_UID | --peer SOCKET trusted   (who listens)
 *
 * Prints one line per check that fails and "c-client: N checks, N failed, N skipped" at the
 * end; exits 1 on any failure. Run by tests/integration/test_c_client.py under valgrind or
 * AddressSanitizer, so every path here must free what it gets. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fetchd.h"
#include "check.h"

static const char *sock, *tmpdir;
static int closed_port;
static int skipped;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static fetchd_client *connect_or_die(void) {
    fetchd_client *c = NULL;
    fetchd_error err = {0};
    if (fetchd_connect(sock, &c, &err) != FETCHD_OK) {
        fprintf(stderr, "cannot connect: %s\n", err.message);
        exit(2);
    }
    return c;
}

/* Polls listJobs until job_id is live (1) or 10 s pass (0). */
static int wait_for_job(fetchd_client *c, const char *job_id) {
    for (int i = 0; i < 1000; i++) {
        json_t *jobs = NULL;
        if (fetchd_list_jobs(c, &jobs, NULL) == FETCHD_OK) {
            size_t k;
            json_t *j;
            int found = 0;
            json_array_foreach(jobs, k, j) {
                if (!strcmp(json_string_value(json_object_get(j, "jobId")), job_id))
                    found = 1;
            }
            json_decref(jobs);
            if (found)
                return 1;
        }
        sleep_ms(10);
    }
    return 0;
}

static void test_socket_path_and_connect_errors(void) {
    char buf[256];
    setenv("FETCHD_SOCKET", "/x/env.sock", 1);
    setenv("XDG_RUNTIME_DIR", "/run/user/7", 1);
    CHECK(fetchd_socket_path("/x/arg.sock", buf, sizeof buf) == FETCHD_OK && !strcmp(buf, "/x/arg.sock"), "%s", buf);
    CHECK(fetchd_socket_path(NULL, buf, sizeof buf) == FETCHD_OK && !strcmp(buf, "/x/env.sock"), "%s", buf);
    unsetenv("FETCHD_SOCKET");
    CHECK(fetchd_socket_path(NULL, buf, sizeof buf) == FETCHD_OK && !strcmp(buf, "/run/user/7/fetchd.sock"), "%s", buf);
    unsetenv("XDG_RUNTIME_DIR");
    char want[64];
    snprintf(want, sizeof want, "/tmp/fetchd-%u/fetchd.sock", (unsigned)getuid());
    CHECK(fetchd_socket_path(NULL, buf, sizeof buf) == FETCHD_OK && !strcmp(buf, want), "%s", buf);
    CHECK(fetchd_socket_path(NULL, buf, 4) == FETCHD_ERR_INVALID_ARGUMENT, "short buffer");

    setenv("FETCHD_SOCKET", sock, 1); /* connect(NULL) follows the same rules */
    fetchd_client *c = NULL;
    CHECK(fetchd_connect(NULL, &c, NULL) == FETCHD_OK, "connect via $FETCHD_SOCKET");
    CHECK(fetchd_ping(c, NULL) == FETCHD_OK, "ping");
    fetchd_close(c);
    unsetenv("FETCHD_SOCKET");

    fetchd_error err = {0};
    char missing[512];
    snprintf(missing, sizeof missing, "%s/nobody.sock", tmpdir);
    c = (fetchd_client *)1;
    CHECK(fetchd_connect(missing, &c, &err) == FETCHD_ERR_CONNECT, "connect to a missing socket");
    CHECK(c == NULL && err.status == FETCHD_ERR_CONNECT && err.message && strstr(err.message, missing),
          "%s", err.message ? err.message : "(null)");
    fetchd_error_clear(&err);
    CHECK(err.message == NULL && err.data == NULL && err.code == 0, "cleared");
}

static void test_basics(fetchd_client *c) {
    fetchd_error err = {0};
    json_t *st = NULL, *jobs = NULL, *res = NULL;
    CHECK(fetchd_ping(c, &err) == FETCHD_OK, "ping: %s", err.message);
    CHECK(fetchd_get_status(c, &st, &err) == FETCHD_OK, "getStatus: %s", err.message);
    CHECK(json_integer_value(json_object_get(st, "pid")) > 0, "pid");
    CHECK(json_is_object(json_object_get(st, "jobs")), "jobs counts");
    json_decref(st);
    CHECK(fetchd_list_jobs(c, &jobs, &err) == FETCHD_OK && json_is_array(jobs), "listJobs");
    json_decref(jobs);
    CHECK(fetchd_call(c, "ping", NULL, &res, &err) == FETCHD_OK && !strcmp(json_string_value(res), "pong"), "call ping");
    json_decref(res);
    CHECK(fetchd_notify(c, "ping", NULL, &err) == FETCHD_OK, "notify");
    CHECK(fetchd_ping(c, &err) == FETCHD_OK, "ping after notify");
    fetchd_error_clear(&err);
}

static void test_fetch(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_response r = {0};
    char *u = url("/echo?x=1");
    CHECK(fetchd_fetch(c, u, &r, &err) == FETCHD_OK, "fetch: %s", err.message);
    CHECK(r.status == 200, "status %d", r.status);
    CHECK(r.url && !strcmp(r.url, u), "url %s", r.url);
    CHECK(r.job_id && *r.job_id, "job id");
    CHECK(r.body_len == strlen((char *)r.body) && strstr((char *)r.body, "\"method\": \"GET\""), "%s", r.body);
    const char *ct = fetchd_response_header(&r, "Content-Type");
    CHECK(ct && !strcmp(ct, "application/json"), "content-type %s", ct ? ct : "(null)");
    fetchd_response_free(&r);
    free(u);

    /* The full request model: POST a JSON body with a header. */
    u = url("/echo");
    json_t *params = json_pack("{s:s, s:{s:[i,s]}, s:{s:s}, s:b}", "url", u, "json", "k", 1, "two",
                               "headers", "X-Client", "c", "retry", 0);
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_OK, "fetch_ex: %s", err.message);
    json_t *echo = json_loadb((char *)r.body, r.body_len, 0, NULL);
    CHECK(echo && !strcmp(json_string_value(json_object_get(echo, "method")), "POST"), "POST");
    CHECK(echo && !strcmp(json_string_value(json_object_get(echo, "body")), "{\"k\":[1,\"two\"]}"),
          "body %s", echo ? json_string_value(json_object_get(echo, "body")) : "");
    json_decref(echo);
    json_decref(params);
    fetchd_response_free(&r);
    free(u);

    /* A 404 is a result, not an error. */
    u = url("/status/404");
    CHECK(fetchd_fetch(c, u, &r, &err) == FETCHD_OK && r.status == 404, "404: %d", r.status);
    CHECK(r.body_len == 10 && !memcmp(r.body, "status 404", 10), "%s", r.body);
    fetchd_response_free(&r);
    free(u);

    /* Binary bodies come as base64 and are decoded. */
    u = url("/binary");
    static const unsigned char binary[] = "\xff\xfe\xfd\x00\x80\xc3(abc";
    CHECK(fetchd_fetch(c, u, &r, &err) == FETCHD_OK, "binary: %s", err.message);
    CHECK(json_object_get(r.result, "bodyBase64") != NULL, "came as base64");
    CHECK(r.body_len == 10 && !memcmp(r.body, binary, 10), "binary body, %zu bytes", r.body_len);
    fetchd_response_free(&r);
    free(u);

    u = url("/bytes/100000");
    params = json_pack("{s:s, s:s}", "url", u, "responseBody", "base64");
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_OK && r.body_len == 100000, "100000 bytes: %zu", r.body_len);
    fetchd_response_free(&r);
    json_decref(params);
    free(u);

    u = url("/json");
    params = json_pack("{s:s, s:s}", "url", u, "responseBody", "json");
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_OK, "json: %s", err.message);
    CHECK(!strcmp((char *)r.body, "{\"hello\":\"world\",\"n\":[1,2,3]}"), "%s", r.body);
    fetchd_response_free(&r);
    json_decref(params);
    free(u);
    fetchd_error_clear(&err);
}

static void test_errors(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_response r = {0};
    char *u = url("/echo");
    json_t *params = json_pack("{s:s, s:i}", "url", u, "bogus", 1);
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_ERR_RPC, "unknown field");
    CHECK(err.status == FETCHD_ERR_RPC && err.code == FETCHD_RPC_INVALID_PARAMS, "code %d", err.code);
    const char *field = fetchd_error_data_string(&err, "field");
    CHECK(field && !strcmp(field, "bogus"), "field %s", field ? field : "(null)");
    CHECK(r.result == NULL && r.body == NULL, "response untouched on error");
    json_decref(params);
    free(u);

    char closed[64];
    snprintf(closed, sizeof closed, "http://127.0.0.1:%d/", closed_port);
    params = json_pack("{s:s, s:b, s:s}", "url", closed, "retry", 0, "jobId", "c-transport");
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_ERR_RPC && err.code == FETCHD_RPC_TRANSPORT,
          "transport: %d %s", err.code, err.message);
    const char *kind = fetchd_error_data_string(&err, "kind");
    const char *job = fetchd_error_data_string(&err, "jobId");
    CHECK(kind && !strcmp(kind, "connect"), "kind %s", kind ? kind : "(null)");
    CHECK(job && !strcmp(job, "c-transport"), "jobId %s", job ? job : "(null)");
    CHECK(json_integer_value(json_object_get(err.data, "attempts")) == 1, "attempts");
    json_decref(params);

    CHECK(fetchd_fetch(c, "ftp://127.0.0.1/x", &r, &err) == FETCHD_ERR_RPC && err.code == FETCHD_RPC_NOT_ALLOWED,
          "not allowed: %d", err.code);
    json_t *res = (json_t *)1;
    CHECK(fetchd_call(c, "noSuchMethod", NULL, &res, &err) == FETCHD_ERR_RPC && err.code == FETCHD_RPC_METHOD_NOT_FOUND,
          "method not found: %d", err.code);
    CHECK(res == NULL, "no result on error");
    params = json_pack("[i]", 1);
    CHECK(fetchd_call(c, "fetch", params, NULL, &err) == FETCHD_ERR_RPC && err.code == FETCHD_RPC_INVALID_PARAMS,
          "array params: %d", err.code);
    json_decref(params);
    CHECK(fetchd_fetch_ex(c, NULL, &r, &err) == FETCHD_ERR_INVALID_ARGUMENT, "NULL params");
    CHECK(strcmp(fetchd_status_string(FETCHD_ERR_RPC), "unknown status") != 0, "status string");
    fetchd_error_clear(&err);
    CHECK(fetchd_ping(c, NULL) == FETCHD_OK, "still usable");
}

/* ---- notifications ---- */
struct progress_log {
    pthread_mutex_t lock;
    int count;
    long last_received;
    int deadlock_refused;
    int cancel_first;       /* cancel the job from the callback on the first event */
    fetchd_client *client;
};

static void on_note(const char *method, json_t *params, void *data) {
    struct progress_log *log = data;
    if (strcmp(method, "progress") != 0)
        return;
    pthread_mutex_lock(&log->lock);
    log->count++;
    log->last_received = (long)json_integer_value(json_object_get(params, "receivedBytes"));
    int first = log->count == 1;
    pthread_mutex_unlock(&log->lock);
    if (first) {
        fetchd_error err = {0};
        if (fetchd_ping(log->client, &err) == FETCHD_ERR_WOULD_DEADLOCK)
            log->deadlock_refused = 1;
        fetchd_error_clear(&err);
        if (log->cancel_first)
            fetchd_cancel_nowait(log->client, json_string_value(json_object_get(params, "jobId")), NULL);
    }
}

static void test_progress(fetchd_client *c) {
    struct progress_log log = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, c};
    fetchd_set_notification_callback(c, on_note, &log);
    fetchd_error err = {0};
    fetchd_response r = {0};
    char *u = url("/slow-body?chunks=5&ms=40");
    json_t *params = json_pack("{s:s, s:b}", "url", u, "progress", 1);
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_OK && r.status == 200, "progress fetch: %s", err.message);
    fetchd_response_free(&r);
    for (int i = 0; i < 500; i++) { /* the last one may trail the answer on the reader thread */
        pthread_mutex_lock(&log.lock);
        long last = log.last_received;
        pthread_mutex_unlock(&log.lock);
        if (last == 5)
            break;
        sleep_ms(10);
    }
    CHECK(log.count > 0 && log.last_received == 5, "progress: %d events, last %ld", log.count, log.last_received);
    CHECK(log.deadlock_refused, "a blocking call from the callback is refused");

    /* Cancel from inside the callback. */
    struct progress_log log2 = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 1, c};
    fetchd_set_notification_callback(c, on_note, &log2);
    json_decref(params);
    free(u);
    u = url("/slow-body?chunks=100&ms=50");
    params = json_pack("{s:s, s:b, s:s}", "url", u, "progress", 1, "jobId", "c-cb-cancel");
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_ERR_RPC && err.code == FETCHD_RPC_CANCELLED,
          "cancelled from callback: %d", err.code);
    const char *by = fetchd_error_data_string(&err, "by");
    CHECK(by && !strcmp(by, "cancel"), "by %s", by ? by : "(null)");
    fetchd_set_notification_callback(c, NULL, NULL);
    json_decref(params);
    free(u);
    fetchd_error_clear(&err);
}

/* ---- threads ---- */
struct fetch_job {
    fetchd_client *client;
    json_t *params;
    fetchd_status status;
    fetchd_error err;
    fetchd_response response;
};

static void *run_fetch(void *arg) {
    struct fetch_job *job = arg;
    job->status = fetchd_fetch_ex(job->client, job->params, &job->response, &job->err);
    return NULL;
}

static void test_cancel_from_another_thread(fetchd_client *c) {
    char *u = url("/slow-body?chunks=100&ms=100");
    struct fetch_job job = {c, json_pack("{s:s, s:s}", "url", u, "jobId", "c-cancel"), 0, {0}, {0}};
    pthread_t t;
    pthread_create(&t, NULL, run_fetch, &job);
    CHECK(wait_for_job(c, "c-cancel"), "job listed");
    fetchd_client *other = connect_or_die();
    int cancelled = 0;
    CHECK(fetchd_cancel(other, "c-cancel", &cancelled, NULL) == FETCHD_OK && cancelled, "cancel");
    pthread_join(t, NULL);
    CHECK(job.status == FETCHD_ERR_RPC && job.err.code == FETCHD_RPC_CANCELLED, "cancelled: %d", job.err.code);
    const char *by = fetchd_error_data_string(&job.err, "by");
    CHECK(by && !strcmp(by, "cancel"), "by %s", by ? by : "(null)");
    CHECK(fetchd_cancel(other, "c-cancel", &cancelled, NULL) == FETCHD_OK && !cancelled, "second cancel");
    fetchd_close(other);
    fetchd_error_clear(&job.err);
    json_decref(job.params);
    free(u);
}

#define THREADS 6
#define PER_THREAD 8
struct worker {
    fetchd_client *client;
    int index;
    int bad;
};

static void *worker_main(void *arg) {
    struct worker *w = arg;
    for (int n = 0; n < PER_THREAD; n++) {
        char path[64], want[32];
        snprintf(path, sizeof path, "/echo?t=%d&n=%d", w->index, n);
        snprintf(want, sizeof want, "t=%d&n=%d", w->index, n);
        char *u = url(path);
        fetchd_response r = {0};
        fetchd_error err = {0};
        if (fetchd_fetch(w->client, u, &r, &err) != FETCHD_OK) {
            w->bad++;
        } else {
            json_t *echo = json_loadb((char *)r.body, r.body_len, 0, NULL);
            const char *q = json_string_value(json_object_get(echo, "query"));
            if (!q || strcmp(q, want) != 0)
                w->bad++;
            json_decref(echo);
        }
        if (n % 3 == 0 && fetchd_ping(w->client, NULL) != FETCHD_OK)
            w->bad++;
        fetchd_response_free(&r);
        fetchd_error_clear(&err);
        free(u);
    }
    return NULL;
}

static void test_concurrent_calls(fetchd_client *c) {
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){c, i, 0};
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].bad == 0, "thread %d: %d bad answers", i, w[i].bad);
    }
}

static void test_timeout(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_response r = {0};
    char *u = url("/slow-body?chunks=100&ms=100");
    json_t *params = json_pack("{s:s, s:s}", "url", u, "jobId", "c-timeout");
    fetchd_set_timeout(c, 200);
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_ERR_TIMEOUT, "timeout: %d", err.status);
    fetchd_set_timeout(c, 0);
    int cancelled = 0;
    CHECK(fetchd_cancel(c, "c-timeout", &cancelled, NULL) == FETCHD_OK && cancelled, "cancel after timeout");
    CHECK(fetchd_ping(c, NULL) == FETCHD_OK, "usable after a timeout (late answer dropped)");
    json_decref(params);
    free(u);
    fetchd_error_clear(&err);
}

static void test_download(fetchd_client *c) {
    fetchd_error err = {0};
    json_t *res = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/c-download.bin", tmpdir);
    char *u = url("/bytes/5000");
    fetchd_status st = fetchd_download(c, u, path, NULL, &res, &err);
    if (st == FETCHD_ERR_RPC && err.code == FETCHD_RPC_METHOD_NOT_FOUND) {
        printf("SKIP download: the daemon does not implement it yet (-32601)\n");
        skipped++;
    } else {
        CHECK(st == FETCHD_OK, "download: %s", err.message);
        CHECK(json_integer_value(json_object_get(res, "bytes")) == 5000, "bytes");
        CHECK(json_integer_value(json_object_get(res, "status")) == 200, "status");
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL, "file written");
        if (f) {
            fseek(f, 0, SEEK_END);
            CHECK(ftell(f) == 5000, "size %ld", ftell(f));
            fclose(f);
        }
        json_decref(res);
        res = NULL;
        CHECK(fetchd_download(c, u, path, NULL, &res, &err) == FETCHD_ERR_RPC && err.code == FETCHD_RPC_FILE_ERROR,
              "existing file: %d", err.code);
        json_t *extra = json_pack("{s:b}", "overwrite", 1);
        CHECK(fetchd_download(c, u, path, extra, &res, &err) == FETCHD_OK, "overwrite: %s", err.message);
        json_decref(extra);
    }
    json_decref(res);
    free(u);
    fetchd_error_clear(&err);
}

/* --peer SOCKET refused OWNER_UID: SOCKET is served by OWNER_UID, neither ours nor root, and
 * fetchd_connect refuses it, naming the socket and the uid (the test that runs this checks
 * that nothing reached the listener). --peer SOCKET trusted: it is served by root or by us,
 * and a ping goes through. */
static int test_peer(const char *path, const char *expect, const char *owner) {
    fetchd_client *c = (fetchd_client *)1;
    fetchd_error err = {0};
    if (!strcmp(expect, "trusted")) {
        CHECK(fetchd_connect(path, &c, &err) == FETCHD_OK, "%s", err.message ? err.message : "(null)");
        if (c) {
            CHECK(fetchd_ping(c, &err) == FETCHD_OK, "%s", err.message ? err.message : "(null)");
            fetchd_close(c);
        }
    } else {
        CHECK(fetchd_connect(path, &c, &err) == FETCHD_ERR_UNTRUSTED_PEER, "%s", err.message ? err.message : "(null)");
        CHECK(c == NULL && err.status == FETCHD_ERR_UNTRUSTED_PEER, "status %d", (int)err.status);
        char uid_text[64];
        snprintf(uid_text, sizeof uid_text, "uid %s ", owner ? owner : "?");
        CHECK(err.message && strstr(err.message, path) && strstr(err.message, uid_text),
              "%s", err.message ? err.message : "(null)");
        CHECK(strcmp(fetchd_status_string(FETCHD_ERR_UNTRUSTED_PEER), "unknown status") != 0, "status string");
        fetchd_error_clear(&err);
        /* the same through $FETCHD_SOCKET */
        setenv("FETCHD_SOCKET", path, 1);
        c = NULL;
        CHECK(fetchd_connect(NULL, &c, &err) == FETCHD_ERR_UNTRUSTED_PEER, "via $FETCHD_SOCKET");
        CHECK(c == NULL, "no client");
        unsetenv("FETCHD_SOCKET");
    }
    fetchd_error_clear(&err);
    printf("c-client: %d checks, %d failed, %d skipped\n", checks, failures, skipped);
    return failures ? 1 : 0;
}

static void test_auth(fetchd_client *c) {
    fetchd_error err = {0};
    const char *host = strstr(base, "://") ? strstr(base, "://") + 3 : base;
    json_t *rule = json_pack("{s:s, s:s}", "type", "bearer", "token", "c-client-token");
    json_t *res = NULL;
    CHECK(fetchd_set_auth(c, host, rule, &res, &err) == FETCHD_OK, "setAuth: %s", err.message);
    CHECK(json_is_true(json_object_get(res, "hasCredential")), "hasCredential");
    char *text = json_dumps(res, 0);
    CHECK(text && !strstr(text, "c-client-token"), "no secret in %s", text ? text : "(null)");
    free(text);
    json_decref(res);
    json_decref(rule);
    char *u = url("/echo");
    fetchd_response r = {0};
    CHECK(fetchd_fetch(c, u, &r, &err) == FETCHD_OK && r.body && strstr((char *)r.body, "Bearer c-client-token"),
          "the rule's header: %s", r.body ? (char *)r.body : err.message);
    fetchd_response_free(&r);
    free(u);
    json_t *rules = NULL;
    CHECK(fetchd_get_auth(c, &rules, &err) == FETCHD_OK && json_array_size(rules) == 1, "getAuth");
    json_decref(rules);
    rule = json_pack("{s:n}", "type");
    CHECK(fetchd_set_auth(c, host, rule, &res, &err) == FETCHD_OK && json_is_true(json_object_get(res, "removed")),
          "removed: %s", err.message);
    json_decref(res);
    json_decref(rule);
    rule = json_pack("{s:s}", "type", "bearer");
    CHECK(fetchd_set_auth(c, host, rule, NULL, &err) == FETCHD_ERR_RPC && err.code == -32602, "no token: -32602");
    json_decref(rule);
    CHECK(fetchd_set_auth(c, NULL, NULL, NULL, &err) == FETCHD_ERR_INVALID_ARGUMENT, "NULL arguments");
    fetchd_error_clear(&err);
}

/* getJob and attach on an ended job (answered from the daemon's ring of ended jobs). */
static void test_get_job_and_attach(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_response r = {0};
    json_t *job = NULL, *res = NULL;
    char *u = url("/status/200");
    json_t *params = json_pack("{s:s, s:s}", "url", u, "jobId", "c-getjob-1");
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_OK, "fetch: %s", err.message);
    json_decref(params);
    fetchd_response_free(&r);
    CHECK(fetchd_get_job(c, "c-getjob-1", &job, &err) == FETCHD_OK, "getJob: %s", err.message);
    CHECK(job && !strcmp(json_string_value(json_object_get(job, "state")), "finished"), "getJob state");
    CHECK(json_integer_value(json_object_get(json_object_get(job, "result"), "status")) == 200, "getJob result");
    json_decref(job);
    CHECK(fetchd_attach(c, "c-getjob-1", 0, &res, &err) == FETCHD_OK, "attach: %s", err.message);
    CHECK(json_integer_value(json_object_get(res, "status")) == 200, "attach result");
    json_decref(res);
    CHECK(fetchd_get_job(c, "c-no-such-job", &job, &err) == FETCHD_ERR_RPC && err.code == -32602, "getJob unknown");
    CHECK(job == NULL, "no job on error");
    fetchd_error_clear(&err);
    free(u);
}

/* ---- per-call progress callbacks ---- */
struct call_log {
    pthread_t caller;
    int count, other_thread, wrong_job, stop_after;
    long last_received;
    const char *job_id;
    fetchd_client *client;
    int nested_ok;
};

static int on_call_progress(const char *method, json_t *params, void *data) {
    struct call_log *log = data;
    if (!pthread_equal(pthread_self(), log->caller))
        log->other_thread++;
    const char *job = json_string_value(json_object_get(params, "jobId"));
    if (log->job_id && (!job || strcmp(job, log->job_id)))
        log->wrong_job++;
    if (!strcmp(method, "progress")) {
        log->count++;
        log->last_received = (long)json_integer_value(json_object_get(params, "receivedBytes"));
    }
    /* On the caller's thread a blocking call of the same client works. */
    if (log->count == 1 && log->client)
        log->nested_ok = fetchd_ping(log->client, NULL) == FETCHD_OK;
    return log->stop_after && log->count >= log->stop_after;
}

struct progress_job {
    fetchd_client *client;
    char *url;
    struct call_log log;
    fetchd_status status;
    long body_len;
};

static void *run_progress_fetch(void *arg) {
    struct progress_job *job = arg;
    job->log.caller = pthread_self();
    json_t *params = json_pack("{s:s}", "url", job->url);
    fetchd_response r = {0};
    job->status = fetchd_fetch_progress(job->client, params, on_call_progress, &job->log, &r, NULL);
    job->body_len = (long)r.body_len;
    fetchd_response_free(&r);
    json_decref(params);
    return NULL;
}

static void test_progress_per_call(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_response r = {0};
    /* Three threads at once, each with its own callback: each gets only its own job's events. */
    struct progress_job jobs[3];
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].client = c;
        char path[64];
        snprintf(path, sizeof path, "/slow-body?chunks=%d&ms=40", 3 + i);
        jobs[i].url = url(path);
        pthread_create(&threads[i], NULL, run_progress_fetch, &jobs[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        CHECK(jobs[i].status == FETCHD_OK && jobs[i].body_len == 3 + i, "thread %d: %d", i, jobs[i].status);
        CHECK(jobs[i].log.count > 0 && jobs[i].log.last_received == 3 + i, "thread %d: %d events, last %ld",
              i, jobs[i].log.count, jobs[i].log.last_received);
        CHECK(jobs[i].log.other_thread == 0, "thread %d: callback ran on another thread", i);
        free(jobs[i].url);
    }

    /* A given jobId is kept; a blocking call from the callback works; a nonzero return cancels. */
    struct call_log log = {pthread_self(), 0, 0, 0, 2, 0, "c-percall-stop", c, 0};
    char *u = url("/slow-body?chunks=100&ms=50");
    json_t *params = json_pack("{s:s, s:s}", "url", u, "jobId", "c-percall-stop");
    CHECK(fetchd_fetch_progress(c, params, on_call_progress, &log, &r, &err) == FETCHD_ERR_RPC
          && err.code == FETCHD_RPC_CANCELLED, "stopped by the callback: %d", err.code);
    CHECK(log.count == 2 && log.wrong_job == 0 && log.nested_ok, "count %d wrong %d nested %d",
          log.count, log.wrong_job, log.nested_ok);
    const char *by = fetchd_error_data_string(&err, "by");
    CHECK(by && !strcmp(by, "cancel"), "by %s", by ? by : "(null)");
    json_decref(params);
    free(u);

    /* download with a callback */
    char *path = NULL;
    if (asprintf(&path, "%s/percall.bin", tmpdir) < 0)
        abort();
    struct call_log dlog = {pthread_self(), 0, 0, 0, 0, 0, NULL, NULL, 0};
    json_t *res = NULL;
    u = url("/bytes/300000");
    CHECK(fetchd_download_progress(c, u, path, NULL, on_call_progress, &dlog, &res, &err) == FETCHD_OK,
          "download_progress: %s", err.message);
    CHECK(json_integer_value(json_object_get(res, "bytes")) == 300000, "downloaded bytes");
    CHECK(dlog.count > 0 && dlog.last_received == 300000, "download progress: %d, last %ld", dlog.count,
          dlog.last_received);
    json_decref(res);
    free(u);
    free(path);
    fetchd_error_clear(&err);
}

static void test_upload(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_response r = {0};
    char *a = NULL, *missing = NULL;
    if (asprintf(&a, "%s/up-a.txt", tmpdir) < 0 || asprintf(&missing, "%s/up-missing.txt", tmpdir) < 0)
        abort();
    FILE *f = fopen(a, "wb");
    fputs("alpha\n", f);
    fclose(f);
    char *u = url("/multipart-echo");
    const char *paths[] = {a};
    json_t *extra = json_pack("{s:[{s:s, s:s, s:s}], s:{s:s}}", "files", "content", "inline", "filename",
                              "n.txt", "field", "note", "fields", "title", "Q3");
    struct call_log log = {pthread_self(), 0, 0, 0, 0, 0, NULL, NULL, 0};
    CHECK(fetchd_upload(c, u, paths, 1, extra, on_call_progress, &log, &r, &err) == FETCHD_OK && r.status == 200,
          "upload: %s", err.message);
    json_t *echo = json_loads((const char *)r.body, 0, NULL);
    json_t *parts = json_object_get(echo, "parts");
    CHECK(json_array_size(parts) == 3, "3 parts: %s", r.body);
    int saw_file = 0, saw_note = 0, saw_title = 0;
    size_t i;
    json_t *part;
    json_array_foreach(parts, i, part) {
        const char *name = json_string_value(json_object_get(part, "name"));
        const char *fn = json_string_value(json_object_get(part, "filename"));
        if (name && !strcmp(name, "file") && fn && !strcmp(fn, "up-a.txt"))
            saw_file = json_integer_value(json_object_get(part, "size")) == 6;
        if (name && !strcmp(name, "note") && fn && !strcmp(fn, "n.txt"))
            saw_note = 1;
        if (name && !strcmp(name, "title"))
            saw_title = 1;
    }
    CHECK(saw_file && saw_note && saw_title, "parts %d %d %d", saw_file, saw_note, saw_title);
    CHECK(log.count > 0, "upload progress events: %d", log.count);
    CHECK(json_is_array(json_object_get(r.result, "failedFiles")), "failedFiles");
    json_decref(echo);
    fetchd_response_free(&r);
    json_decref(extra);

    const char *two[] = {a, missing};
    CHECK(fetchd_upload(c, u, two, 2, NULL, NULL, NULL, &r, &err) == FETCHD_ERR_RPC
          && err.code == FETCHD_RPC_FILE_ERROR, "missing file: %d", err.code);
    const char *where = fetchd_error_data_string(&err, "path");
    CHECK(where && !strcmp(where, missing), "path %s", where ? where : "(null)");
    CHECK(r.result == NULL && r.body == NULL, "response untouched on error");
    CHECK(fetchd_upload(c, u, NULL, 1, NULL, NULL, NULL, &r, &err) == FETCHD_ERR_INVALID_ARGUMENT, "NULL paths");
    free(u);
    free(a);
    free(missing);
    fetchd_error_clear(&err);
}

static void test_stubs(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_response r = {0};
    char *id = NULL;
    json_t *stub = json_pack("{s:s, s:{s:s}, s:{s:i, s:{s:s}}}", "set", "c-stubs", "match", "url",
                             "https://api.example.com/c", "respond", "status", 201, "json", "who", "c");
    CHECK(fetchd_add_stub(c, stub, &id, &err) == FETCHD_OK && id && *id, "addStub: %s", err.message);
    json_decref(stub);
    json_t *params = json_pack("{s:s, s:s}", "url", "https://api.example.com/c", "stubs", "c-stubs");
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_OK && r.status == 201, "stubbed fetch: %s", err.message);
    CHECK(r.body && !strcmp((char *)r.body, "{\"who\":\"c\"}"), "stub body %s", r.body);
    fetchd_response_free(&r);
    json_t *got = NULL;
    CHECK(fetchd_get_stubs(c, "c-stubs", &got, &err) == FETCHD_OK, "getStubs: %s", err.message);
    json_t *first = json_array_get(json_object_get(got, "stubs"), 0);
    CHECK(first && json_integer_value(json_object_get(first, "hits")) == 1, "hits");
    CHECK(first && !strcmp(json_string_value(json_object_get(first, "stubId")), id), "stubId");
    json_decref(got);
    CHECK(fetchd_set_stub_mode(c, "c-stubs", "error", &err) == FETCHD_OK, "setStubMode: %s", err.message);
    json_decref(params);
    params = json_pack("{s:s, s:s}", "url", "https://api.example.com/other", "stubs", "c-stubs");
    CHECK(fetchd_fetch_ex(c, params, &r, &err) == FETCHD_ERR_RPC && err.code == FETCHD_RPC_TRANSPORT,
          "a miss fails");
    const char *kind = fetchd_error_data_string(&err, "kind");
    CHECK(kind && !strcmp(kind, "stubMiss"), "kind %s", kind ? kind : "(null)");
    json_decref(params);
    char *har = NULL;
    if (asprintf(&har, "%s/c-stubs.har", tmpdir) < 0)
        abort();
    CHECK(fetchd_record_stubs(c, "c-record", har, &err) == FETCHD_OK, "recordStubs: %s", err.message);
    int loaded = -1, removed = -1;
    CHECK(fetchd_load_stubs(c, "c-loaded", har, &loaded, &err) == FETCHD_OK && loaded == 0,
          "loadStubs: %d %s", loaded, err.message);
    CHECK(fetchd_load_stubs(c, "c-loaded", "/nonexistent/x.har", &loaded, &err) == FETCHD_ERR_RPC, "bad har");
    CHECK(fetchd_remove_stubs(c, "c-stubs", NULL, &removed, &err) == FETCHD_OK && removed == 1,
          "removeStubs: %d", removed);
    CHECK(fetchd_set_stub_mode(c, NULL, "error", &err) == FETCHD_ERR_INVALID_ARGUMENT, "NULL set");
    free(har);
    free(id);
    fetchd_error_clear(&err);
}

static void test_attach_progress(fetchd_client *c) {
    fetchd_error err = {0};
    fetchd_client *other = connect_or_die();
    char *u = url("/slow-body?chunks=8&ms=60");
    struct fetch_job job = {other, json_pack("{s:s, s:s}", "url", u, "jobId", "c-attach-p"), 0, {0}, {0}};
    pthread_t t;
    pthread_create(&t, NULL, run_fetch, &job);
    json_t *res = NULL;
    if (wait_for_job(c, "c-attach-p")) {
        struct call_log log = {pthread_self(), 0, 0, 0, 0, 0, "c-attach-p", NULL, 0};
        CHECK(fetchd_attach_progress(c, "c-attach-p", on_call_progress, &log, &res, &err) == FETCHD_OK,
              "attach_progress: %s", err.message);
        CHECK(json_integer_value(json_object_get(res, "status")) == 200, "attached result");
        CHECK(log.count > 0 && log.wrong_job == 0, "attach progress %d", log.count);
        json_decref(res);
    } else {
        CHECK(0, "the job never showed");
    }
    pthread_join(t, NULL);
    CHECK(job.status == FETCHD_OK && job.response.status == 200, "the job's own call: %d", job.status);
    fetchd_response_free(&job.response);
    fetchd_error_clear(&job.err);
    json_decref(job.params);
    fetchd_close(other);
    free(u);
    fetchd_error_clear(&err);
}

int main(int argc, char **argv) {
    if (argc >= 4 && argc <= 5 && !strcmp(argv[1], "--peer"))
        return test_peer(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    if (argc != 5) {
        fprintf(stderr, "usage: %s SOCKET TEST_SERVER_URL CLOSED_PORT TMPDIR\n", argv[0]);
        return 2;
    }
    sock = argv[1];
    base = argv[2];
    closed_port = atoi(argv[3]);
    tmpdir = argv[4];

    test_socket_path_and_connect_errors();
    fetchd_client *c = connect_or_die();
    test_basics(c);
    test_fetch(c);
    test_errors(c);
    test_progress(c);
    test_cancel_from_another_thread(c);
    test_concurrent_calls(c);
    test_timeout(c);
    test_download(c);
    test_auth(c);
    test_get_job_and_attach(c);
    test_progress_per_call(c);
    test_upload(c);
    test_stubs(c);
    test_attach_progress(c);
    fetchd_close(c);

    printf("c-client: %d checks, %d failed, %d skipped\n", checks, failures, skipped);
    return failures ? 1 : 0;
}
