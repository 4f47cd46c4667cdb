/* curl's command line for fetch, download and upload: combined short flags (-fsSL, -oFILE),
 * --name=value, -K config files, and each option's check. Only parsing here: what the
 * options mean for the request is request.c's, for the run transfer.c's. */
#define _GNU_SOURCE
#include "request.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How deep -K files may include each other. */
#define MAX_CONFIG_DEPTH 10
/* curl's cap on --parallel-max. */
#define PARALLEL_MAX_LIMIT 300
#define PARALLEL_MAX_DEFAULT 50

static const char *const CACHE_MODES[] = {
    "default", "no-store", "reload", "no-cache", "force-cache", "only-if-cached", NULL,
};

static void add(void ***list, size_t *n, void *value, size_t size) {
    *list = xrealloc(*list, (*n + 1) * size);
    memcpy((char *)*list + *n * size, &value, size);
    (*n)++;
}

static void add_item(request_opts *o, item_kind kind, const char *a, const char *b, const char *c, const char *d) {
    o->items = xrealloc(o->items, (o->n_items + 1) * sizeof *o->items);
    item *it = &o->items[o->n_items++];
    it->kind = kind;
    it->a = a ? xstrdup(a) : NULL;
    it->b = b ? xstrdup(b) : NULL;
    it->c = c ? xstrdup(c) : NULL;
    it->d = d ? xstrdup(d) : NULL;
}

static void add_url(request_opts *o, const char *url) {
    add((void ***)&o->urls, &o->n_urls, xstrdup(url), sizeof(char *));
}

static void add_out(request_opts *o, int kind, const char *path) {
    o->outs = xrealloc(o->outs, (o->n_outs + 1) * sizeof *o->outs);
    o->outs[o->n_outs].kind = kind;
    o->outs[o->n_outs].path = path ? xstrdup(path) : NULL;
    o->n_outs++;
}

static int has_space(const char *s) {
    for (; *s; s++)
        if (isspace((unsigned char)*s))
            return 1;
    return 0;
}

/* One -H value, as curl reads it: 'Name: value'; 'Name:' leaves out a header the daemon or
 * libcurl would send; 'Name;' sends it empty. */
static void header_item(request_opts *o, const char *val) {
    size_t n = strlen(val);
    if (!strchr(val, ':') && n && val[n - 1] == ';') {
        char *name = xstrndup(val, n - 1);
        if (!*name || has_space(name))
            usage_error("bad header name in '%s'", val);
        add_item(o, ITEM_HEADER, name, "", NULL, NULL);
        free(name);
        return;
    }
    const char *colon = strchr(val, ':');
    if (!colon)
        usage_error("bad header '%s' (expected 'Name: value')", val);
    char *name = xstrndup(val, (size_t)(colon - val));
    const char *value = colon + 1;
    while (isspace((unsigned char)*value))
        value++;
    if (!*name || has_space(name))
        usage_error("bad header name in '%s'", val);
    if (!*value)
        add_item(o, ITEM_REMOVE, name, NULL, NULL, NULL);
    else
        add_item(o, ITEM_HEADER, name, value, NULL, NULL);
    free(name);
}

static void header_file(request_opts *o, const char *path) {
    size_t len;
    char *text = readable_file(path) ? read_file(path, &len) : NULL;
    if (!text)
        usage_error("cannot read header file '%s'", path);
    char *cursor = text, *line;
    while ((line = next_line(&cursor, text + len)))
        if (*line)
            header_item(o, line);
    free(text);
}

static void check_body(request_opts *o, body_kind want, const char *kinds) {
    if (o->body != BODY_NONE && o->body != want)
        usage_error("use only one kind of body (%s)", kinds);
}

static char *need_number(const char *opt, const char *val) {
    if (!is_number(val))
        usage_error("%s: not a number of seconds: '%s'", opt, val);
    return xstrdup(val);
}

static char *need_count(const char *opt, const char *val) {
    if (!is_int(val))
        usage_error("%s: not a count: '%s'", opt, val);
    return xstrdup(val);
}

static void set_routing(request_opts *o, const char *key, json_t *value) {
    json_object_set_new(o->routing, key, value);
}

static const char BODY_KINDS[] = "-d, --data-binary @FILE, --json, -F";

static void data_option(request_opts *o, const char *opt, const char *val) {
    check_body(o, BODY_DATA, BODY_KINDS);
    if (!strcmp(opt, "--data-binary") && val[0] == '@') {
        if (o->body != BODY_NONE)
            usage_error("--data-binary @FILE cannot be combined with other data");
        if (!strcmp(val, "@-")) {
            o->body = BODY_STDIN;
        } else {
            o->body = BODY_FILE;
            o->body_file = abs_path(val + 1);
        }
        return;
    }
    o->body = BODY_DATA;
    if (val[0] == '@' && (!strcmp(opt, "-d") || !strcmp(opt, "--data") || !strcmp(opt, "--data-ascii"))) {
        const char *f = val + 1;
        size_t len = 0;
        char *content = (!strcmp(f, "-") || readable_file(f)) ? read_file(f, &len) : NULL;
        if (!content) {  /* as curl: a warning (unless -s), and the data is empty */
            char *w = xasprintf("Warning: Couldn't read data from file \"%s\", this makes an empty POST.", f);
            add((void ***)&o->data_warnings, &o->n_warnings, w, sizeof(char *));
            content = xstrdup("");
            len = 0;
        }
        /* curl drops carriage returns and newlines from -d @FILE (and stops at a NUL) */
        size_t j = 0;
        for (size_t i = 0; i < len && content[i]; i++)
            if (content[i] != '\r' && content[i] != '\n')
                content[j++] = content[i];
        content[j] = 0;
        add_item(o, ITEM_DATA, content, NULL, NULL, NULL);
        free(content);
    } else if (!strcmp(opt, "--data-urlencode")) {
        add_item(o, ITEM_URLENCODE, val, NULL, NULL, NULL);
    } else {
        add_item(o, ITEM_DATA, val, NULL, NULL, NULL);
    }
}

static void form_option(request_opts *o, const char *val) {
    check_body(o, BODY_FORM, BODY_KINDS);
    o->body = BODY_FORM;
    o->has_form = 1;
    const char *eq = strchr(val, '=');
    if (!eq)
        usage_error("bad form part '%s' (expected name=value or name=@file)", val);
    char *name = xstrndup(val, (size_t)(eq - val));
    const char *value = eq + 1;
    if (value[0] == '@') {
        const char *spec = value + 1;
        const char *semi = strchr(spec, ';');
        char *fpath = semi ? xstrndup(spec, (size_t)(semi - spec)) : xstrdup(spec);
        char *type = NULL, *fname = NULL;
        while (semi) {
            const char *part = semi + 1;
            semi = strchr(part, ';');
            char *p = semi ? xstrndup(part, (size_t)(semi - part)) : xstrdup(part);
            if (!strncmp(p, "type=", 5)) {
                free(type);
                type = xstrdup(p + 5);
            } else if (!strncmp(p, "filename=", 9)) {
                free(fname);
                fname = xstrdup(p + 9);
            } else if (*p) {
                usage_error("bad form part option '%s'", p);
            }
            free(p);
        }
        char *abs = abs_path(fpath);
        add_item(o, ITEM_FORM_FILE, name, abs, type, fname);
        free(abs);
        free(fpath);
        free(type);
        free(fname);
    } else if (value[0] == '<') {
        size_t len;
        char *content = readable_file(value + 1) ? read_file(value + 1, &len) : NULL;
        if (!content)
            usage_error("cannot read form file '%s'", value + 1);
        add_item(o, ITEM_FORM_FIELD, name, content, NULL, NULL);
        free(content);
    } else {
        add_item(o, ITEM_FORM_FIELD, name, value, NULL, NULL);
    }
    free(name);
}

/* Handles one option that takes a value; returns 0 when opt is not one of them. */
static int value_option(request_opts *o, words *w, int *config_depth, const char *opt, const char *val) {
    if (!strcmp(opt, "-X") || !strcmp(opt, "--request")) {
        free(o->method);
        o->method = xstrdup(val);
    } else if (!strcmp(opt, "-H") || !strcmp(opt, "--header")) {
        if (val[0] == '@')
            header_file(o, val + 1);
        else
            header_item(o, val);
    } else if (!strcmp(opt, "-e") || !strcmp(opt, "--referer")) {
        add_item(o, ITEM_HEADER, "Referer", val, NULL, NULL);
    } else if (!strcmp(opt, "-A") || !strcmp(opt, "--user-agent")) {
        add_item(o, ITEM_HEADER, "User-Agent", val, NULL, NULL);
    } else if (!strcmp(opt, "--cacert") || !strcmp(opt, "--cert") || !strcmp(opt, "--key") ||
               !strcmp(opt, "--unix-socket")) {
        const char *key = !strcmp(opt, "--cacert") ? "caFile" : !strcmp(opt, "--cert") ? "certFile"
                        : !strcmp(opt, "--key") ? "keyFile" : "unixSocket";
        char *abs = abs_path(val);
        set_routing(o, key, json_string(abs));
        free(abs);
    } else if (!strcmp(opt, "--limit-rate")) {
        /* curl's RATE: bytes per second, with a K, M or G suffix (powers of 1024) */
        size_t n = strlen(val);
        char suffix = n ? val[n - 1] : 0;
        int shift = 0;
        if (strchr("kK", suffix) && suffix) shift = 10;
        else if (strchr("mM", suffix) && suffix) shift = 20;
        else if (strchr("gG", suffix) && suffix) shift = 30;
        char *digits = xstrndup(val, shift ? n - 1 : n);
        if (!is_int(digits) || strlen(digits) > 12)
            usage_error("--limit-rate: expected a rate such as 100K, got '%s'", val);
        long long rate = atoll(digits) << shift;
        free(digits);
        set_routing(o, "maxRecvBytesPerSecond", json_integer(rate));
        set_routing(o, "maxSendBytesPerSecond", json_integer(rate));
    } else if (!strcmp(opt, "-x") || !strcmp(opt, "--proxy")) {
        /* curl takes a bare host:port as an http:// proxy */
        char *p = strstr(val, "://") ? xstrdup(val) : xasprintf("http://%s", val);
        set_routing(o, "proxy", json_string(p));
        free(p);
    } else if (!strcmp(opt, "--noproxy")) {
        set_routing(o, "noProxy", json_string(val));
    } else if (!strcmp(opt, "-r") || !strcmp(opt, "--range")) {
        set_routing(o, "range", json_string(val));
    } else if (!strcmp(opt, "--resolve")) {
        /* curl's HOST:PORT:ADDRESS (an IPv6 address may be bracketed) */
        const char *c1 = strchr(val, ':');
        const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        char *port = c2 ? xstrndup(c1 + 1, (size_t)(c2 - c1 - 1)) : NULL;
        if (!c1 || c1 == val || !c2 || !port || !is_int(port) || !c2[1])
            usage_error("--resolve: expected HOST:PORT:ADDRESS, got '%s'", val);
        free(port);
        char *key = xstrndup(val, (size_t)(c2 - val));
        add_item(o, ITEM_RESOLVE, key, c2 + 1, NULL, NULL);
        free(key);
    } else if (!strcmp(opt, "-w") || !strcmp(opt, "--write-out")) {
        free(o->write_out);
        if (val[0] == '@') {
            size_t len;
            o->write_out = readable_file(val + 1) || !strcmp(val + 1, "-") ? read_file(val + 1, &len) : NULL;
            if (!o->write_out)
                usage_error("cannot read -w file '%s'", val + 1);
        } else {
            o->write_out = xstrdup(val);
        }
    } else if (!strcmp(opt, "-d") || !strcmp(opt, "--data") || !strcmp(opt, "--data-ascii") ||
               !strcmp(opt, "--data-raw") || !strcmp(opt, "--data-binary") || !strcmp(opt, "--data-urlencode")) {
        data_option(o, opt, val);
    } else if (!strcmp(opt, "--json")) {
        check_body(o, BODY_JSON, BODY_KINDS);
        o->body = BODY_JSON;
        if (val[0] == '@') {
            size_t len;
            char *content = (!strcmp(val + 1, "-") || readable_file(val + 1)) ? read_file(val + 1, &len) : NULL;
            if (!content)
                usage_error("cannot read JSON file '%s'", val + 1);
            buf_add(&o->json_text, content, len);
            free(content);
        } else {
            buf_adds(&o->json_text, val);
        }
    } else if (!strcmp(opt, "-F") || !strcmp(opt, "--form")) {
        form_option(o, val);
    } else if (!strcmp(opt, "--query")) {
        const char *eq = strchr(val, '=');
        if (!eq)
            usage_error("bad --query '%s' (expected NAME=VALUE)", val);
        char *name = xstrndup(val, (size_t)(eq - val));
        add_item(o, ITEM_QUERY, name, eq + 1, NULL, NULL);
        free(name);
    } else if (!strcmp(opt, "-o") || !strcmp(opt, "--output")) {
        add_out(o, OUT_FILE, val);
    } else if (!strcmp(opt, "-D") || !strcmp(opt, "--dump-header")) {
        free(o->dump_header);
        o->dump_header = xstrdup(val);
    } else if (!strcmp(opt, "--retry-delay")) {
        o->retry_delay = need_number(opt, val);
    } else if (!strcmp(opt, "--retry-max-time")) {
        o->retry_max_time = need_number(opt, val);
    } else if (!strcmp(opt, "--url")) {
        add_url(o, val);
    } else if (!strcmp(opt, "-K") || !strcmp(opt, "--config")) {
        if (++*config_depth > MAX_CONFIG_DEPTH)
            usage_error("-K: config files nested too deep");
        read_config(w, val, o->silent, o->show_error);
    } else if (!strcmp(opt, "-T") || !strcmp(opt, "--upload-file")) {
        if (o->body != BODY_NONE)
            usage_error("use only one kind of body (%s, -T)", BODY_KINDS);
        if (!strcmp(val, "-")) {
            o->body = BODY_TSTDIN;
        } else {
            if (!readable_file(val))
                o->upload_unreadable = xstrdup(val);
            o->body = BODY_TFILE;
            o->body_file = abs_path(val);
            const char *slash = strrchr(val, '/');
            o->upload_name = xstrdup(slash ? slash + 1 : val);
        }
    } else if (!strcmp(opt, "-u") || !strcmp(opt, "--user")) {
        free(o->user);
        o->user = xstrdup(val);
    } else if (!strcmp(opt, "--timeout")) {
        o->timeout = need_number(opt, val);
    } else if (!strcmp(opt, "-m") || !strcmp(opt, "--max-time")) {
        o->max_time = need_number(opt, val);
    } else if (!strcmp(opt, "--connect-timeout")) {
        o->connect_timeout = need_number(opt, val);
    } else if (!strcmp(opt, "--max-redirects") || !strcmp(opt, "--max-redirs")) {
        o->max_redirects = need_count(opt, val);
    } else if (!strcmp(opt, "--retry")) {
        o->retry = need_count(opt, val);
    } else if (!strcmp(opt, "--priority")) {
        if (!is_signed_int(val))
            usage_error("%s: not an integer: '%s'", opt, val);
        o->priority = xstrdup(val);
    } else if (!strcmp(opt, "--max-body-bytes")) {
        if (!is_int(val))
            usage_error("%s: not a byte count: '%s'", opt, val);
        o->max_body = xstrdup(val);
    } else if (!strcmp(opt, "--comment")) {
        o->comment = xstrdup(val);
    } else if (!strcmp(opt, "--stubs")) {
        if (!*val)
            usage_error("--stubs needs a set name");
        o->stubs = xstrdup(val);
    } else if (!strcmp(opt, "--job-id")) {
        if (!*val)
            usage_error("--job-id needs a non-empty id");
        o->job_id = xstrdup(val);
    } else if (!strcmp(opt, "--jar")) {
        o->jar = xstrdup(val);
    } else if (!strcmp(opt, "-c") || !strcmp(opt, "--cookie-jar")) {
        o->cookie_out = abs_path(val);
    } else if (!strcmp(opt, "-b") || !strcmp(opt, "--cookie")) {
        /* as curl: with a '=' it is the Cookie header's data, else a Netscape file */
        if (strchr(val, '='))
            add_item(o, ITEM_HEADER, "Cookie", val, NULL, NULL);
        else
            o->cookie_in = abs_path(val);
    } else if (!strcmp(opt, "-C") || !strcmp(opt, "--continue-at")) {
        /* curl's "-C -": continue where the file left off (an offset is not supported). */
        if (strcmp(val, "-"))
            usage_error("%s: only '-C -' is supported (continue where the file left off)", opt);
        if (!strcmp(o->command, "upload"))
            usage_error("%s: only for fetch and download", opt);
        o->continue_at = 1;
        o->no_resume = 0;
    } else if (!strcmp(opt, "--sha256")) {
        o->sha256 = xstrdup(val);
    } else if (!strcmp(opt, "--socket")) {
        o->socket = xstrdup(val);
    } else if (!strcmp(opt, "--parallel-max")) {
        if (!is_int(val) || strlen(val) > 6)
            usage_error("%s: not a count: '%s'", opt, val);
        o->parallel_max = atol(val);
        if (o->parallel_max < 1)
            o->parallel_max = 1;
        if (o->parallel_max > PARALLEL_MAX_LIMIT)
            o->parallel_max = PARALLEL_MAX_LIMIT;
    } else if (!strcmp(opt, "--output-dir")) {
        o->output_dir = xstrdup(val);
    } else if (!strcmp(opt, "--cache")) {
        const char *const *m = CACHE_MODES;
        while (*m && strcmp(*m, val))
            m++;
        if (!*m)
            usage_error("--cache: expected default, no-store, reload, no-cache, force-cache or only-if-cached, got '%s'",
                        val);
        o->cache = xstrdup(val);
    } else {
        return 0;
    }
    return 1;
}

/* Handles one option without a value; returns 0 when opt is not one of them. */
static int flag_option(request_opts *o, const char *opt) {
#define IS(a) (!strcmp(opt, a))
    if (IS("-k") || IS("--insecure")) set_routing(o, "insecure", json_true());
    else if (IS("--http1.1")) set_routing(o, "httpVersion", json_string("1.1"));
    else if (IS("--http2")) set_routing(o, "httpVersion", json_string("2"));
    else if (IS("-G") || IS("--get")) o->get = 1;
    else if (IS("-O") || IS("--remote-name")) add_out(o, OUT_REMOTE_NAME, NULL);
    else if (IS("--create-dirs")) o->create_dirs = 1;
    else if (IS("-i") || IS("--include")) o->include = 1;
    else if (IS("-I") || IS("--head")) o->head = 1;
    else if (IS("-v") || IS("--verbose")) o->verbose = 1;
    else if (IS("--fail-with-body")) o->fail = 2;
    else if (IS("-f") || IS("--fail")) o->fail = 1;
    else if (IS("--retry-all-errors")) o->retry_all = 1;
    else if (IS("--json-result")) o->json_result = 1;
    else if (IS("--progress") || IS("--progress-bar") || IS("-#")) o->progress = 1;
    else if (IS("--no-cookies")) o->no_cookies = 1;
    else if (IS("--overwrite")) o->overwrite = 1;
    else if (IS("--no-resume")) o->no_resume = 1;
    else if (IS("-s") || IS("--silent")) o->silent = 1;
    else if (IS("-S") || IS("--show-error")) o->show_error = 1;
    else if (IS("-L") || IS("--location")) o->location = 1;
    else if (IS("--compressed")) ;
    else if (IS("-N") || IS("--no-buffer")) ;  /* a streamed body is never held back */
    else if (IS("-Z") || IS("--parallel")) o->parallel = 1;
    else if (IS("--remove-on-error")) o->remove_on_error = 1;
    else return 0;
    return 1;
#undef IS
}

void parse_request_args(request_opts *o, const char *command, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->command = command;
    o->routing = json_object();
    o->parallel_max = PARALLEL_MAX_DEFAULT;
    words w = {0};
    for (int i = 0; i < argc; i++)
        words_insert(&w, w.n, xstrdup(argv[i]));
    int config_depth = 0;
    while (w.at < w.n) {
        char *opt = w.v[w.at++];
        const char *val = NULL;
        if (!strncmp(opt, "--", 2) && strchr(opt, '=')) {
            char *eq = strchr(opt, '=');
            words_insert(&w, w.at, xstrdup(eq + 1));
            *eq = 0;
        } else if (opt[0] == '-' && opt[1] && opt[1] != '-' && opt[2]) {
            /* combined short flags as curl takes them (-fsSL, -sSo FILE, -oFILE): a flag
             * that takes a value takes the rest of the word, else the rest is more flags */
            if (strchr(SHORT_WITH_VALUE, opt[1]))
                words_insert(&w, w.at, xstrdup(opt + 2));
            else
                words_insert(&w, w.at, xasprintf("-%s", opt + 2));
            opt[2] = 0;
        }
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            print_usage(stdout);
            exit(EXIT_OK);
        }
        if (takes_value(opt)) {
            if (w.at >= w.n)
                usage_error("option %s needs a value", opt);
            val = w.v[w.at++];
            value_option(o, &w, &config_depth, opt, val);
            continue;
        }
        if (flag_option(o, opt))
            continue;
        if (!strcmp(opt, "--")) {
            while (w.at < w.n)
                add_url(o, w.v[w.at++]);
            break;
        }
        if (opt[0] == '-' && opt[1])
            usage_error("unknown option '%s' for %s", opt, command);
        add_url(o, opt);
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.v[i]);
    free(w.v);
    /* -T - and --data-binary @- of one fetch: stdin goes to the daemon (bodyFrom) and streams;
     * with several URLs each one sends what was read here */
    o->stdin_streams = (o->body == BODY_STDIN || o->body == BODY_TSTDIN) && !strcmp(command, "fetch") &&
                       o->n_urls == 1;
    if ((o->body == BODY_STDIN || o->body == BODY_TSTDIN) && !o->stdin_streams) {
        char *data = read_file("-", &o->stdin_len);
        o->stdin_data = (unsigned char *)(data ? data : xstrdup(""));
        if (!data)
            o->stdin_len = 0;
    }
}
