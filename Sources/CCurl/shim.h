#ifndef KASSA_CCURL_SHIM_H
#define KASSA_CCURL_SHIM_H

#include <curl/curl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

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

/* The curl thread waits on an epoll set of its own: libcurl names each socket to watch and what
   for (CURLMOPT_SOCKETFUNCTION), and when it next wants a call for its timers
   (CURLMOPT_TIMERFUNCTION). epoll_event is packed on x86_64, so Swift sees its fields through
   these helpers. */
static inline CURLMcode kassa_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode kassa_multi_setopt_socketfn(CURLM *m, curl_socket_callback f) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f); }
static inline CURLMcode kassa_multi_setopt_timerfn(CURLM *m, curl_multi_timer_callback f) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f); }
static const curl_socket_t kassa_curl_socket_timeout = CURL_SOCKET_TIMEOUT;
static inline CURLcode kassa_easy_setopt_closesocketfn(CURL *h, curl_closesocket_callback f) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, f); }

static inline int kassa_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int kassa_eventfd_create(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
static const uint32_t kassa_epoll_in = EPOLLIN, kassa_epoll_out = EPOLLOUT;
static const uint32_t kassa_epoll_err = EPOLLERR, kassa_epoll_hup = EPOLLHUP;
static const int kassa_epoll_add = EPOLL_CTL_ADD, kassa_epoll_mod = EPOLL_CTL_MOD, kassa_epoll_del = EPOLL_CTL_DEL;

/* epoll_ctl for `fd`, carrying the descriptor as the event's data. */
static inline int kassa_epoll_set(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event e = { .events = events, .data = { .fd = fd } };
    return epoll_ctl(epfd, op, fd, &e);
}

/* epoll_wait into two plain arrays (at most 64 events a call). */
static inline int kassa_epoll_wait(int epfd, int *fds, uint32_t *events, int capacity, int timeout_ms) {
    struct epoll_event ready[64];
    int n = epoll_wait(epfd, ready, capacity < 64 ? capacity : 64, timeout_ms);
    for (int i = 0; i < n; i++) { fds[i] = ready[i].data.fd; events[i] = ready[i].events; }
    return n;
}

/* The value of CURLMSG_DONE's result lives in a union. */
static inline CURLcode kassa_msg_result(CURLMsg *m) { return m->data.result; }

#endif
