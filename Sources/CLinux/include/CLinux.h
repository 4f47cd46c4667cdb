#ifndef FETCHD_CLINUX_H
#define FETCHD_CLINUX_H
/* Linux calls that Swift's Glibc module leaves out (see linux.c). */
int fetchd_epoll_create(void);
int fetchd_epoll_add(int ep, int fd, unsigned int events);
int fetchd_epoll_mod(int ep, int fd, unsigned int events);
int fetchd_epoll_del(int ep, int fd);
/* Waits and writes (fd, events) pairs into fds and events; returns the count or -1. */
int fetchd_epoll_wait(int ep, int *fds, unsigned int *events, int max, int timeout);
int fetchd_eventfd(void);
/* A one-shot monotonic timer descriptor (non-blocking, close-on-exec); arm: ms from now. */
int fetchd_timerfd(void);
int fetchd_timerfd_arm(int fd, long milliseconds);
int fetchd_accept(int fd);
int fetchd_peer_credentials(int fd, int *pid, unsigned int *uid);
int fetchd_unix_socket(int nonblocking);
/* Extended attributes (the validator of a partial download). */
int fetchd_fsetxattr(int fd, const char *name, const char *value, unsigned long size);
/* Of the path itself, never of what a symbolic link points to (lgetxattr). */
long fetchd_lgetxattr(const char *path, const char *name, char *value, unsigned long size);
int fetchd_fremovexattr(int fd, const char *name);
int fetchd_removexattr(const char *path, const char *name);
/* Starts writeback of a file range without waiting (sync_file_range SYNC_FILE_RANGE_WRITE). */
int fetchd_start_writeback(int fd, long long offset, long long length);
/* mallopt(M_ARENA_MAX, n): bounds glibc's per-thread arenas. */
int fetchd_limit_malloc_arenas(int arenas);
/* malloc_trim(0): returns the free pages of every arena to the system. */
int fetchd_release_free_memory(void);
/* Bytes malloc has handed out and not had back, every arena (mallinfo2().uordblks). */
unsigned long fetchd_heap_in_use(void);
/* Starts argv[0] (an absolute path, no shell, no PATH search) with envp only, its stdin,
 * stdout and stderr the pipes' ends given, every other descriptor closed, in a process group
 * of its own. Returns the pid, or -errno. */
int fetchd_pipe_cloexec(int fds[2]);

/* The daemon's stop and reload signals (SIGTERM, SIGINT, SIGHUP): blocked in the calling
 * thread, before any other thread exists, so every thread inherits the mask and a signal
 * that comes early stays pending instead of being lost; then taken one at a time. */
int fetchd_block_daemon_signals(void);
int fetchd_wait_daemon_signal(void);
int fetchd_spawn(const char *path, char *const argv[], char *const envp[], int in, int out, int err);
/* pthread_setname_np for the calling thread (at most 15 bytes). */
int fetchd_name_this_thread(const char *name);
/* An HTTP date (IMF-fixdate, RFC 850 or asctime form, C locale) as Unix seconds; -1 if it is not one. */
long long fetchd_parse_http_date(const char *text);
/* A TCP listener on a numeric address (IPv4 or IPv6, no name lookup) and port, close-on-exec,
 * SO_REUSEADDR, blocking. *loopback is set to whether the address is a loopback one. Returns
 * the descriptor, or -errno (-EINVAL: not a numeric address). */
int fetchd_tcp_listen(const char *address, int port, int *loopback);
/* One datagram to a Unix socket path ('@' first: the abstract namespace), as sd_notify
 * sends it. Returns 0, or -errno. */
int fetchd_notify_datagram(const char *path, const char *text, unsigned long length);
/* Whether fd is a listening AF_UNIX stream socket (1), another socket or file (0). */
int fetchd_is_unix_listener(int fd);
/* Makes a passed descriptor non-blocking and close-on-exec. */
int fetchd_adopt_listener(int fd);
/* The Unix socket path fd is bound to, into buf (size bytes); its length, or -1. */
int fetchd_socket_path(int fd, char *buf, unsigned long size);
/* Sets a receive and send timeout in milliseconds. */
int fetchd_socket_timeouts(int fd, long milliseconds);
/* All of `in` copied into the empty `out`: a reflink (FICLONE) where the filesystem can share
 * the extents, else copy_file_range (in the kernel), else read and write. Bytes copied, or -errno;
 * *cloned is set to 1 for a reflink. */
long long fetchd_clone_or_copy(int in, int out, int *cloned);
/* Fills buffer with length bytes from the kernel's CSPRNG (getrandom). 0, or -errno. */
int fetchd_random_bytes(void *buffer, unsigned long length);
/* Marks the calling thread as an engine thread (each marks itself as it starts), and says
 * whether the calling thread is one: a thread-local, for the thread rules checked in debug
 * builds by code that holds no engine. */
void fetchd_mark_engine_thread(void);
int fetchd_is_engine_thread(void);
/* Descriptors passed with SCM_RIGHTS (descriptors.c). recv() of up to len bytes that also takes
 * the descriptors that came with them (close-on-exec): up to max_fds into fds, *n_fds their
 * count (any more are closed). Returns the bytes read, 0 at the end, or -errno. */
long fetchd_recv_with_fds(int sock, void *buf, unsigned long len, int *fds, int max_fds, int *n_fds);
/* One write that never waits (pwritev2 RWF_NOWAIT; a socket: MSG_DONTWAIT), without touching
 * the descriptor's flags: bytes written, or -errno (-EAGAIN: no room now; -EOPNOTSUPP: this
 * kind of file cannot, write it as a blocking one). */
long fetchd_write_nowait(int fd, const void *buf, unsigned long len, int is_socket);
/* Waits until fd is ready (writable: for_write, else readable) or wake_fd is readable.
 * 1: fd is ready (or in error: the next call says which), 0: woken, -errno. */
int fetchd_wait_ready(int fd, int for_write, int wake_fd);
/* What kind of file fd is: 1 regular file or block device, 2 pipe or FIFO, 3 socket, 4 other
 * (a terminal, a character device); -errno. *flags: its access mode and status flags (F_GETFL). */
int fetchd_descriptor_kind(int fd, int *flags);
/* Makes a wake_fd readable (an eventfd write), for fetchd_wait_ready. */
int fetchd_wake(int wake_fd);
extern const unsigned int FETCHD_EPOLLIN, FETCHD_EPOLLOUT, FETCHD_EPOLLRDHUP, FETCHD_EPOLLHUP, FETCHD_EPOLLERR;
#endif
