#ifndef KASSA_CLIBWEBSOCKETS_SHIM_H
#define KASSA_CLIBWEBSOCKETS_SHIM_H

#include <libwebsockets.h>

/* Macros Swift cannot import, re-exported as constants. */
static const size_t kassa_lws_pre = LWS_PRE;

#endif
