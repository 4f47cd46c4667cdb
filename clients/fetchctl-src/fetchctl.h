/* fetchctl: the command-line client of fetchd, in C on libfetchd.
 *
 * One program, no helper processes: it parses curl's command line (args.c), builds the
 * JSON-RPC params (request.c), sends them on one connection (session.c, through libfetchd),
 * and writes the answer as curl would (answer.c, writeout.c). The daemon's own commands are
 * in commands.c and top.c. Exit codes: 0 done, 2 usage, 3 daemon unreachable or refused,
 * 4 JSON-RPC error, 5 cancelled; a failed fetch exits with curl's code (6, 7, 22, 23, 26,
 * 28, 33, 35, 47, 52, 56, 60...). */
#ifndef FETCHCTL_H
#define FETCHCTL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "fetchd.h"

#define FETCHCTL_VERSION "0.1.0"

/* fetchctl's own exit codes (curl's are used for transfer failures). */
enum {
    EXIT_OK = 0,
    EXIT_USAGE = 2,
    EXIT_UNREACHABLE = 3,
    EXIT_RPC = 4,
    EXIT_CANCELLED = 5,
    EXIT_INTERRUPTED = 130,
};

/* ------------------------------------------------------------------- util.c */

/* A growable byte buffer, always NUL-terminated. */
typedef struct buf {
    char *data;
    size_t len, cap;
} buf;

void buf_add(buf *b, const void *data, size_t len);
void buf_adds(buf *b, const char *s);
void buf_addc(buf *b, char c);
void buf_addf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(buf *b);
/* Pads with spaces to width (never cuts), as jq's pad in the old filter did. */
void buf_pad(buf *b, const char *s, size_t width);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Messages on stderr, prefixed "fetchctl: ". */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "fetchctl: MESSAGE\nTry 'fetchctl --help'..." and exit 2. */
_Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An absolute path for p, made against the current directory (no symbolic links resolved). */
char *abs_path(const char *p);
int is_number(const char *s);        /* 12 or 1.5 */
int is_int(const char *s);           /* 12 */
int is_signed_int(const char *s);    /* -3 or 12 */
/* "1.5 KiB" as the progress bar writes sizes (one decimal, integer arithmetic). */
void human_bytes(buf *b, int64_t n);
/* A file that can be read and is not a directory. */
int readable_file(const char *path);
/* Reads a whole file (or stdin for "-"); NULL with errno set when it cannot. */
char *read_file(const char *path, size_t *len);
/* The next line of the text at *cursor (before end): NUL-terminated in place, without its
 * "\r\n" or "\n"; NULL at the end. */
char *next_line(char **cursor, char *end);
/* Writes all of data to fd; 0, or -1 with errno. */
int write_all(int fd, const void *data, size_t len);
/* Monotonic microseconds. */
int64_t now_us(void);
/* Whether the len bytes are valid UTF-8 (and hold no NUL, which jansson strings refuse). */
int valid_utf8(const char *s, size_t len);
/* Base64 of len bytes (malloc'd, NUL-terminated). */
char *base64_encode(const unsigned char *data, size_t len);
/* How many bytes the base64 text in decodes to. */
size_t base64_decoded_size(const char *in);
/* Decodes base64 into a malloc'd buffer; NULL when it is not base64. */
unsigned char *base64_decode(const char *in, size_t in_len, size_t *out_len);
/* A member of an object as a string ("" when missing or not a string). */
const char *jstr(json_t *obj, const char *key);
/* A member's text as jq's tostring would write it ("" for null or missing). */
void json_text(buf *b, json_t *v);
/* v's text, or fallback when v is missing, null or false (jq's //). */
void json_alt(buf *b, json_t *v, const char *fallback);

/* ---------------------------------------------------------------- jsonout.c */

/* The value as jq prints it: indented by two spaces (pretty) or compact, numbers in their
 * shortest form, non-ASCII as it is. */
void json_write(buf *b, json_t *v, int pretty);
/* "{" then each member compact, one a line, then "\n}" (curl's %{header_json}). */
void json_write_lines(buf *b, json_t *obj);

/* ---------------------------------------------------------------- session.c */

/* The connection to the daemon, and what Ctrl-C needs to cancel. */
typedef struct session {
    char *sock;          /* the path as given or chosen (for messages) */
    char *sock_real;     /* symbolic links resolved: the path connected to */
    fetchd_client *client;
} session;

/* The socket path by the daemon's rules (explicit, $FETCHD_SOCKET, $XDG_RUNTIME_DIR/fetchd.sock,
 * /tmp/fetchd-<uid>/fetchd.sock), checked (see trust_socket in session.c) and connected;
 * exits 3 with the reason when it cannot be. */
void session_open(session *s, const char *explicit_path);
void session_close(session *s);

/* Ctrl-C while jobs run: the signal is taken by a thread of its own, which cancels every
 * job registered here (a second Ctrl-C, or 5 s without the answers, exits 5 at once). With
 * no job registered, Ctrl-C exits 130. Call before session_open so every thread inherits
 * the blocked signal. */
void interrupt_start(void);
void interrupt_set_client(fetchd_client *client);
void interrupt_add_job(const char *job_id);
void interrupt_remove_job(const char *job_id);
/* Ctrl-C was pressed: no further URL is started. */
int interrupt_requested(void);
/* The progress bar left a line open on stderr: a message must start on a new line. */
void interrupt_progress_drawn(int drawn);
/* Ctrl-C exits 130 (simple commands): the default disposition would kill the process. */
void interrupt_exit_130(void);

/* ------------------------------------------------------------------ output */

/* How an answer is printed (the old client's modes). */
typedef enum print_mode {
    MODE_JSON,      /* the result, as jq prints it */
    MODE_BODY,      /* the HTTP body, byte-exact (fetch, upload) */
    MODE_NONE,      /* nothing (download) */
    MODE_STATUS, MODE_JOBS, MODE_PING, MODE_CANCEL, MODE_LOGGING, MODE_LIMIT, MODE_LIMITS,
    MODE_AUTH, MODE_AUTHS, MODE_TEXT,   /* TEXT: the result's "text" member as it is */
} print_mode;

/* commands.c: the human-readable forms of simple answers. */
void format_simple(buf *out, print_mode mode, json_t *result, const char *sock, const char *name);

/* A simple call on its own connection: params (owned, may be NULL), printed by mode; exits. */
_Noreturn void simple_call(const char *socket_opt, print_mode mode, const char *method, json_t *params,
                           const char *name);

/* The message of a JSON-RPC error as fetchctl prints it: "MESSAGE (code N): DETAIL". */
void rpc_error_text(buf *out, const fetchd_error *err, int64_t took_us);
/* Prints a libfetchd failure that is not a JSON-RPC error and returns its exit code (3). */
int connection_failure(const session *s, const fetchd_error *err);

int cmd_top(const char *socket_opt, int argc, char **argv);
int cmd_simple(const char *command, const char *socket_opt, int argc, char **argv);
int cmd_request(const char *command, const char *socket_opt, int argc, char **argv);

/* help.c: the whole help (fetchctl --help, and --help after any command). */
void print_usage(FILE *f);

#endif
