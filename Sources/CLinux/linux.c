/* Linux calls that Swift's Glibc module leaves out: epoll, eventfd, timerfd, accept4, SO_PEERCRED.
 * Compiled here, with _GNU_SOURCE, so that the header Swift sees needs no system headers. */
#define _GNU_SOURCE
#include "CLinux.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <malloc.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
#include <spawn.h>
#include <signal.h>
#include <errno.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <sys/stat.h>


int fetchd_epoll_add(int ep, int fd, unsigned int events) {
    struct epoll_event ev = { .events = events, .data = { .fd = fd } };
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}
int fetchd_epoll_mod(int ep, int fd, unsigned int events) {
    struct epoll_event ev = { .events = events, .data = { .fd = fd } };
    return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}
int fetchd_epoll_del(int ep, int fd) {
    return epoll_ctl(ep, EPOLL_CTL_DEL, fd, 0);
}
/* Waits and writes (fd, events) pairs into out; returns the count or -1. */
int fetchd_epoll_wait(int ep, int *fds, unsigned int *events, int max, int timeout) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n = epoll_wait(ep, evs, max, timeout);
    for (int i = 0; i < n; i++) { fds[i] = evs[i].data.fd; events[i] = evs[i].events; }
    return n;
}
int fetchd_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
int fetchd_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
int fetchd_accept(int fd) { return accept4(fd, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC); }
int fetchd_peer_credentials(int fd, int *pid, unsigned int *uid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    return 0;
}
int fetchd_unix_socket(int nonblocking) {
    return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
}
const unsigned int FETCHD_EPOLLIN = EPOLLIN;
const unsigned int FETCHD_EPOLLOUT = EPOLLOUT;
const unsigned int FETCHD_EPOLLRDHUP = EPOLLRDHUP;
const unsigned int FETCHD_EPOLLHUP = EPOLLHUP;
const unsigned int FETCHD_EPOLLERR = EPOLLERR;

int fetchd_fsetxattr(int fd, const char *name, const char *value, unsigned long size) {
    return fsetxattr(fd, name, value, size, 0);
}
long fetchd_lgetxattr(const char *path, const char *name, char *value, unsigned long size) {
    return lgetxattr(path, name, value, size);
}
int fetchd_fremovexattr(int fd, const char *name) { return fremovexattr(fd, name); }
int fetchd_removexattr(const char *path, const char *name) { return removexattr(path, name); }

int fetchd_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

int fetchd_limit_malloc_arenas(int arenas) { return mallopt(M_ARENA_MAX, arenas); }
int fetchd_release_free_memory(void) { return malloc_trim(0); }
int fetchd_name_this_thread(const char *name) { return pthread_setname_np(pthread_self(), name); }

long long fetchd_parse_http_date(const char *text) {
    static const char *formats[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"};
    for (unsigned i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        struct tm fields = {0};
        const char *end = strptime(text, formats[i], &fields);
        if (end == NULL || *end != 0) continue;  /* the whole text, nothing left over */
        time_t seconds = timegm(&fields);
        if (seconds != (time_t)-1) return (long long)seconds;
    }
    return -1;
}

int fetchd_timerfd(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }
int fetchd_timerfd_arm(int fd, long milliseconds) {
    struct itimerspec spec = { .it_value = { .tv_sec = milliseconds / 1000, .tv_nsec = (milliseconds % 1000) * 1000000L } };
    return timerfd_settime(fd, 0, &spec, 0);
}

int fetchd_spawn(const char *path, char *const argv[], char *const envp[], int in, int out, int err) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    if (posix_spawn_file_actions_init(&actions) != 0) return -ENOMEM;
    if (posix_spawnattr_init(&attributes) != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return -ENOMEM;
    }
    posix_spawn_file_actions_adddup2(&actions, in, 0);
    posix_spawn_file_actions_adddup2(&actions, out, 1);
    posix_spawn_file_actions_adddup2(&actions, err, 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    /* Default signal handling in the child (the daemon ignores SIGPIPE and SIGTERM), and
     * its own process group, so that a timeout's kill reaches what it started too. */
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    return rc == 0 ? (int)pid : -rc;
}

int fetchd_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

long long fetchd_clone_or_copy(int in, int out, int *cloned) {
    struct stat info;
    *cloned = 0;
    if (fstat(in, &info) != 0) return -errno;
    if (ioctl(out, FICLONE, in) == 0) {
        *cloned = 1;
        return (long long)info.st_size;
    }
    long long done = 0;
    while (done < (long long)info.st_size) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(info.st_size - done), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += n;
    }
    if (done == (long long)info.st_size) return done;
    /* copy_file_range refused (another filesystem, an old kernel): plain reads and writes. */
    char buffer[1 << 16];
    while (1) {
        ssize_t n = pread(in, buffer, sizeof buffer, done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return done;
        ssize_t written = 0;
        while (written < n) {
            ssize_t w = pwrite(out, buffer + written, (size_t)(n - written), done + written);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return -errno;
            written += w;
        }
        done += n;
    }
}
