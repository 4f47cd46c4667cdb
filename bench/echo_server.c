/* echo_server: the floor for `ping` round trips (benchmark, not a test).
 *
 *   echo_server SOCKET_PATH
 *
 * Listens on a Unix socket, one thread per connection, blocking I/O. For every line it reads it
 * writes one answer the size of fetchd's ping answer, with the request's numeric id copied:
 * {"jsonrpc":"2.0","id":N,"result":"pong"}. Runs until killed (SIGTERM).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void *serve(void *arg) {
    int fd = (int)(long)arg;
    char in[65536], out[65536];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, in + len, sizeof in - len);
        if (r <= 0) break;
        len += (size_t)r;
        size_t o = 0; char *start = in, *nl;
        while ((nl = memchr(start, '\n', (size_t)(in + len - start))) != NULL) {
            long id = 0; char *p = strstr(start, "\"id\":");
            if (p && p < nl) id = strtol(p + 5, NULL, 10);
            if (o + 128 > sizeof out) { if (write(fd, out, o) != (ssize_t)o) goto done; o = 0; }
            o += (size_t)snprintf(out + o, 128, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"result\":\"pong\"}\n", id);
            start = nl + 1;
        }
        if (o && write(fd, out, o) != (ssize_t)o) break;
        len = (size_t)(in + len - start); memmove(in, start, len);
        if (len == sizeof in) len = 0;  /* overlong line: drop it */
    }
done:
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: echo_server SOCKET_PATH\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    unlink(argv[1]);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 128)) { perror("echo_server"); return 1; }
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        pthread_t t; pthread_create(&t, NULL, serve, (void *)(long)c); pthread_detach(t);
    }
}
