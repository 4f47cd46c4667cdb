/* floor: the libcurl multi floor for small GETs (benchmark, not a test).
 *
 *   floor URL TOTAL CONCURRENCY
 *
 * One process, one multi handle, CONCURRENCY easy handles that are reused, so connections are
 * reused too; keeps CONCURRENCY transfers in flight until TOTAL are done. Bodies are counted and
 * dropped. Prints {"requests":N,"ok":N,"errors":N,"seconds":S}; at CONCURRENCY 1 also each
 * request's latency (added to the multi handle -> its DONE message) as p50_us, p90_us, p99_us,
 * max_us. Bounded: gives up after 120 s.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "bench_io.h"

static size_t sink(char *p, size_t s, size_t n, void *ud) { (void)p; *(long *)ud += (long)(s * n); return s * n; }

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: floor URL TOTAL CONCURRENCY\n"); return 2; }
    const char *url = argv[1];
    long total = atol(argv[2]); int conc = atoi(argv[3]);
    if (total <= 0 || conc <= 0 || conc > 4096) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)conc, sizeof *h);
    long *bytes = calloc((size_t)conc, sizeof *bytes);
    long started = 0, done = 0, ok = 0, err = 0;
    double *lat = conc == 1 ? calloc((size_t)total, sizeof *lat) : NULL, added_at = 0;
    for (int i = 0; i < conc; i++) {
        h[i] = curl_easy_init();
        curl_easy_setopt(h[i], CURLOPT_URL, url);
        curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &bytes[i]);
        curl_easy_setopt(h[i], CURLOPT_PRIVATE, (void *)(long)i);
        curl_easy_setopt(h[i], CURLOPT_NOSIGNAL, 1L);       /* as a multi-threaded daemon must */
    }
    double t0 = now(), deadline = t0 + 120;
    for (int i = 0; i < conc && started < total; i++) { curl_multi_add_handle(m, h[i]); started++; }
    added_at = now();
    while (done < total && now() < deadline) {
        int running;
        curl_multi_perform(m, &running);
        CURLMsg *msg; int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) continue;
            CURL *e = msg->easy_handle; long code = 0; void *priv;
            curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
            curl_easy_getinfo(e, CURLINFO_PRIVATE, &priv);
            if (msg->data.result == CURLE_OK && code == 200) ok++; else err++;
            double t = now();
            if (lat) lat[done] = t - added_at;
            done++;
            curl_multi_remove_handle(m, e);
            if (started < total) { curl_multi_add_handle(m, e); started++; added_at = now(); }
        }
        if (done < total) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    double t1 = now();
    printf("{\"requests\":%ld,\"ok\":%ld,\"errors\":%ld,\"seconds\":%.6f", total, ok, err, t1 - t0);
    if (lat) print_latencies(lat, done);
    printf("}\n");
    for (int i = 0; i < conc; i++) { curl_multi_remove_handle(m, h[i]); curl_easy_cleanup(h[i]); }
    curl_multi_cleanup(m);
    return (err || ok != total) ? 1 : 0;
}
