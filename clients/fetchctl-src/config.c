/* curl's config files (-K) and the table of which options take a value, shared by the
 * command line and the config file reader. */
#define _GNU_SOURCE
#include "request.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Short options that take a value: in a combined word the rest of the word is the value. */
const char SHORT_WITH_VALUE[] = "XHdoFuAmbceDwrxTKC";

static const char *const LONG_WITH_VALUE[] = {
    "--request", "--header", "--data", "--data-ascii", "--data-raw", "--data-binary", "--data-urlencode",
    "--json", "--form", "--output", "--timeout", "--max-time", "--connect-timeout", "--max-redirects",
    "--max-redirs", "--retry", "--comment", "--stubs", "--job-id", "--query", "--user-agent", "--user",
    "--cookie-jar", "--priority", "--max-body-bytes", "--sha256", "--socket", "--continue-at", "--referer",
    "--jar", "--cookie", "--write-out", "--cacert", "--cert", "--key", "--resolve", "--range",
    "--unix-socket", "--limit-rate", "--proxy", "--noproxy", "--dump-header", "--upload-file", "--config",
    "--retry-delay", "--retry-max-time", "--url", "--parallel-max", "--output-dir", "--cache", NULL,
};

int takes_value(const char *opt) {
    if (opt[0] == '-' && opt[1] && opt[1] != '-' && !opt[2])
        return strchr(SHORT_WITH_VALUE, opt[1]) != NULL;
    for (const char *const *p = LONG_WITH_VALUE; *p; p++)
        if (!strcmp(*p, opt))
            return 1;
    return 0;
}

void words_insert(words *w, size_t pos, char *word) {
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 32;
        w->v = xrealloc(w->v, w->cap * sizeof *w->v);
    }
    memmove(w->v + pos + 1, w->v + pos, (w->n - pos) * sizeof *w->v);
    w->v[pos] = word;
    w->n++;
}

/* curl's config file syntax (-K): one option a line, "--name value", "name = value",
 * "name: value" (a name without dashes is a long option); "#" starts a comment line; a value
 * in double quotes may hold spaces and \" \\ \n \t \r \v escapes; "url = URL" adds a URL.
 * The options are put where -K FILE was. */
void read_config(words *w, const char *file, int silent, int show_error) {
    size_t len;
    char *text = (!strcmp(file, "-") || readable_file(file)) ? read_file(file, &len) : NULL;
    if (!text) {
        if (!silent || show_error)
            say("cannot read config file '%s'", file);
        exit(26);
    }
    size_t pos = w->at;
    char *cursor = text, *p;
    while ((p = next_line(&cursor, text + len))) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            continue;
        char *name_end = p;
        while (*name_end && !isspace((unsigned char)*name_end) && *name_end != '=' && *name_end != ':')
            name_end++;
        char *name = *p == '-' ? xstrndup(p, (size_t)(name_end - p))
                               : xasprintf("--%.*s", (int)(name_end - p), p);
        char *rest = name_end;
        while (isspace((unsigned char)*rest))
            rest++;
        if (*rest == '=' || *rest == ':') {
            rest++;
            while (isspace((unsigned char)*rest))
                rest++;
        }
        if (!*rest) {
            words_insert(w, pos++, name);
            continue;
        }
        buf value = {0};
        buf_add(&value, "", 0);
        if (*rest == '"') {
            for (char *c = rest + 1; *c && *c != '"'; c++) {
                if (*c == '\\' && c[1]) {
                    c++;
                    switch (*c) {
                    case 'n': buf_addc(&value, '\n'); break;
                    case 't': buf_addc(&value, '\t'); break;
                    case 'r': buf_addc(&value, '\r'); break;
                    case 'v': buf_addc(&value, '\v'); break;
                    default: buf_addc(&value, *c);
                    }
                } else {
                    buf_addc(&value, *c);
                }
            }
        } else {
            char *v_end = rest;
            while (*v_end && !isspace((unsigned char)*v_end))
                v_end++;
            buf_add(&value, rest, (size_t)(v_end - rest));
        }
        words_insert(w, pos++, name);
        if (takes_value(name))
            words_insert(w, pos++, value.data);
        else
            buf_free(&value);
    }
    free(text);
}
