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
#include <string.h>
#include <stddef.h>
#include <sys/random.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/time.h>
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
unsigned long fetchd_heap_in_use(void) { return mallinfo2().uordblks; }
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

static void daemon_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

int fetchd_block_daemon_signals(void) {
    sigset_t set;
    daemon_signals(&set);
    return pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int fetchd_wait_daemon_signal(void) {
    sigset_t set;
    daemon_signals(&set);
    int number = 0;
    while (sigwait(&set, &number) != 0) {}
    return number;
}

int fetchd_tcp_listen(const char *address, int port, int *loopback) {
    struct sockaddr_storage storage;
    memset(&storage, 0, sizeof storage);
    socklen_t length;
    int family;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
    if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
        family = AF_INET;
        v4->sin_family = AF_INET;
        v4->sin_port = htons((unsigned short)port);
        length = sizeof *v4;
        *loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
        family = AF_INET6;
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((unsigned short)port);
        length = sizeof *v6;
        *loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    } else {
        return -EINVAL;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&storage, length) != 0 || listen(fd, 64) != 0) {
        int code = errno;
        close(fd);
        return -code;
    }
    return fd;
}

int fetchd_notify_datagram(const char *path, const char *text, unsigned long length) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    size_t pathLength = strlen(path);
    if (pathLength == 0 || pathLength >= sizeof address.sun_path) return -EINVAL;
    memcpy(address.sun_path, path, pathLength);
    if (path[0] == '@') address.sun_path[0] = 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    socklen_t addressLength = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + pathLength + (path[0] == '@' ? 0 : 1));
    ssize_t sent = sendto(fd, text, length, MSG_NOSIGNAL, (struct sockaddr *)&address, addressLength);
    int code = sent < 0 ? errno : 0;
    close(fd);
    return -code;
}

int fetchd_is_unix_listener(int fd) {
    int value = 0;
    socklen_t length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &length) != 0 || value != AF_UNIX) return 0;
    length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &length) != 0 || value != SOCK_STREAM) return 0;
    length = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) != 0 || value != 1) return 0;
    return 1;
}

int fetchd_adopt_listener(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return -errno;
    int fdFlags = fcntl(fd, F_GETFD);
    if (fdFlags < 0 || fcntl(fd, F_SETFD, fdFlags | FD_CLOEXEC) != 0) return -errno;
    return 0;
}

int fetchd_socket_path(int fd, char *buf, unsigned long size) {
    struct sockaddr_un address;
    socklen_t length = sizeof address;
    memset(&address, 0, sizeof address);
    if (getsockname(fd, (struct sockaddr *)&address, &length) != 0 || address.sun_family != AF_UNIX) return -1;
    size_t pathLength = strnlen(address.sun_path, sizeof address.sun_path);
    if (pathLength + 1 > size) return -1;
    memcpy(buf, address.sun_path, pathLength);
    buf[pathLength] = 0;
    return (int)pathLength;
}

int fetchd_socket_timeouts(int fd, long milliseconds) {
    struct timeval tv = { .tv_sec = milliseconds / 1000, .tv_usec = (milliseconds % 1000) * 1000 };
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) return -errno;
    return 0;
}

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

int fetchd_random_bytes(void *buffer, unsigned long length) {
    unsigned long done = 0;
    while (done < length) {
        ssize_t n = getrandom((char *)buffer + done, length - done, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        done += (unsigned long)n;
    }
    return 0;
}

static _Thread_local int engine_thread_mark;

void fetchd_mark_engine_thread(void) {
    engine_thread_mark = 1;
}

int fetchd_is_engine_thread(void) {
    return engine_thread_mark;
}
