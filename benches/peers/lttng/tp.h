/*
 * LTTng-UST tracepoint provider for the peer benchmark: one event,
 * ttrace_bench:point, with five uint64 fields a..e (the same payload as
 * ttrace's "enabled point, 5 words" row).
 *
 * Written for the LTTng-UST 2.13 API (LTTNG_UST_* macros).
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER ttrace_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./tp.h"

#if !defined(TTRACE_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define TTRACE_BENCH_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
	ttrace_bench,
	point,
	LTTNG_UST_TP_ARGS(
		uint64_t, a,
		uint64_t, b,
		uint64_t, c,
		uint64_t, d,
		uint64_t, e
	),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, a, a)
		lttng_ust_field_integer(uint64_t, b, b)
		lttng_ust_field_integer(uint64_t, c, c)
		lttng_ust_field_integer(uint64_t, d, d)
		lttng_ust_field_integer(uint64_t, e, e)
	)
)

#endif /* TTRACE_BENCH_TP_H */

#include <lttng/tracepoint-event.h>
