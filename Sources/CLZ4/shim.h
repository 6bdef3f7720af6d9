#ifndef KASSA_CLZ4_SHIM_H
#define KASSA_CLZ4_SHIM_H

/* LZ4's block format: the event log keeps long event data compressed (KassaStore/EventData). */
#include <lz4.h>

#endif
