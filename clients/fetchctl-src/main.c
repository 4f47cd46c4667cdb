/* fetchctl: the command-line client of fetchd. See fetchctl.h for the layout. */
#define _GNU_SOURCE
#include "request.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    /* a closed stdout is a write error (curl's 23), not a silent death */
    signal(SIGPIPE, SIG_IGN);
    const char *socket_opt = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--socket")) {
            if (i + 1 >= argc)
                usage_error("option --socket needs a value");
            socket_opt = argv[++i];
        } else if (!strncmp(a, "--socket=", 9)) {
            socket_opt = a + 9;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "help")) {
            print_usage(stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
            printf("fetchctl %s\n", FETCHCTL_VERSION);
            return EXIT_OK;
        } else if (a[0] == '-') {
            usage_error("unknown option '%s'", a);
        } else {
            break;
        }
    }
    if (i >= argc)
        usage_error("missing command");
    const char *command = argv[i++];
    if (!strcmp(command, "fetch") || !strcmp(command, "download") || !strcmp(command, "upload") ||
        !strcmp(command, "events")) {
        request_opts o;
        parse_request_args(&o, command, argc - i, argv + i);
        if (!o.socket && socket_opt)
            o.socket = strdup(socket_opt);
        return run_request(&o);
    }
    if (!strcmp(command, "top"))
        return cmd_top(socket_opt, argc - i, argv + i);
    return cmd_simple(command, socket_opt, argc - i, argv + i);
}
