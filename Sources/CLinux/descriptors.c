/* Descriptors a client passes with SCM_RIGHTS (bodyTo, bodyFrom), and I/O on them that never
 * changes their flags: their file description is shared with the client (its stdout, its
 * stdin), so O_NONBLOCK is never set; writes that must not wait use RWF_NOWAIT instead. */
#define _GNU_SOURCE
#include "CLinux.h"
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
#include <stdint.h>

/* Room for this many descriptors in one read's control message; the kernel closes any more
 * (MSG_CTRUNC). */
#define FETCHD_MAX_FDS_PER_READ 16

long fetchd_recv_with_fds(int sock, void *buf, unsigned long len, int *fds, int max_fds, int *n_fds) {
    union {
        char bytes[CMSG_SPACE(sizeof(int) * FETCHD_MAX_FDS_PER_READ)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    *n_fds = 0;
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0)
        return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const unsigned char *data = CMSG_DATA(c);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, data + i * sizeof(int), sizeof fd);
            if (*n_fds < max_fds)
                fds[(*n_fds)++] = fd;
            else
                close(fd);
        }
    }
    return (long)n;
}

long fetchd_write_nowait(int fd, const void *buf, unsigned long len, int is_socket) {
    ssize_t n;
    if (is_socket) {
        n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    } else {
        struct iovec iov = {(void *)buf, len};
        n = pwritev2(fd, &iov, 1, -1, RWF_NOWAIT);
    }
    return n < 0 ? -errno : (long)n;
}

int fetchd_wait_ready(int fd, int for_write, int wake_fd) {
    struct pollfd p[2] = {
        {.fd = fd, .events = (short)(for_write ? POLLOUT : POLLIN)},
        {.fd = wake_fd, .events = POLLIN},
    };
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (p[1].revents)
            return 0;
        return 1;
    }
}

int fetchd_descriptor_kind(int fd, int *flags) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    int f = fcntl(fd, F_GETFL);
    if (f < 0)
        return -errno;
    *flags = f;
    if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
        return 1;
    if (S_ISFIFO(st.st_mode))
        return 2;
    if (S_ISSOCK(st.st_mode))
        return 3;
    return 4;
}

int fetchd_wake(int wake_fd) {
    uint64_t one = 1;
    return write(wake_fd, &one, sizeof one) < 0 ? -errno : 0;
}
