/*
 * Instantiates the tracepoint provider (probe code and tracepoint
 * definitions), statically linked into the benchmark program.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "tp.h"
