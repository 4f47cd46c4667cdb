/* The daemon's own commands: status, jobs, ping, cancel, call, logging, limit(s), auth,
 * cookies, stub, cache, metrics, attach, wait. Each is one call whose answer is printed as
 * a short text (format.c) or, with --json, as JSON. */
#define _GNU_SOURCE
#include "request.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --------------------------------------------------------------- calls */

void simple_call(const char *socket_opt, print_mode mode, const char *method, json_t *params, const char *name) {
    interrupt_exit_130();
    session s = {0};
    session_open(&s, socket_opt);
    json_t *result = NULL;
    fetchd_error err = {0};
    int64_t t0 = now_us();
    fetchd_status st = fetchd_call(s.client, method, params, &result, &err);
    json_decref(params);
    if (st == FETCHD_ERR_RPC) {
        if (err.code == FETCHD_RPC_CANCELLED) {
            const char *by = fetchd_error_data_string(&err, "by");
            say("cancelled%s%s", by ? " by " : "", by ? by : "");
            exit(EXIT_CANCELLED);
        }
        buf m = {0};
        rpc_error_text(&m, &err, now_us() - t0);
        say("%s", m.data);
        exit(EXIT_RPC);
    }
    if (st != FETCHD_OK)
        exit(connection_failure(&s, &err));
    buf out = {0};
    format_simple(&out, mode, result, s.sock, name);
    int rc = write_all(1, out.data, out.len) == 0 ? EXIT_OK : 23;
    if (mode == MODE_CANCEL && !json_is_true(json_object_get(result, "cancelled")))
        rc = 1;
    exit(rc);
}

static json_t *string_params(const char *key, const char *value) {
    return value && *value ? json_pack("{s:s}", key, value) : json_object();
}

/* ------------------------------------------------------- attach / wait */

/* attach and wait exit as `fetchctl fetch` would have for the job's answer: curl's code for a
 * transfer failure, 5 cancelled, 22 with -f and a status >= 400. Ctrl-C stops waiting; it
 * never cancels the job. */
static int attach_one(session *s, const char *id, int fail, int progress, print_mode mode, json_t **result_out) {
    static const char *none[] = {NULL};
    request_opts o = {.command = "fetch", .fail = fail, .progress = progress, .urls = (char **)none};
    transfer t = {.o = &o, .url = "", .job_id = "", .mode = mode, .rpc_method = "attach"};
    t.t_sent = t.progress_t0 = now_us();
    json_t *result = NULL;
    fetchd_error err = {0};
    fetchd_status st = fetchd_attach_progress(s->client, id, progress ? on_progress : NULL, &t, &result, &err);
    int rc = handle_answer(s, &t, st, result, &err, NULL);
    if (result_out)
        *result_out = result;
    else
        json_decref(result);
    fetchd_error_clear(&err);
    return rc;
}

static int cmd_attach(int argc, char **argv, const char *socket_opt) {
    int fail = 0, progress = 0;
    const char *id = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-f") || !strcmp(a, "--fail")) fail = 1;
        else if (!strcmp(a, "--progress") || !strcmp(a, "-#") || !strcmp(a, "--progress-bar")) progress = 1;
        else if (a[0] == '-') usage_error("unknown option '%s' for attach", a);
        else if (id) usage_error("usage: fetchctl attach [-f] [--progress] JOBID");
        else id = a;
    }
    if (!id)
        usage_error("usage: fetchctl attach [-f] [--progress] JOBID");
    interrupt_exit_130();
    session s = {0};
    session_open(&s, socket_opt);
    return attach_one(&s, id, fail, progress, MODE_JSON, NULL);
}

static int cmd_wait(int argc, char **argv, const char *socket_opt) {
    int fail = 0;
    char **ids = xcalloc((size_t)argc + 1, sizeof *ids);
    size_t n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--fail")) fail = 1;
        else if (argv[i][0] == '-') usage_error("unknown option '%s' for wait", argv[i]);
        else ids[n++] = argv[i];
    }
    if (!n)
        usage_error("usage: fetchctl wait [-f] JOBID...");
    interrupt_exit_130();
    session s = {0};
    session_open(&s, socket_opt);
    int first = 0;
    /* one after the other: a job that ended meanwhile is answered at once (the last 1,000) */
    for (size_t i = 0; i < n; i++) {
        json_t *result = NULL;
        int rc = attach_one(&s, ids[i], fail, 0, MODE_NONE, &result);
        if (rc == 0) {
            buf line = {0};
            buf_addf(&line, "%s: ", ids[i]);
            if (json_is_object(result) && json_object_get(result, "status")) {
                buf_adds(&line, "HTTP ");
                json_text(&line, json_object_get(result, "status"));
            } else {
                buf_adds(&line, "done");
            }
            buf_addc(&line, '\n');
            (void)!write_all(1, line.data, line.len);
            buf_free(&line);
        } else {
            say("%s: exit status %d", ids[i], rc);
            if (!first)
                first = rc;
        }
        json_decref(result);
    }
    free(ids);
    return first;
}

/* ------------------------------------------------------------ commands */

/* What every simple command was given besides its own arguments. */
typedef struct ctx {
    const char *socket;
    int json;
} ctx;

static _Noreturn void call(const ctx *c, print_mode mode, const char *method, json_t *params, const char *name) {
    simple_call(c->socket, mode, method, params, name);
}

static int cmd_limit(const ctx *c, int argc, char **argv) {
    int json = c->json;
    const char *host = NULL, *rps = NULL, *burst = NULL, *conc = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--rps") || !strcmp(a, "--requests-per-second") || !strcmp(a, "--burst") ||
            !strcmp(a, "--concurrent") || !strcmp(a, "--max-concurrent")) {
            if (i + 1 >= argc)
                usage_error("%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--burst")) burst = v;
            else if (!strcmp(a, "--rps") || !strcmp(a, "--requests-per-second")) rps = v;
            else conc = v;
        } else if (a[0] == '-') {
            usage_error("unknown option '%s' for limit", a);
        } else {
            if (host)
                usage_error("limit takes one HOST");
            host = a;
        }
    }
    if (!host)
        usage_error("usage: fetchctl limit HOST [--rps N|none] [--burst N] [--concurrent N|none]");
    if (rps && strcmp(rps, "none") && !is_number(rps))
        usage_error("--rps: not a number: '%s'", rps);
    if (burst && !is_int(burst))
        usage_error("--burst: not a count: '%s'", burst);
    if (conc && strcmp(conc, "none") && !is_int(conc))
        usage_error("--concurrent: not a count: '%s'", conc);
    json_t *p = json_pack("{s:s}", "host", host);
    if (rps)
        json_object_set_new(p, "requestsPerSecond", !strcmp(rps, "none") ? json_null()
                            : is_int(rps) ? json_integer(atoll(rps)) : json_real(strtod(rps, NULL)));
    if (burst)
        json_object_set_new(p, "burst", json_integer(atoll(burst)));
    if (conc)
        json_object_set_new(p, "maxConcurrent", !strcmp(conc, "none") ? json_null() : json_integer(atoll(conc)));
    call(c, json ? MODE_JSON : MODE_LIMIT, "setRateLimit", p, NULL);
}

static char *find_in_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path)
        return NULL;
    char *copy = xstrdup(path), *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char *full = xasprintf("%s/%s", *dir ? dir : ".", name);
        if (access(full, X_OK) == 0) {
            free(copy);
            return full;
        }
        free(full);
    }
    free(copy);
    return NULL;
}

static int cmd_auth(const ctx *c, int argc, char **argv) {
    int json = c->json;
    if (argc == 0)
        call(c, json ? MODE_JSON : MODE_AUTHS, "getAuth", NULL, NULL);
    const char *host = argv[0];
    const char *use = "usage: fetchctl auth HOST --bearer-file F | --basic USER:PASSFILE | --helper CMD... | "
                      "--oauth2 URL ... | --aws-sigv4 PROVIDER ... | --remove";
    if (!*host || host[0] == '-')
        usage_error("%s", use);
    json_t *rule = NULL, *extra = json_object();
    const char *kind = NULL;
#define ONCE(k) do { if (kind) usage_error("auth takes one of --bearer-file, --basic, --helper, --oauth2, --aws-sigv4, --remove"); kind = k; } while (0)
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--bearer-file")) {
            if (!has_value) usage_error("%s needs a file", a);
            ONCE("bearer");
            char *f = abs_path(argv[++i]);
            rule = json_pack("{s:s,s:s}", "type", "bearer", "tokenFile", f);
            free(f);
        } else if (!strcmp(a, "--basic")) {
            if (!has_value) usage_error("%s needs USER:PASSFILE", a);
            ONCE("basic");
            const char *v = argv[++i], *colon = strchr(v, ':');
            if (!colon || !colon[1])
                usage_error("--basic takes USER:PASSFILE (the password is read from the file)");
            char *user = xstrndup(v, (size_t)(colon - v)), *f = abs_path(colon + 1);
            rule = json_pack("{s:s,s:s,s:s}", "type", "basic", "user", user, "passwordFile", f);
            free(user);
            free(f);
        } else if (!strcmp(a, "--helper")) {
            if (!has_value) usage_error("%s needs a command", a);
            ONCE("helper");
            const char *exe = argv[++i];
            char *full = exe[0] == '/' ? xstrdup(exe) : strchr(exe, '/') ? abs_path(exe) : find_in_path(exe);
            if (!full)
                usage_error("helper command not found: %s", exe);
            /* each word as it is, whatever it looks like: the rest of the line */
            json_t *command = json_array();
            json_array_append_new(command, json_string(full));
            free(full);
            for (i++; i < argc; i++)
                json_array_append_new(command, json_string(argv[i]));
            rule = json_pack("{s:s,s:o}", "type", "helper", "command", command);
        } else if (!strcmp(a, "--oauth2")) {
            if (!has_value) usage_error("%s needs the token URL", a);
            ONCE("oauth2");
            rule = json_pack("{s:s,s:s}", "type", "oauth2", "tokenUrl", argv[++i]);
        } else if (!strcmp(a, "--aws-sigv4")) {
            if (!has_value) usage_error("%s needs a provider (aws:amz:REGION:SERVICE)", a);
            ONCE("awsSigV4");
            rule = json_pack("{s:s,s:s}", "type", "awsSigV4", "provider", argv[++i]);
        } else if (!strcmp(a, "--remove")) {
            ONCE("remove");
            rule = json_pack("{s:n}", "type");
        } else if (!strcmp(a, "--client-id") || !strcmp(a, "--scope") || !strcmp(a, "--audience") ||
                   !strcmp(a, "--profile") || !strcmp(a, "--timeout")) {
            if (!has_value) usage_error("%s needs a value", a);
            const char *v = argv[++i];
            const char *field = !strcmp(a, "--client-id") ? "clientId" : !strcmp(a, "--scope") ? "scope"
                              : !strcmp(a, "--audience") ? "audience" : !strcmp(a, "--profile") ? "profile" : "timeout";
            if (!strcmp(field, "timeout")) {
                if (!is_number(v))
                    usage_error("--timeout: not a number: '%s'", v);
                json_object_set_new(extra, "timeout", is_int(v) ? json_integer(atoll(v)) : json_real(strtod(v, NULL)));
            } else {
                json_object_set_new(extra, field, json_string(v));
            }
        } else if (!strcmp(a, "--client-secret-file") || !strcmp(a, "--credentials-file")) {
            if (!has_value) usage_error("%s needs a file", a);
            char *f = abs_path(argv[++i]);
            json_object_set_new(extra, !strcmp(a, "--credentials-file") ? "credentialsFile" : "clientSecretFile",
                                json_string(f));
            free(f);
        } else {
            usage_error("unknown option '%s' for auth", a);
        }
    }
#undef ONCE
    if (!kind)
        usage_error("auth HOST needs one of --bearer-file, --basic, --helper, --oauth2, --aws-sigv4, --remove");
    json_t *p = json_pack("{s:s}", "host", host);
    json_object_update(p, rule);
    json_object_update(p, extra);
    json_decref(rule);
    json_decref(extra);
    call(c, json ? MODE_JSON : MODE_AUTH, "setAuth", p, NULL);
}

static int cmd_cookies(const ctx *c, int argc, char **argv) {
    const char *jar = NULL, *target = NULL;
    int clear = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--jar") || !strcmp(a, "--cookie-jar")) {
            if (i + 1 >= argc)
                usage_error("%s needs a value", a);
            jar = argv[++i];
        } else if (!strcmp(a, "clear")) {
            if (clear || target)
                usage_error("usage: fetchctl cookies clear [DOMAIN]");
            clear = 1;
        } else if (a[0] == '-') {
            usage_error("unknown option '%s' for cookies", a);
        } else {
            if (target)
                usage_error("cookies takes one URL or DOMAIN");
            target = a;
        }
    }
    json_t *p = json_object();
    if (jar && *jar)
        json_object_set_new(p, "cookieJar", json_string(jar));
    if (target && *target) {
        int is_url = 0;
        const char *c = target;
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z')) {
            while (*c && (strchr("+.-", *c) || (*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z')))
                c++;
            is_url = !strncmp(c, "://", 3);
        }
        json_object_set_new(p, !clear && is_url ? "url" : "domain", json_string(target));
    }
    call(c, MODE_JSON, clear ? "clearCookies" : "getCookies", p, NULL);
}

static int cmd_stub(const ctx *c, int argc, char **argv) {
    const char *sub = argc ? argv[0] : "";
    const char *set = NULL;
    char **rest = xcalloc((size_t)argc + 1, sizeof *rest);
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set")) {
            if (i + 1 >= argc)
                usage_error("--set needs a value");
            set = argv[++i];
        } else {
            rest[n++] = argv[i];
        }
    }
    json_t *p = string_params("set", set);
    if (!strcmp(sub, "add")) {
        if (n != 1)
            usage_error("usage: fetchctl stub add [--set SET] JSON");
        json_t *stub = json_loads(rest[0], JSON_DECODE_ANY, NULL);
        if (!json_is_object(stub))
            usage_error("stub add: not a JSON object: %s", rest[0]);
        json_object_update(stub, p);
        json_decref(p);
        call(c, MODE_JSON, "addStub", stub, NULL);
    } else if (!strcmp(sub, "list")) {
        if (n != 0)
            usage_error("usage: fetchctl stub list [--set SET]");
        call(c, MODE_JSON, "getStubs", p, NULL);
    } else if (!strcmp(sub, "remove")) {
        if (n > 1)
            usage_error("usage: fetchctl stub remove [--set SET] [STUBID]");
        if (n == 1 && *rest[0])
            json_object_set_new(p, "stubId", json_string(rest[0]));
        call(c, MODE_JSON, "removeStubs", p, NULL);
    } else if (!strcmp(sub, "load") || !strcmp(sub, "record")) {
        if (n != 1 || !set || !*set)
            usage_error("usage: fetchctl stub %s --set SET FILE.har", sub);
        char *har = abs_path(rest[0]);
        json_object_set_new(p, "har", json_string(har));
        free(har);
        call(c, MODE_JSON, !strcmp(sub, "record") ? "recordStubs" : "loadStubs", p, NULL);
    }
    usage_error("usage: fetchctl stub add|list|remove|load|record ...");
}

static int cmd_cache(const ctx *c, int argc, char **argv) {
    const char *use = "usage: fetchctl cache [stats | purge [URL | --prefix PREFIX]]";
    const char *sub = argc ? argv[0] : "stats";
    if (!strcmp(sub, "stats")) {
        if (argc > 1)
            usage_error("%s", use);
        call(c, MODE_JSON, "getCacheStats", NULL, NULL);
    }
    if (!strcmp(sub, "purge")) {
        if (argc == 1)
            call(c, MODE_JSON, "purgeCache", NULL, NULL);
        if (argc == 2 && strcmp(argv[1], "--prefix"))
            call(c, MODE_JSON, "purgeCache", json_pack("{s:s}", "url", argv[1]), NULL);
        if (argc == 3 && !strcmp(argv[1], "--prefix"))
            call(c, MODE_JSON, "purgeCache", json_pack("{s:s}", "urlPrefix", argv[2]), NULL);
    }
    usage_error("%s", use);
}

static int cmd_logging(const ctx *c, int argc, char **argv) {
    print_mode mode = c->json ? MODE_JSON : MODE_LOGGING;
    const char *use = "usage: fetchctl logging on [DIR] | off";
    if (argc == 0)
        call(c, mode, "getLogging", NULL, NULL);
    if (!strcmp(argv[0], "on")) {
        if (argc > 2)
            usage_error("%s", use);
        json_t *p = json_pack("{s:b}", "enabled", 1);
        if (argc == 2 && *argv[1]) {
            char *dir = abs_path(argv[1]);
            json_object_set_new(p, "directory", json_string(dir));
            free(dir);
        }
        call(c, mode, "setLogging", p, NULL);
    }
    if (!strcmp(argv[0], "off")) {
        if (argc != 1)
            usage_error("%s", use);
        call(c, mode, "setLogging", json_pack("{s:b}", "enabled", 0), NULL);
    }
    usage_error("%s", use);
}

static int cmd_metrics(const ctx *c, int argc, char **argv) {
    int json = c->json;
    (void)argv;
    if (argc)
        usage_error("usage: fetchctl metrics [--json]");
    call(c, json ? MODE_JSON : MODE_TEXT, "getMetrics", json_pack("{s:s}", "format", json ? "json" : "prometheus"), NULL);
}

int cmd_simple(const char *command, const char *socket_opt, int argc, char **argv) {
    /* these commands take --json and --socket anywhere */
    ctx context = {.socket = socket_opt}, *c = &context;
    char **args = xcalloc((size_t)argc + 1, sizeof *args);
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            context.json = 1;
        else if (!strncmp(argv[i], "--socket=", 9))
            context.socket = argv[i] + 9;
        else if (!strcmp(argv[i], "--socket")) {
            if (i + 1 >= argc)
                usage_error("option --socket needs a value");
            context.socket = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_usage(stdout);
            exit(EXIT_OK);
        } else if (!strcmp(argv[i], "--helper") && !strcmp(command, "auth")) {
            /* the helper's own words, passed on as they are */
            while (i < argc)
                args[n++] = argv[i++];
        } else {
            args[n++] = argv[i];
        }
    }
    if (!strcmp(command, "ping") || !strcmp(command, "status") || !strcmp(command, "jobs") ||
        !strcmp(command, "limits")) {
        if (n)
            usage_error("%s takes no arguments", command);
        int json = c->json;
        if (!strcmp(command, "ping")) call(c, json ? MODE_JSON : MODE_PING, "ping", NULL, NULL);
        if (!strcmp(command, "status")) call(c, json ? MODE_JSON : MODE_STATUS, "getStatus", NULL, NULL);
        if (!strcmp(command, "jobs")) call(c, json ? MODE_JSON : MODE_JOBS, "listJobs", NULL, NULL);
        call(c, json ? MODE_JSON : MODE_LIMITS, "getRateLimits", NULL, NULL);
    }
    if (!strcmp(command, "cancel")) {
        if (n != 1 || !*args[0])
            usage_error("usage: fetchctl cancel JOBID");
        call(c, c->json ? MODE_JSON : MODE_CANCEL, "cancel", json_pack("{s:s}", "jobId", args[0]), args[0]);
    }
    if (!strcmp(command, "attach")) return cmd_attach(n, args, c->socket);
    if (!strcmp(command, "wait")) return cmd_wait(n, args, c->socket);
    if (!strcmp(command, "call")) {
        if (n < 1 || n > 2)
            usage_error("usage: fetchctl call METHOD [PARAMS-JSON]");
        json_t *params = NULL;
        if (n == 2) {
            json_error_t jerr;
            params = json_loads(args[1], JSON_DECODE_ANY, &jerr);
            if (!params)
                usage_error("PARAMS-JSON is not valid JSON: %s", jerr.text);
        }
        call(c, MODE_JSON, args[0], params, NULL);
    }
    if (!strcmp(command, "logging")) return cmd_logging(c, n, args);
    if (!strcmp(command, "limit")) return cmd_limit(c, n, args);
    if (!strcmp(command, "auth")) return cmd_auth(c, n, args);
    if (!strcmp(command, "cookies")) return cmd_cookies(c, n, args);
    if (!strcmp(command, "stub")) return cmd_stub(c, n, args);
    if (!strcmp(command, "cache")) return cmd_cache(c, n, args);
    if (!strcmp(command, "metrics")) return cmd_metrics(c, n, args);
    usage_error("unknown command '%s'", command);
}
