/* The connection to the daemon: which socket, whether it can be trusted, and Ctrl-C. */
#define _GNU_SOURCE
#include "fetchctl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long a Ctrl-C waits for the daemon to answer the cancelled jobs before exiting. */
#define CANCEL_GRACE_SECONDS 5

static _Noreturn void unreachable(const char *sock, const char *why) {
    if (why)
        say("cannot reach fetchd at %s: %s", sock, why);
    else
        say("cannot reach fetchd at %s: is it running? (start it with 'make run')", sock);
    exit(EXIT_UNREACHABLE);
}

/* Nothing may be sent to a listener of another user (a socket path can be taken first, and a
 * request carries its Authorization header). Before connecting, the path itself is checked,
 * so nothing is even connected to on a path another user could have changed:
 *   - the socket file is owned by this user or root: bind() gives a socket file the uid of
 *     the process that bound it, and only root can chown it, so the listener runs as that uid;
 *   - every directory from / down to it is owned by this user or root, and not writable by
 *     group or others unless it is sticky.
 * Then libfetchd reads the peer's uid with SO_PEERCRED after connect(), before sending. */
static char *trust_socket(const char *sock) {
    char *real = realpath(sock, NULL);
    if (!real)
        unreachable(sock, NULL);
    uid_t me = getuid();
    size_t n = strlen(real);
    char *path = xmalloc(n + 2);
    /* "/", then each prefix ending before a '/', then the whole path */
    for (size_t end = 0; end <= n; end++) {
        if (end != 0 && end != n && real[end] != '/')
            continue;
        if (end == 0) {
            strcpy(path, "/");
        } else {
            memcpy(path, real, end);
            path[end] = 0;
        }
        if (end == 0 && n == 1)
            break;
        int last = end == n;
        struct stat st;
        if (lstat(path, &st) != 0) {
            say("cannot reach fetchd at %s: cannot examine %s", sock, real);
            exit(EXIT_UNREACHABLE);
        }
        if (!last) {
            if (!S_ISDIR(st.st_mode)) {
                say("refusing fetchd at %s: %s changed while it was being checked; nothing was sent", sock, path);
                exit(EXIT_UNREACHABLE);
            }
            if (st.st_uid != me && st.st_uid != 0) {
                say("refusing fetchd at %s: its directory %s is owned by uid %u, not by this user (uid %u) or root; "
                    "nothing was sent", sock, path, (unsigned)st.st_uid, (unsigned)me);
                exit(EXIT_UNREACHABLE);
            }
            if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
                say("refusing fetchd at %s: its directory %s is writable by group or others (mode %o, not sticky), "
                    "so another user could replace the socket; nothing was sent", sock, path,
                    (unsigned)(st.st_mode & 07777));
                exit(EXIT_UNREACHABLE);
            }
        } else {
            if (!S_ISSOCK(st.st_mode)) {
                say("cannot reach fetchd at %s: %s is not a socket", sock, real);
                exit(EXIT_UNREACHABLE);
            }
            if (st.st_uid != me && st.st_uid != 0) {
                say("refusing fetchd at %s: the socket is owned by uid %u, not by this user (uid %u) or root; "
                    "nothing was sent", sock, (unsigned)st.st_uid, (unsigned)me);
                exit(EXIT_UNREACHABLE);
            }
        }
        /* skip repeated slashes (realpath leaves none, but be safe) */
    }
    free(path);
    return real;
}

void session_open(session *s, const char *explicit_path) {
    char path[PATH_MAX];
    const char *env;
    if (explicit_path && *explicit_path)
        snprintf(path, sizeof path, "%s", explicit_path);
    else if ((env = getenv("FETCHD_SOCKET")) && *env)
        snprintf(path, sizeof path, "%s", env);
    else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
        snprintf(path, sizeof path, "%s/fetchd.sock", env);
    else
        snprintf(path, sizeof path, "/tmp/fetchd-%u/fetchd.sock", (unsigned)getuid());
    s->sock = xstrdup(path);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
        unreachable(path, NULL);
    s->sock_real = trust_socket(path);
    fetchd_error err = {0};
    fetchd_status st2 = fetchd_connect(s->sock_real, &s->client, &err);
    if (st2 == FETCHD_ERR_UNTRUSTED_PEER) {
        say("%s", err.message ? err.message : fetchd_status_string(st2));
        exit(EXIT_UNREACHABLE);
    }
    if (st2 != FETCHD_OK)
        unreachable(path, NULL);
    fetchd_error_clear(&err);
    interrupt_set_client(s->client);
}

void session_close(session *s) {
    interrupt_set_client(NULL);
    fetchd_close(s->client);
    s->client = NULL;
    free(s->sock);
    free(s->sock_real);
    s->sock = s->sock_real = NULL;
}

int connection_failure(const session *s, const fetchd_error *err) {
    if (err->status == FETCHD_ERR_CLOSED)
        say("fetchd at %s closed the connection without answering", s->sock);
    else
        say("fetchd at %s: %s", s->sock, err->message ? err->message : fetchd_status_string(err->status));
    return EXIT_UNREACHABLE;
}

/* ---------------------------------------------------------------- Ctrl-C */

static struct {
    pthread_mutex_t lock;
    fetchd_client *client;
    char **jobs;
    size_t n_jobs, cap;
    atomic_int progress_drawn;
    atomic_int requested;
    int started;
} intr = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void write_stderr(const char *s) {
    (void)!write(2, s, strlen(s));
}

static void *interrupt_main(void *arg) {
    sigset_t *set = arg;
    int sig;
    if (sigwait(set, &sig) != 0)
        return NULL;
    if (atomic_exchange(&intr.progress_drawn, 0))
        write_stderr("\n");
    pthread_mutex_lock(&intr.lock);
    if (!intr.client || intr.n_jobs == 0)
        _exit(EXIT_INTERRUPTED);
    atomic_store(&intr.requested, 1);
    for (size_t i = 0; i < intr.n_jobs; i++) {
        say("cancelling job %s", intr.jobs[i]);
        /* on the job's own connection: the daemon answers the job's request with -32002 */
        fetchd_cancel_nowait(intr.client, intr.jobs[i], NULL);
    }
    pthread_mutex_unlock(&intr.lock);
    /* The main thread exits 5 when the answers come; a second Ctrl-C, or no answer in
     * time, ends it here. */
    struct timespec grace = {CANCEL_GRACE_SECONDS, 0};
    sigtimedwait(set, NULL, &grace);
    say("cancelled");
    _exit(EXIT_CANCELLED);
}

/* A SIGINT ignored when fetchctl started (a background job of a script) stays ignored, as
 * the shell meant. */
static int sigint_ignored(void) {
    struct sigaction old;
    return sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
}

void interrupt_start(void) {
    if (sigint_ignored())
        return;
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&thread, &attr, interrupt_main, &set) == 0)
        intr.started = 1;
    else
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    pthread_attr_destroy(&attr);
}

void interrupt_set_client(fetchd_client *client) {
    pthread_mutex_lock(&intr.lock);
    intr.client = client;
    pthread_mutex_unlock(&intr.lock);
}

void interrupt_add_job(const char *job_id) {
    pthread_mutex_lock(&intr.lock);
    if (intr.n_jobs == intr.cap) {
        intr.cap = intr.cap ? intr.cap * 2 : 8;
        intr.jobs = xrealloc(intr.jobs, intr.cap * sizeof *intr.jobs);
    }
    intr.jobs[intr.n_jobs++] = xstrdup(job_id);
    pthread_mutex_unlock(&intr.lock);
}

void interrupt_remove_job(const char *job_id) {
    pthread_mutex_lock(&intr.lock);
    for (size_t i = 0; i < intr.n_jobs; i++)
        if (!strcmp(intr.jobs[i], job_id)) {
            free(intr.jobs[i]);
            intr.jobs[i] = intr.jobs[--intr.n_jobs];
            break;
        }
    pthread_mutex_unlock(&intr.lock);
}

int interrupt_requested(void) {
    return atomic_load(&intr.requested);
}

void interrupt_progress_drawn(int drawn) {
    atomic_store(&intr.progress_drawn, drawn);
}

static void exit_130(int sig) {
    (void)sig;
    if (atomic_load(&intr.progress_drawn))
        write_stderr("\n");
    _exit(EXIT_INTERRUPTED);
}

void interrupt_exit_130(void) {
    if (sigint_ignored())
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = exit_130;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}
