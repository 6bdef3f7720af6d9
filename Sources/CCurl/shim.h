#ifndef KASSA_CCURL_SHIM_H
#define KASSA_CCURL_SHIM_H

#include <curl/curl.h>

/* curl_easy_setopt / curl_easy_getinfo / curl_multi_setopt are variadic,
   which Swift cannot call: typed wrappers, one per argument kind. */
static inline CURLcode kassa_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode kassa_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode kassa_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode kassa_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*kassa_data_callback)(char *, size_t, size_t, void *);
static inline CURLcode kassa_easy_setopt_datafn(CURL *h, CURLoption o, kassa_data_callback f) { return curl_easy_setopt(h, o, f); }

static inline CURLcode kassa_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode kassa_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode kassa_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode kassa_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/* The value of CURLMSG_DONE's result lives in a union. */
static inline CURLcode kassa_msg_result(CURLMsg *m) { return m->data.result; }

#endif
