/* arrival_server: an HTTP/1.1 server on 127.0.0.1 that answers every request with 100 bytes and
 * logs when each request arrived, as the kernel stamped its packet (SO_TIMESTAMPNS), in
 * seconds with nanoseconds, one line each (benchmark, not a test).
 *
 *   arrival_server PORT LOGFILE
 *
 * nginx logs milliseconds, taken when it writes its log line (at the end of the request): at
 * 2,000 requests/s one millisecond is two requests, so a count of arrivals in one second could
 * not tell a limiter that keeps its bound from one that exceeds it by two. The kernel's receive
 * stamp is not delayed by this server's threads being scheduled late. Clients send one request
 * at a time per connection (no pipelining), so each read holds one request.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static FILE *logf;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n";

static void *serve(void *arg) {
    int fd = (int)(long)arg, one = 1;
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    char buf[65536], control[256];
    size_t have = 0;
    struct timespec first = {0, 0};   /* the stamp of the first bytes of the request being read */
    for (;;) {
        struct iovec iov = {buf + have, sizeof buf - have};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
        ssize_t r = recvmsg(fd, &m, 0);
        if (r <= 0) break;
        if (have == 0) {
            first.tv_sec = 0;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) memcpy(&first, CMSG_DATA(c), sizeof first);
            /* Bytes queued before the option took effect carry no stamp (a round once logged
               0 and its rate came out as 2e-8/s): the time of the read is the next best. */
            if (first.tv_sec == 0) clock_gettime(CLOCK_REALTIME, &first);
        }
        have += (size_t)r;
        char *end;
        while ((end = memmem(buf, have, "\r\n\r\n", 4))) {   /* GETs: a head and no body */
            pthread_mutex_lock(&lock);
            fprintf(logf, "%lld.%09ld\n", (long long)first.tv_sec, first.tv_nsec);
            fflush(logf);
            pthread_mutex_unlock(&lock);
            size_t used = (size_t)(end + 4 - buf);
            memmove(buf, end + 4, have - used);
            have -= used;
            if (write(fd, answer, sizeof answer - 1) != (ssize_t)(sizeof answer - 1)) goto out;
        }
        if (have == sizeof buf) break;
    }
out:
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: arrival_server PORT LOGFILE\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    logf = fopen(argv[2], "a");
    if (!logf) { perror(argv[2]); return 1; }
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);  /* inherited by accepted sockets */
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 256)) { perror("arrival_server"); return 1; }
    for (;;) {
        int fd = accept(s, NULL, NULL);
        if (fd < 0) continue;
        pthread_t t;
        pthread_create(&t, NULL, serve, (void *)(long)fd);
        pthread_detach(t);
    }
}
