/* example: fetch a URL through fetchd and print the status and the body.
 *
 *   ./example URL [SOCKET]
 *
 * Build: make -C clients/c example   (or: cc example.c $(pkg-config --cflags --libs fetchd)) */
#include <stdio.h>
#include "fetchd.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s URL [SOCKET]\n", argv[0]);
        return 2;
    }
    fetchd_client *client = NULL;
    fetchd_error err = {0};
    if (fetchd_connect(argc == 3 ? argv[2] : NULL, &client, &err) != FETCHD_OK) {
        fprintf(stderr, "example: %s\n", err.message);
        fetchd_error_clear(&err);
        return 3;
    }
    fetchd_response response = {0};
    fetchd_status st = fetchd_fetch(client, argv[1], &response, &err);
    int rc = 0;
    if (st == FETCHD_OK) {
        printf("status: %d\n", response.status);
        fwrite(response.body, 1, response.body_len, stdout);
        fetchd_response_free(&response);
    } else if (st == FETCHD_ERR_RPC) {
        const char *kind = fetchd_error_data_string(&err, "kind");
        fprintf(stderr, "example: error %d: %s%s%s\n", err.code, err.message,
                kind ? ", kind " : "", kind ? kind : "");
        rc = err.code == FETCHD_RPC_CANCELLED ? 5 : 4;
    } else {
        fprintf(stderr, "example: %s\n", err.message);
        rc = 3;
    }
    fetchd_error_clear(&err);
    fetchd_close(client);
    return rc;
}
