#ifndef FETCHD_CCURL_SHIM_H
#define FETCHD_CCURL_SHIM_H
#include <curl/curl.h>

/* Swift cannot call C variadic functions: typed wrappers for the ones fetchd uses. */

static inline CURLcode fetchd_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode fetchd_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode fetchd_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode fetchd_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode fetchd_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*fetchd_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*fetchd_xferinfo_cb)(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
typedef int (*fetchd_seek_cb)(void *userdata, curl_off_t offset, int origin);

static inline CURLcode fetchd_easy_setopt_data_cb(CURL *h, CURLoption o, fetchd_data_cb cb) { return curl_easy_setopt(h, o, cb); }
static inline CURLcode fetchd_easy_setopt_xferinfo_cb(CURL *h, fetchd_xferinfo_cb cb) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cb); }
typedef int (*fetchd_debug_cb)(CURL *handle, curl_infotype type, char *data, size_t size, void *userdata);
static inline CURLcode fetchd_easy_setopt_debug_cb(CURL *h, fetchd_debug_cb cb) { return curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, cb); }
static inline CURLcode fetchd_easy_setopt_seek_cb(CURL *h, fetchd_seek_cb cb) { return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, cb); }

static inline CURLcode fetchd_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode fetchd_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode fetchd_easy_getinfo_str(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode fetchd_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode fetchd_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/* CURLMsg's data is a union; read it here. */
static inline CURLcode fetchd_msg_result(CURLMsg *m) { return m->data.result; }

/* The features this libcurl was built with (curl_version_info: CURL_VERSION_LIBZ, ...). */
static inline int fetchd_curl_features(void) { return curl_version_info(CURLVERSION_NOW)->features; }
static inline int fetchd_feature_libz(void) { return CURL_VERSION_LIBZ; }
static inline int fetchd_feature_brotli(void) { return CURL_VERSION_BROTLI; }
static inline int fetchd_feature_zstd(void) { return CURL_VERSION_ZSTD; }

/* Constants that are macros Swift may not import. */
static inline long fetchd_http_version_2tls(void) { return CURL_HTTP_VERSION_2TLS; }
static inline long fetchd_http_version_1_1(void) { return CURL_HTTP_VERSION_1_1; }
static inline long fetchd_http_version_2(void) { return CURL_HTTP_VERSION_2_0; }
static inline int fetchd_readfunc_abort(void) { return CURL_READFUNC_ABORT; }
static inline int fetchd_seekfunc_ok(void) { return CURL_SEEKFUNC_OK; }
static inline int fetchd_seekfunc_fail(void) { return CURL_SEEKFUNC_FAIL; }
static inline long fetchd_global_all(void) { return CURL_GLOBAL_ALL; }
static inline size_t fetchd_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
static inline CURLcode fetchd_easy_unpause(CURL *h) { return curl_easy_pause(h, CURLPAUSE_CONT); }
/* Cookie jars: one share per jar, and reading a jar's cookies as Netscape lines. */
static inline CURLSHcode fetchd_share_setopt_long(CURLSH *s, CURLSHoption o, long v) { return curl_share_setopt(s, o, v); }
static inline CURLcode fetchd_easy_getinfo_slist(CURL *h, CURLINFO i, struct curl_slist **v) { return curl_easy_getinfo(h, i, v); }
/* A jar's share is used by the transfers of both engine threads (small requests and bulk
   transfers), so libcurl locks it: one mutex per kind of shared data, as the libcurl docs'
   example does. The mutexes live as long as the share (fetchd_share_free). */
#include <pthread.h>
#include <stdlib.h>
typedef struct { pthread_mutex_t m[CURL_LOCK_DATA_LAST]; } fetchd_share_locks;
static void fetchd_share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *u) {
    (void)h; (void)a;
    pthread_mutex_lock(&((fetchd_share_locks *)u)->m[d < CURL_LOCK_DATA_LAST ? d : 0]);
}
static void fetchd_share_unlock(CURL *h, curl_lock_data d, void *u) {
    (void)h;
    pthread_mutex_unlock(&((fetchd_share_locks *)u)->m[d < CURL_LOCK_DATA_LAST ? d : 0]);
}
/* A new share with locking, sharing `data` (CURL_LOCK_DATA_COOKIE); NULL without memory.
   `*locks` is for fetchd_share_free. */
static inline CURLSH *fetchd_share_new(long data, void **locks_out) {
    fetchd_share_locks *locks = malloc(sizeof *locks);
    if (!locks) return NULL;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_init(&locks->m[i], NULL);
    CURLSH *s = curl_share_init();
    if (!s) { free(locks); return NULL; }
    curl_share_setopt(s, CURLSHOPT_LOCKFUNC, fetchd_share_lock);
    curl_share_setopt(s, CURLSHOPT_UNLOCKFUNC, fetchd_share_unlock);
    curl_share_setopt(s, CURLSHOPT_USERDATA, (void *)locks);
    curl_share_setopt(s, CURLSHOPT_SHARE, data);
    *locks_out = locks;
    return s;
}
/* Frees a share made by fetchd_share_new (every handle detached first). */
static inline void fetchd_share_free(CURLSH *s, void *locks) {
    curl_share_cleanup(s);
    fetchd_share_locks *l = locks;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) pthread_mutex_destroy(&l->m[i]);
    free(l);
}
/* Open connections, counted where libcurl opens and closes its sockets (engine thread only,
   so one writer: a relaxed load and store, no locked instruction). `counter` outlives every
   connection (the engine's). */
#include <sys/socket.h>
#include <unistd.h>
static curl_socket_t fetchd_counted_open(void *counter, curlsocktype purpose, struct curl_sockaddr *a) {
    (void)purpose;
    curl_socket_t s = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (s != CURL_SOCKET_BAD) __atomic_store_n((long *)counter, __atomic_load_n((long *)counter, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    return s;
}
static int fetchd_counted_close(void *counter, curl_socket_t s) {
    __atomic_store_n((long *)counter, __atomic_load_n((long *)counter, __ATOMIC_RELAXED) - 1, __ATOMIC_RELAXED);
    return close(s);
}
static inline void fetchd_easy_count_sockets(CURL *h, long *counter) {
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, fetchd_counted_open);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *)counter);
    curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, fetchd_counted_close);
    curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, (void *)counter);
}
static inline long fetchd_counter_load(const long *counter) { return __atomic_load_n(counter, __ATOMIC_RELAXED); }
#endif
