/* Running fetch / download / upload: the checks that need the whole command line, each URL
 * (one after the other as curl does, or -Z in parallel), where each body goes, cookie files,
 * and what is left on disk afterwards. */
#define _GNU_SOURCE
#include "request.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p for -o FILE's directory (--create-dirs). */
static int make_dirs(const char *dir) {
    char *p = xstrdup(dir);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *c = '/';
    }
    int rc = mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
    free(p);
    return rc;
}

/* -O: the last segment of the URL's path ("" when it has none). */
static char *remote_name(const char *url) {
    size_t n = strcspn(url, "?#");
    char *name = xstrndup(url, n);
    char *rest = strstr(name, "://");
    rest = rest ? rest + 3 : name;
    char *slash = strrchr(rest, '/');
    char *out = xstrdup(slash ? slash + 1 : "");
    free(name);
    return out;
}

static void say_failure(const request_opts *o, const char *msg) {
    if (!o->silent || o->show_error)
        say("%s", msg);
}

/* A file that exists and is neither regular nor a directory: a device, a FIFO, a socket. */
static int special_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

static int regular_or_missing(const char *path, int64_t *size) {
    struct stat st;
    *size = 0;
    if (stat(path, &st) != 0)
        return errno == ENOENT;
    if (!S_ISREG(st.st_mode))
        return 0;
    *size = (int64_t)st.st_size;
    return 1;
}

/* Where the nth URL's body goes, and how it is asked for. Returns 0, or an exit status. */
static int plan(transfer *t) {
    const request_opts *o = t->o;
    if (!strcmp(o->command, "events")) {
        t->rpc_method = "fetch";
        t->route = ROUTE_EVENTS;
        t->mode = MODE_NONE;
        return 0;
    }
    int fetch = !strcmp(o->command, "fetch");
    out_spec spec = t->index < o->n_outs ? o->outs[t->index] : (out_spec){OUT_DEFAULT, NULL};
    if (fetch) {
        if (spec.kind == OUT_FILE && strcmp(spec.path, "-"))
            t->out_file = xstrdup(spec.path);
        if (spec.kind == OUT_REMOTE_NAME) {
            t->out_file = remote_name(t->url);
            if (!*t->out_file) {
                free(t->out_file);
                t->out_file = NULL;
                say_failure(o, "Remote file name has no length!");
                write_out(t, o->write_out, 0, 23, "Failed writing received data to disk/application");
                return 23;
            }
        }
        if (t->out_file && o->output_dir) {
            char *p = xasprintf("%s/%s", o->output_dir, t->out_file);
            free(t->out_file);
            t->out_file = p;
        }
    } else if (!strcmp(o->command, "upload") && spec.kind == OUT_FILE && strcmp(spec.path, "-")) {
        t->out_file = xstrdup(spec.path);
    }
    if (o->create_dirs && t->out_file && strchr(t->out_file, '/')) {
        char *dir = xstrndup(t->out_file, (size_t)(strrchr(t->out_file, '/') - t->out_file));
        if (*dir && make_dirs(dir) != 0) {
            char *m = xasprintf("Failed to create the directory %s", dir);
            say_failure(o, m);
            write_out(t, o->write_out, 0, 23, m);
            free(m);
            free(dir);
            return 23;
        }
        free(dir);
    }
    t->rpc_method = o->command;
    if (fetch && o->has_form)
        t->rpc_method = form_needs_client_body(o) ? "fetch" : "upload";
    t->mode = o->json_result ? MODE_JSON : !strcmp(o->command, "download") ? MODE_NONE : MODE_BODY;
    int64_t size = 0;
    int streams = fetch && t->out_file && !o->json_result && !o->has_form && !o->include && !o->head &&
                  regular_or_missing(t->out_file, &size);
    if (fetch && o->continue_at && t->out_file && regular_or_missing(t->out_file, &size) && size > 0) {
        /* curl's -C -: ask for the rest, add it to the file */
        t->resume_from = size;
        t->range = xasprintf("%lld-", (long long)size);
    }
    if (streams) {
        /* -o FILE streams through a download, overwriting FILE as curl does (not for
         * /dev/null, a FIFO or another non-regular file, nor with -i or -I: then the body
         * passes through here). An answer outside 2xx is not written by the daemon but comes
         * back with its body, which goes to FILE here (curl writes the error page too). */
        t->rpc_method = "download";
        t->route = ROUTE_DAEMON_FILE;
        t->overwrite = 1;
        t->no_resume = 1;
        char *abs = abs_path(t->out_file);
        if (t->resume_from > 0) {
            t->resume_tmp = xasprintf("%s.fetchctl-%ld", abs, (long)getpid());
            t->dl_path = xstrdup(t->resume_tmp);
            free(abs);
        } else {
            t->dl_path = abs;
        }
    } else if (!strcmp(o->command, "download")) {
        t->dl_path = abs_path(o->outs[0].path);
        t->overwrite = o->overwrite;
        t->no_resume = o->no_resume;
    } else if (fetch && !strcmp(t->rpc_method, "fetch") && !o->json_result && !o->include && !o->head &&
               !o->stubs && (t->out_file ? special_file(t->out_file)
                            : !(o->dump_header && !strcmp(o->dump_header, "-")) && !(o->parallel && o->n_urls > 1))) {
        /* The body to stdout (-o - or no -o), or to -o FILE that is not a regular file
         * (/dev/null, a FIFO), streams whatever its size: the daemon writes it to that
         * descriptor as it arrives. With -f an error's body must not be written, and only the
         * head says whether it is one: the body comes as notifications after the head, and
         * fetchctl writes it (or, with stdin streaming too, which those notifications cannot
         * carry, in the answer). With -i, -I or -D - the headers come first on stdout and -Z
         * writes each body whole: the body is in the answer. So it is with --stubs: a stub set
         * that records keeps only the size of a body that streamed, and would answer it empty. */
        t->route = o->fail != 1 ? ROUTE_FD : o->stdin_streams ? ROUTE_ANSWER : ROUTE_CHUNKS;
        if (t->route != ROUTE_ANSWER && !t->out_file) {
            t->body_fd = 1;
            if (o->stdout_closed) {
                const char *m = "Failure writing output to destination";
                say_failure(o, m);
                write_out(t, o->write_out, 0, 23, m);
                return 23;
            }
        } else if (t->route != ROUTE_ANSWER) {
            t->body_fd = open(t->out_file, O_WRONLY | O_CLOEXEC);
            if (t->body_fd < 0) {
                char *m = xasprintf("Failed to open the file %s", t->out_file);
                say_failure(o, m);
                write_out(t, o->write_out, 0, 23, m);
                free(m);
                return 23;
            }
            t->body_fd_opened = 1;
        }
    }
    t->stdin_size = -1;
    struct stat in;
    off_t at;
    if (o->stdin_streams && o->body == BODY_STDIN && fstat(0, &in) == 0 && S_ISREG(in.st_mode) &&
        (at = lseek(0, 0, SEEK_CUR)) >= 0 && in.st_size >= at)
        t->stdin_size = (int64_t)(in.st_size - at);  /* Content-Length, as curl sends it */
    /* curl's defaults for fetch: no cookies unless -b FILE, -c or --jar */
    return 0;
}

/* After the answer: nothing half-written is left behind. */
static void clean_up(transfer *t, int rc) {
    const request_opts *o = t->o;
    if (t->body_fd_opened)
        close(t->body_fd);
    if (t->multipart_tmp)
        unlink(t->multipart_tmp);
    if (t->resume_tmp)
        unlink(t->resume_tmp);
    int received = 0;
    if (rc != 0 && t->route == ROUTE_DAEMON_FILE) {
        /* the daemon's part file of a streamed -o FILE (asked without resume: nothing in it
         * is worth keeping) */
        char *part = xasprintf("%s.part", t->dl_path);
        struct stat st;
        received = stat(part, &st) == 0 && st.st_size > 0;
        unlink(part);
        free(part);
    }
    /* --remove-on-error: the file curl would have started to write */
    if (rc != 0 && o->remove_on_error && t->out_file && !t->resume_from && (t->wrote_file || received))
        unlink(t->out_file);
}

static int run_one(session *s, const request_opts *o, size_t index, const char *job_id, const char *jar,
                   pthread_mutex_t *output_lock) {
    transfer t = {.o = o, .index = index, .url = o->urls[index], .job_id = (char *)job_id};
    t.exchange = o->include || o->head || o->verbose || o->dump_header || o->write_out;
    t.cookie_jar = (char *)jar;
    int rc = plan(&t);
    if (rc) {
        free(t.out_file);
        return rc;
    }
    /* -T FILE to a URL that ends with /: the file's name is added, as curl does */
    char *request_url = NULL;
    size_t bare = strcspn(t.url, "?#");
    if (o->upload_name && bare && t.url[bare - 1] == '/')
        request_url = xasprintf("%.*s%s%s", (int)bare, t.url, o->upload_name, t.url + bare);
    const char *shown_url = t.url;
    if (request_url)
        t.url = request_url;
    json_t *params = build_params(&t);
    t.url = (char *)shown_url;
    free(request_url);
    if (!params) {
        write_out(&t, o->write_out, 0, 26, "Failed to open/read local data from file/application");
        clean_up(&t, 26);
        free(t.out_file);
        return 26;
    }
    interrupt_add_job(job_id);
    t.t_sent = t.progress_t0 = now_us();
    json_t *result = NULL;
    fetchd_error err = {0};
    fetchd_status st;
    if (t.route == ROUTE_CHUNKS || t.route == ROUTE_EVENTS) {
        /* on a connection of its own, read here: a stdout that does not take the output
         * pauses this transfer */
        fetchd_stream_callbacks cb = {.on_progress = o->progress ? on_progress : NULL};
        if (t.route == ROUTE_EVENTS)
            cb.on_event = on_stream_event;
        else {
            cb.on_head = on_stream_head;
            cb.on_chunk = on_stream_chunk;
        }
        fetchd_response response = {0};
        st = fetchd_fetch_stream(s->client, params, &cb, &t, &response, &err);
        result = json_incref(response.result);
        fetchd_response_free(&response);
    } else {
        /* the descriptors in the protocol's order: bodyFrom (stdin), then bodyTo (stdout) */
        int fds[2];
        size_t n_fds = 0;
        if (o->stdin_streams)
            fds[n_fds++] = 0;
        if (t.route == ROUTE_FD)
            fds[n_fds++] = t.body_fd;
        st = fetchd_job_call_fds(s->client, t.rpc_method, params, fds, n_fds, o->progress ? on_progress : NULL,
                                 &t, &result, &err);
    }
    json_decref(params);
    rc = handle_answer(s, &t, st, result, &err, output_lock);
    interrupt_remove_job(job_id);
    clean_up(&t, rc);
    json_decref(result);
    fetchd_error_clear(&err);
    free(t.out_file);
    free(t.dl_path);
    free(t.range);
    free(t.resume_tmp);
    free(t.multipart_tmp);
    return rc;
}

/* -Z: the URLs at once, at most --parallel-max of them running. */
typedef struct pool {
    session *s;
    const request_opts *o;
    const char *base_job, *jar;
    pthread_mutex_t lock, output_lock;
    size_t next;
    int rc;
} pool;

static char *job_id_for(const char *base, size_t i) {
    return i == 0 ? xstrdup(base) : xasprintf("%s-%zu", base, i);
}

static void *worker(void *arg) {
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->o->n_urls || interrupt_requested())
            return NULL;
        char *job = job_id_for(p->base_job, i);
        int rc = run_one(p->s, p->o, i, job, p->jar, &p->output_lock);
        free(job);
        if (rc) {  /* curl -Z: the last failure to end */
            pthread_mutex_lock(&p->lock);
            p->rc = rc;
            pthread_mutex_unlock(&p->lock);
        }
    }
}

static int run_parallel(session *s, const request_opts *o, const char *base_job, const char *jar) {
    pool p = {.s = s, .o = o, .base_job = base_job, .jar = jar};
    pthread_mutex_init(&p.lock, NULL);
    pthread_mutex_init(&p.output_lock, NULL);
    size_t n = o->n_urls < (size_t)o->parallel_max ? o->n_urls : (size_t)o->parallel_max;
    pthread_t *threads = xcalloc(n, sizeof *threads);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    size_t started = 0;
    for (; started < n; started++)
        if (pthread_create(&threads[started], &attr, worker, &p) != 0)
            break;
    pthread_attr_destroy(&attr);
    if (started == 0)
        worker(&p);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    pthread_mutex_destroy(&p.lock);
    pthread_mutex_destroy(&p.output_lock);
    return p.rc;
}

int run_request(request_opts *o) {
    const char *command = o->command;
    int fetch = curl_like(o);
    if (o->n_urls == 0)
        usage_error("%s: missing URL", command);
    if (!strcmp(command, "events")) {
        if (o->n_urls != 1)
            usage_error("events takes one URL");
        if (o->n_outs || o->has_form || o->include || o->head || o->json_result || o->continue_at ||
            (o->dump_header && !strcmp(o->dump_header, "-")))
            usage_error("events prints the events to stdout: not with -o, -O, -F, -i, -I, -D -, -C or "
                        "--json-result");
    }
    if (!strcmp(command, "upload") && o->body != BODY_NONE && o->body != BODY_FORM)
        usage_error("upload takes -F parts, not a body");
    if (!fetch) {
        if (o->n_urls != 1)
            usage_error("%s takes one URL", command);
        if (o->n_outs && o->outs[0].kind == OUT_REMOTE_NAME)
            usage_error("-O is for fetch");
    }
    if (!strcmp(command, "download")) {
        if (!o->n_outs || o->outs[0].kind != OUT_FILE || !strcmp(o->outs[0].path, "-"))
            usage_error("download: -o FILE is required");
        if (o->has_form)
            usage_error("download does not take -F");
    }
    if (o->get && o->body != BODY_DATA && o->body != BODY_NONE)
        usage_error("-G works with -d data only");
    if (o->upload_unreadable) {
        say("Can't open '%s'!", o->upload_unreadable);
        transfer t = {.o = o, .url = ""};
        write_out(&t, o->write_out, 0, 26, "Failed to open/read local data from file/application");
        return 26;
    }
    if (!o->silent)
        for (size_t i = 0; i < o->n_warnings; i++)
            fprintf(stderr, "%s\n", o->data_warnings[i]);
    if (!o->method && (o->body == BODY_TFILE || o->body == BODY_TSTDIN))
        o->method = xstrdup("PUT");
    if (o->head && !o->method)
        o->method = xstrdup("HEAD");
    char *base_job = o->job_id ? xstrdup(o->job_id)
                               : xasprintf("fetchctl-%ld-%u", (long)getpid(), (unsigned)(now_us() % 1000000000));
    /* curl's defaults for fetch: no retry unless --retry; no cookies unless -b FILE, -c or
     * --jar (-b FILE and -c use a jar of this command's own, filled from and written to the
     * files). NULL: no cookies; "": the daemon's default jar. */
    char *temp_jar = NULL;
    const char *jar = o->no_cookies ? NULL : o->jar ? o->jar : "";
    if (fetch) {
        if (!o->retry)
            o->retry = xstrdup("0");
        if (!o->jar && !o->no_cookies && (o->cookie_in || o->cookie_out)) {
            temp_jar = xasprintf("fetchctl-%s", base_job);
            jar = temp_jar;
        } else if (!o->jar) {
            jar = NULL;
        }
    }
    /* A closed stdin or stdout is held by /dev/null, so the daemon's socket never takes its
     * number (and is never handed over as bodyFrom or bodyTo); a body for a closed stdout is
     * curl's write error. */
    o->stdout_closed = fcntl(1, F_GETFD) < 0;
    for (int fd = 0; fd <= 1; fd++)
        if (fcntl(fd, F_GETFD) < 0) {
            int null = open("/dev/null", fd ? O_WRONLY : O_RDONLY);
            if (null >= 0 && null != fd) {
                dup2(null, fd);
                close(null);
            }
        }
    interrupt_start();
    session s = {0};
    session_open(&s, o->socket);
    struct stat st;
    if (o->cookie_in && jar && stat(o->cookie_in, &st) == 0 && S_ISREG(st.st_mode))
        load_netscape(&s, o->cookie_in, *jar ? jar : "default");
    int rc = 0;
    if (o->parallel && o->n_urls > 1) {
        rc = run_parallel(&s, o, base_job, jar);
    } else {
        /* one after the other, as curl: the nth -o or -O goes with the nth URL, the exit
         * status is the last one's */
        for (size_t i = 0; i < o->n_urls && !interrupt_requested(); i++) {
            char *job = job_id_for(base_job, i);
            rc = run_one(&s, o, i, job, jar, NULL);
            free(job);
        }
    }
    if (o->cookie_out && jar && save_netscape(&s, o->cookie_out, *jar ? jar : "default", o->silent, o->show_error) != 0 &&
        !rc)
        rc = 23;
    if (temp_jar)
        clear_jar(&s, temp_jar);
    session_close(&s);
    free(temp_jar);
    free(base_job);
    return rc;
}
