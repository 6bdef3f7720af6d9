#ifndef KASSA_CLIBWEBSOCKETS_SHIM_H
#define KASSA_CLIBWEBSOCKETS_SHIM_H

#include <libwebsockets.h>
#include <ev.h>
#include <stdlib.h>

/* Macros Swift cannot import, re-exported as constants. */
static const size_t kassa_lws_pre = LWS_PRE;
/* Written as is, no framing: for frames Kassa builds itself (WebSocketFraming). */
static const enum lws_write_protocol kassa_lws_write_raw = LWS_WRITE_RAW;

/* The libev loop libwebsockets runs on (its evlib plugin): epoll instead of a poll()
 * over every descriptor on each pass. libev's calls are macros over EV_P, wrapped here. */
static inline struct ev_loop *kassa_ev_loop_new(void) { return ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK); }
static inline void kassa_ev_run(struct ev_loop *loop) { ev_run(loop, 0); }
static inline void kassa_ev_break(struct ev_loop *loop) { ev_break(loop, EVBREAK_ALL); }
static inline void kassa_ev_loop_destroy(struct ev_loop *loop) { ev_loop_destroy(loop); }

/* lws 4.1's libev glue re-arms its timer list (pings, timeouts) only after I/O; a
 * periodic wake-up through its cancel pipe keeps timers running on a quiet loop. */
static void kassa_ev_tick(struct ev_loop *loop, ev_timer *timer, int revents) {
    (void)loop; (void)revents;
    lws_cancel_service((struct lws_context *)timer->data);
}
static inline ev_timer *kassa_ev_tick_start(struct ev_loop *loop, struct lws_context *context, double seconds) {
    ev_timer *timer = (ev_timer *)malloc(sizeof(ev_timer));
    ev_timer_init(timer, kassa_ev_tick, seconds, seconds);
    timer->data = context;
    ev_timer_start(loop, timer);
    return timer;
}
static inline void kassa_ev_tick_stop(struct ev_loop *loop, ev_timer *timer) {
    ev_timer_stop(loop, timer);
    free(timer);
}

/* A prepare watcher: `run(data)` on each pass of the loop, just before libev hands the pass's
 * descriptor changes to epoll (a watcher started and stopped again before then costs no system call). */
typedef struct { ev_prepare watcher; void (*run)(void *); void *data; } kassa_ev_prepare;
static void kassa_ev_prepared(struct ev_loop *loop, ev_prepare *watcher, int revents) {
    (void)loop; (void)revents;
    kassa_ev_prepare *prepare = (kassa_ev_prepare *)watcher;
    prepare->run(prepare->data);
}
static inline kassa_ev_prepare *kassa_ev_prepare_start(struct ev_loop *loop, void (*run)(void *), void *data) {
    kassa_ev_prepare *prepare = (kassa_ev_prepare *)malloc(sizeof(kassa_ev_prepare));
    ev_prepare_init(&prepare->watcher, kassa_ev_prepared);
    prepare->run = run;
    prepare->data = data;
    ev_prepare_start(loop, &prepare->watcher);
    return prepare;
}
static inline void kassa_ev_prepare_stop(struct ev_loop *loop, kassa_ev_prepare *prepare) {
    ev_prepare_stop(loop, &prepare->watcher);
    free(prepare);
}

/* Services `wsi` as libwebsockets' libev glue does when epoll reports its socket writeable. */
static inline int kassa_lws_service_writeable(struct lws_context *context, struct lws *wsi) {
    struct lws_pollfd pollfd;
    pollfd.fd = lws_get_socket_fd(wsi);
    pollfd.events = LWS_POLLOUT;
    pollfd.revents = LWS_POLLOUT;
    return lws_service_fd(context, &pollfd);
}

#endif
