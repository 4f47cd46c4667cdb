/* fetchctl --help, and COMMAND --help. */
#include "fetchctl.h"

#include <string.h>

/* Each command's lines of the command list: the first word is the command's name. */
static const char *const COMMANDS[] = {
    "  fetch URL... [OPTIONS]       fetch URL; the body goes to stdout (or -o FILE), byte-exact,\n"
    "                               as it arrives, whatever its size; curl's flags (below), so a\n"
    "                               script can call it for curl\n",
    "  events URL [OPTIONS]         Server-Sent Events: each event printed as it arrives, as\n"
    "                               'event:', 'id:' and 'data:' lines and a blank line; the\n"
    "                               daemon reconnects with Last-Event-ID; the request options\n"
    "                               of fetch (-H, -d, --json, -m...); Ctrl-C ends it\n",
    "  download URL -o FILE [OPTS]  stream URL to FILE inside the daemon (resumable)\n",
    "  upload URL -F name=@FILE...  multipart/form-data upload; the response body goes to stdout\n",
    "  status [--json]              the daemon's version, pid, uptime, job counters\n",
    "  jobs [--json]                the jobs the daemon is working on\n",
    "  cancel JOBID                 cancel a queued, running or retry-waiting job\n",
    "  attach [-f] [--progress] JOBID\n"
    "                               wait for a job (detached, durable, another client's) and\n"
    "                               print its result JSON; exits as fetch would have\n",
    "  wait [-f] JOBID...           wait until every job has ended; exits as fetch would have\n"
    "                               for the first that failed (0: all succeeded)\n",
    "  ping                         check that the daemon answers\n",
    "  call METHOD [PARAMS-JSON]    send any JSON-RPC request; prints the result JSON\n",
    "  logging on [DIR] | off       write a HAR file per finished job (to DIR)\n"
    "  logging                      show the logging state\n",
    "  limit HOST [--rps N|none] [--burst N] [--concurrent N|none]\n"
    "                               set the rate limit of HOST (name, name:port or '*');\n"
    "                               options left out keep their value\n",
    "  limits [--json]              show the rate limits in force and the busy hosts\n",
    "  metrics [--json]             the daemon's metrics in Prometheus' text format (--json:\n"
    "                               the same as JSON)\n",
    "  top [--interval S] [--once]  live view of every job, host and client (q or Ctrl-C quits)\n",
    "  cache [stats | purge [URL | --prefix PREFIX]]\n"
    "                               the daemon's HTTP cache: its counters, or drop answers\n",
    "  auth HOST --bearer-file F | --basic USER:PASSFILE | --helper CMD [ARG...] |\n"
    "       --oauth2 TOKEN_URL --client-id ID --client-secret-file F [--scope S] [--audience A] |\n"
    "       --aws-sigv4 PROVIDER --credentials-file F [--profile P] | --remove\n"
    "                               set (or remove) the auth rule of HOST (name, name:port or\n"
    "                               *.domain): the daemon adds the credential to its requests;\n"
    "                               secrets are only ever read from files (see docs/auth.md)\n"
    "  auth [--json]                list the auth rules (never a secret)\n",
    "  cookies [URL] [--jar NAME]   list cookies (those a request to URL would send)\n"
    "  cookies clear [DOMAIN] [--jar NAME]\n"
    "                               remove cookies\n",
    "  stub add [--set SET] JSON    add a stub: JSON is addStub's params ({\"match\", \"respond\"...})\n"
    "  stub list [--set SET]        the stubs with their hits, and the last misses (JSON)\n"
    "  stub remove [--set SET] [STUBID]\n"
    "                               remove one stub, a set's, or every stub\n"
    "  stub load --set SET FILE.har a HAR file's exchanges as stubs of SET\n"
    "  stub record --set SET FILE.har\n"
    "                               record SET's misses (from the network) to SET and FILE.har\n",
};

static const char REQUEST_OPTIONS[] =
    "Request options (fetch, download, upload, events):\n"
    "  -X, --request METHOD         HTTP method (default GET, or POST with a body)\n"
    "  -H, --header 'Name: value'   add a request header (repeatable); 'Name:' leaves out a\n"
    "                               header the daemon would send, 'Name;' sends it empty,\n"
    "                               @FILE reads one header per line\n"
    "  -d, --data DATA              body (repeatable, joined with '&'); -d @FILE reads FILE\n"
    "                               (newlines stripped, as curl does)\n"
    "      --data-raw DATA          like -d, no @FILE\n"
    "      --data-binary DATA       body as is; --data-binary @FILE streams FILE exactly,\n"
    "                               @- streams stdin\n"
    "      --data-urlencode DATA    like -d, with the value percent-encoded\n"
    "      --json JSON              JSON body, sent as written (--json @FILE reads FILE); adds\n"
    "                               Accept: application/json\n"
    "  -F, --form name=value        multipart field; name=@FILE[;type=MIME][;filename=NAME]\n"
    "                               attaches a file, name=<FILE reads the field value from FILE;\n"
    "                               the parts are sent in the order given\n"
    "  -G, --get                    put the -d data into the URL's query instead of the body\n"
    "                               (in the order given, as curl)\n"
    "      --query NAME=VALUE       add a query parameter (percent-encoded by the daemon)\n"
    "  -A, --user-agent UA          User-Agent header\n"
    "  -u, --user USER:PASSWORD     HTTP basic authentication\n"
    "  -o, --output FILE            write the body to FILE instead of stdout (-o - : stdout)\n"
    "  -O, --remote-name            write the body to the URL's last path segment (in .)\n"
    "      --output-dir DIR         put the -o and -O files in DIR\n"
    "      --create-dirs            create the directories of -o FILE (and --output-dir)\n"
    "      --remove-on-error        remove the -o file when the transfer fails\n"
    "  -C, --continue-at -          fetch: continue -o FILE where it ends (a range request,\n"
    "                               added to the file); download: resume the .part (default)\n"
    "  -i, --include                print the response headers (every hop) before the body\n"
    "  -I, --head                   HEAD: print the response headers only\n"
    "  -D, --dump-header FILE       write the response headers to FILE (- : stdout)\n"
    "  -v, --verbose                request ('> ') and response ('< ') headers on stderr\n"
    "  -T, --upload-file FILE       PUT FILE (- : stdin, streamed, chunked); a URL ending in /\n"
    "                               gets FILE's name\n"
    "  -K, --config FILE            read options from FILE in curl's config syntax (- : stdin)\n"
    "      --url URL                a URL (several URLs run one after the other; the nth -o or\n"
    "                               -O is the nth URL's; the exit status is the last one's)\n"
    "  -Z, --parallel               run the URLs at the same time (the exit status is the\n"
    "                               last failure's, as curl -Z)\n"
    "      --parallel-max N         at most N of them at once (default 50, at most 300)\n"
    "  -f, --fail                   exit 22 (and print no body) when the HTTP status is >= 400\n"
    "      --fail-with-body         as --fail, but print the body\n"
    "      --json-result            print the whole result object (JSON) instead of the body\n"
    "  -m, --max-time SECONDS       a limit on the whole command, retries included (maxTime):\n"
    "                               past it, exit 28\n"
    "      --timeout SECONDS        per-attempt timeout, whole transfer\n"
    "      --connect-timeout SECONDS\n"
    "  -L, --location               fetch: follow redirects (up to 10, or --max-redirs N);\n"
    "                               fetch does NOT follow them unless -L, as curl: without -L\n"
    "                               a redirect is the answer (download and upload follow\n"
    "                               redirects by default)\n"
    "      --max-redirs N           with -L, follow at most N redirects (also --max-redirects)\n"
    "      --retry N                retry up to N times (0 = never retry); fetch does not\n"
    "                               retry unless given, as curl\n"
    "      --retry-delay S          wait S seconds before each retry (instead of the backoff)\n"
    "      --retry-max-time S       start no retry later than S seconds after the first attempt\n"
    "      --retry-all-errors       retry every failure (with -f, every HTTP error too)\n"
    "      --cache MODE             the daemon's HTTP cache: default, no-store, reload,\n"
    "                               no-cache, force-cache or only-if-cached; fetch uses\n"
    "                               no-cache unless given (always current, as curl)\n"
    "      --progress               progress bar on stderr (also -#, --progress-bar)\n"
    "      --jar NAME               use the daemon's named cookie jar; --no-cookies: none\n"
    "  -b, --cookie FILE|DATA       fetch: load a Netscape cookie file (or send DATA 'a=1; b=2')\n"
    "  -c, --cookie-jar FILE        fetch: write the cookies to FILE at the end (Netscape\n"
    "                               format, as curl); fetch uses no cookies unless -b, -c, --jar\n"
    "      --priority N             higher starts first among jobs waiting for the same host\n"
    "      --max-body-bytes N       fail with bodyTooLarge past N bytes (fetch)\n"
    "      --comment TEXT           shown in the daemon's logs and 'fetchctl jobs'\n"
    "      --stubs SET              answer from the stub set SET (see 'fetchctl stub')\n"
    "      --job-id ID              choose the job id (default fetchctl-<pid>-<random>)\n"
    "  download only:  --overwrite, --no-resume, --sha256 HEX, -C - (resume; the default)\n"
    "  -w, --write-out FORMAT       after the body, print FORMAT with curl's variables:\n"
    "                               %{http_code} %{response_code} %{url_effective} %{content_type}\n"
    "                               %{size_download} %{size_upload} %{num_redirects} %{remote_ip}\n"
    "                               %{exitcode} %{errormsg} %{time_total} %{time_namelookup}\n"
    "                               %{time_connect} %{time_appconnect} %{time_starttransfer}\n"
    "                               %{http_version} %{method} %{scheme} %{url} %{urlnum}\n"
    "                               %{redirect_url} %{filename_effective} %{header_json} %{json};\n"
    "                               \\n \\t \\r; @FILE\n"
    "  -k, --insecure               do not verify the server's certificate\n"
    "      --cacert FILE            verify the server with this PEM bundle\n"
    "      --cert FILE, --key FILE  client certificate and key (PEM) for mutual TLS\n"
    "      --resolve HOST:PORT:ADDR connect to ADDR for HOST:PORT\n"
    "      --http1.1, --http2       the HTTP version to use\n"
    "  -r, --range START-[END]      ask for a byte range\n"
    "      --unix-socket PATH       HTTP over a Unix socket\n"
    "  -x, --proxy URL              use this proxy (http, https, socks5, socks5h; user:pass@ allowed)\n"
    "      --noproxy HOSTS          hosts reached without the proxy\n"
    "      --limit-rate RATE        cap the bandwidth both ways (bytes/s, K/M/G suffixes)\n"
    "  -s, --silent                 no messages (failures included, unless -S, --show-error)\n"
    "  -e, --referer URL            Referer header\n"
    "      --compressed             accepted for curl compatibility (bodies are always asked\n"
    "                               for compressed and decoded)\n"
    "  -N, --no-buffer              accepted for curl compatibility (a body to stdout is\n"
    "                               written as it arrives)\n"
    "  Short flags combine as in curl: -fsSL, -sSo FILE, -oFILE.\n";

static const char GLOBAL_OPTIONS[] =
    "Global options:\n"
    "  --socket PATH                daemon socket (default: $FETCHD_SOCKET, else\n"
    "                               $XDG_RUNTIME_DIR/fetchd.sock, else\n"
    "                               /tmp/fetchd-<uid>/fetchd.sock). A socket owned by another\n"
    "                               user than you or root, or on a path another user could\n"
    "                               change (their directory, or one others may write that is\n"
    "                               not sticky), is refused with exit 3; nothing is sent\n"
    "  -h, --help                   this help (also after any command: fetchctl fetch --help)\n"
    "  -V, --version                the client's version\n";

static const char EXIT_CODES[] =
    "Ctrl-C during a fetch or events cancels the job in the daemon (exit 5).\n"
    "Exit codes: 0 done, 2 usage, 3 daemon unreachable or refused, 4 JSON-RPC error, 5 cancelled,\n"
    "22 HTTP status >= 400 with --fail (events: always), 23 cannot write the output (a file, or\n"
    "stdout's reader is gone), 26 cannot read the -T file or stdin;\n"
    "a failed fetch exits with curl's code: 1 unsupported answer, 6 could not resolve, 7\n"
    "could not connect, 28 timeout, 33 -C - and the server ignored the range, 35 TLS handshake,\n"
    "47 too many redirects, 52 empty reply, 56 receive failure, 60 certificate not trusted.\n";

void print_usage(FILE *f) {
    fputs("Usage: fetchctl [--socket PATH] COMMAND [ARGS...]\n\nCommands:\n", f);
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        fputs(COMMANDS[i], f);
    fputc('\n', f);
    fputs(REQUEST_OPTIONS, f);
    fputc('\n', f);
    fputs(GLOBAL_OPTIONS, f);
    fputc('\n', f);
    fputs(EXIT_CODES, f);
}
