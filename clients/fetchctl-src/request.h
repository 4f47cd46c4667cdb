/* fetch / download / upload: the command line as parsed (args.c), the params built from it
 * (request.c), one URL's run and output (transfer.c, answer.c, writeout.c). */
#ifndef FETCHCTL_REQUEST_H
#define FETCHCTL_REQUEST_H

#include <pthread.h>
#include <string.h>

#include "fetchctl.h"

/* One ordered item of the command line (headers, data, form parts, query, resolve). */
typedef enum item_kind {
    ITEM_HEADER,        /* a: name, b: value ("" with 'Name;') */
    ITEM_REMOVE,        /* a: name ('Name:' leaves out a header the daemon would send) */
    ITEM_DATA,          /* a: data as given (-d, --data-raw, ...) */
    ITEM_URLENCODE,     /* a: --data-urlencode's argument */
    ITEM_FORM_FILE,     /* a: field, b: path (absolute), c: type or NULL, d: filename or NULL */
    ITEM_FORM_FIELD,    /* a: field, b: value */
    ITEM_QUERY,         /* a: name, b: value */
    ITEM_RESOLVE,       /* a: host:port, b: address */
} item_kind;

typedef struct item {
    item_kind kind;
    char *a, *b, *c, *d;
} item;

typedef enum body_kind {
    BODY_NONE, BODY_DATA, BODY_FILE, BODY_STDIN, BODY_JSON, BODY_FORM, BODY_TFILE, BODY_TSTDIN,
} body_kind;

/* Where the nth URL's body goes: -o FILE, -o -, -O, or nothing given. */
typedef struct out_spec {
    enum { OUT_DEFAULT, OUT_STDOUT, OUT_FILE, OUT_REMOTE_NAME } kind;
    char *path;
} out_spec;

typedef struct request_opts {
    const char *command;        /* fetch, download, upload */
    char *socket;               /* --socket */
    char **urls;
    size_t n_urls;
    out_spec *outs;
    size_t n_outs;
    item *items;
    size_t n_items;
    char *method;
    body_kind body;
    char *body_file;            /* absolute path: --data-binary @FILE, -T FILE */
    buf json_text;              /* --json, joined */
    char *upload_name;          /* -T FILE's base name (added to a URL ending in /) */
    char *upload_unreadable;    /* -T FILE that cannot be read (exit 26 before sending) */
    char **data_warnings;
    size_t n_warnings;
    int get;                    /* -G */
    char *user;                 /* -u */
    /* routing and limits: JSON members added as they are */
    json_t *routing;
    char *timeout, *max_time, *connect_timeout, *max_redirects, *retry, *retry_delay, *retry_max_time;
    int retry_all;
    char *priority, *max_body, *comment, *stubs, *job_id, *cache;
    char *jar;                  /* --jar NAME */
    int no_cookies;
    char *cookie_in, *cookie_out;   /* -b FILE, -c FILE (absolute) */
    int json_result;
    int has_form;
    int overwrite, no_resume, continue_at;
    char *sha256;
    int create_dirs;
    char *output_dir;
    int remove_on_error;
    int location;               /* -L */
    int fail;                   /* 1 --fail, 2 --fail-with-body */
    int silent, show_error, progress, include, head, verbose;
    char *dump_header;
    char *write_out;
    int parallel;
    long parallel_max;
    unsigned char *stdin_data;  /* -T -, --data-binary @- read whole (several URLs) */
    size_t stdin_len;
    int stdin_streams;          /* -T -, --data-binary @-: stdin handed to the daemon (bodyFrom) */
    int stdout_closed;          /* fetchctl started with fd 1 closed */
} request_opts;

/* args.c: parses the command's arguments (after the command name); exits 2 on a usage error. */
void parse_request_args(request_opts *o, const char *command, int argc, char **argv);

/* config.c: the words of the command line still to read (-K files and split short flags are
 * put in where they were). */
typedef struct words {
    char **v;
    size_t n, cap, at;
} words;

void words_insert(words *w, size_t pos, char *word);
/* Short options that take a value: in a combined word the rest of the word is the value. */
extern const char SHORT_WITH_VALUE[];
int takes_value(const char *opt);
/* -K FILE's options, put in w at w->at; exits 26 when FILE cannot be read. */
void read_config(words *w, const char *file, int silent, int show_error);

/* Where fetch's response body goes, chosen per URL in transfer.c's plan(). */
typedef enum body_route {
    ROUTE_ANSWER,         /* in the answer (base64), written by fetchctl */
    ROUTE_DAEMON_FILE,    /* -o FILE written by the daemon (a download) */
    ROUTE_FD,             /* body_fd (fetchctl's stdout, or -o FILE that is not a regular file)
                           * handed to the daemon (bodyTo: "fd"), which writes the body to it as
                           * it arrives */
    ROUTE_CHUNKS,         /* responseBody "stream": the head first, then bodyChunk notifications
                           * that fetchctl writes to body_fd (-f: an error's body is dropped) */
    ROUTE_EVENTS,         /* fetchctl events: responseBody "events", each sseEvent printed */
} body_route;

/* fetch and events take curl's command line with curl's defaults (events is a fetch whose
 * body is read as Server-Sent Events); download and upload are fetchctl's own. */
static inline int curl_like(const request_opts *o) {
    return !strcmp(o->command, "fetch") || !strcmp(o->command, "events");
}

/* One URL's run: what the result of parsing says about it, and what came back. */
typedef struct transfer {
    const request_opts *o;
    size_t index;               /* the nth URL (curl's urlnum) */
    char *url;                  /* as given */
    char *job_id;
    const char *rpc_method;     /* fetch, download, upload */
    body_route route;
    print_mode mode;
    char *out_file;             /* -o FILE / -O (relative as given, with --output-dir) */
    char *dl_path;              /* download: the absolute path the daemon writes */
    int overwrite, no_resume;
    char *range;                /* -C -: the range asked for */
    char *resume_tmp;           /* -C - streamed: the temporary file the daemon writes */
    int64_t resume_from;
    char *cookie_jar;           /* the daemon's jar for this command */
    char *multipart_tmp;        /* a client-built multipart body on disk (removed at the end) */
    int exchange;               /* the hops' headers are asked for */
    int64_t t_sent;
    int progress_drawn;
    int64_t progress_t0;
    int wrote_file;             /* -o FILE was opened for this answer */
    int body_refused;           /* -C - and no range in the answer: curl reads none of its body */
    int64_t stdin_size;         /* bodyFrom: stdin's bytes when it is a regular file, else -1 */
    int body_fd;                /* ROUTE_FD, ROUTE_CHUNKS: where the body goes */
    int body_fd_opened;         /* body_fd is -o FILE's, opened by plan() */
    int drop_chunks;            /* ROUTE_CHUNKS: -f and an error status, nothing is written */
    int stdout_failed;          /* ROUTE_CHUNKS, ROUTE_EVENTS: the output could not take the bytes
                                 * (curl's 23) */
    /* what -w needs, filled from the answer */
    json_t *result;
    int status;
    int exit_code;
    char *errormsg;
} transfer;

/* request.c: the params of one transfer (new reference); exits 2 on a usage error. */
json_t *build_params(transfer *t);
/* curl's content type for a file name sent with -F. */
const char *curl_mime_type(const char *filename);

/* transfer.c: runs every URL of the command and returns its exit status. */
int run_request(request_opts *o);

/* answer.c: the callbacks of ROUTE_CHUNKS (fetchd_stream_callbacks, user data the transfer). */
int on_stream_head(int status, json_t *head, void *user_data);
int on_stream_chunk(const unsigned char *data, size_t len, void *user_data);
/* fetchctl events: each event as event:, id: and data: lines, then a blank line. */
int on_stream_event(const char *event, const char *data, const char *id, void *user_data);

/* answer.c: prints a transfer's answer (or error) and returns the exit status. */
int handle_answer(session *s, transfer *t, fetchd_status st, json_t *result, const fetchd_error *err,
                  pthread_mutex_t *output_lock);
/* Progress notifications of a job (a fetchd_progress_fn). */
int on_progress(const char *method, json_t *params, void *user_data);

/* writeout.c: -w FORMAT after the body. */
void write_out(const transfer *t, const char *format, int http_code, int exit_code, const char *errormsg);

/* cookies.c: -b FILE into the jar, -c FILE from it. */
int load_netscape(session *s, const char *path, const char *jar);
int save_netscape(session *s, const char *path, const char *jar, int silent, int show_error);
void clear_jar(session *s, const char *jar);

/* multipart.c: -F parts in command-line order, when the daemon's upload cannot keep it. */
int form_needs_client_body(const request_opts *o);
/* Adds the body (bodyBase64 or bodyFile) and Content-Type to params; *tmp_path is set when a
 * temporary file holds it. Returns 0, or curl's 26 when a file cannot be read. */
int add_client_multipart(const request_opts *o, json_t *params, json_t *headers, char **tmp_path);

#endif
