/*
 * Peer benchmark: cost of an LTTng-UST tracepoint with five uint64 fields,
 * next to a bare rdtsc loop measured in the same process, in the same way as
 * ttrace's Rust harness (benches/src/bin/hotpath.rs): one warm-up pass, then
 * REPS timed repetitions of ITERS iterations, timed with
 * clock_gettime(CLOCK_MONOTONIC); median, min and max ns per iteration.
 *
 * Usage:
 *   bench disabled ITERS REPS   no session has the event enabled
 *   bench enabled  ITERS REPS   the event is enabled in a recording session
 *   bench snapshot ITERS REPS   the event is enabled in a snapshot session
 *   bench record   COUNT        emit COUNT events, untimed (for decoding)
 *
 * The session itself is set up by benches/peers/lttng.sh; this program only
 * checks that the event's enabled state is the one its mode expects.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "tp.h"

#define MAX_REPS 1000

struct figure {
	double median, min, max;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static struct figure summarize(double *v, int reps)
{
	struct figure f;

	qsort(v, (size_t)reps, sizeof(v[0]), cmp_double);
	f.median = v[reps / 2];
	f.min = v[0];
	f.max = v[reps - 1];
	return f;
}

/*
 * Times BODY (which may use the loop index `i`) like the Rust harness's
 * measure(): a warm-up pass, then REPS timed passes. A macro rather than a
 * function taking a callback, so the body is inlined into the loop.
 */
#define MEASURE(fig, iters, reps, BODY)					\
	do {								\
		uint64_t n_ = (iters);					\
		double v_[MAX_REPS];					\
		for (uint64_t i = 0; i < n_; i++) {			\
			BODY;						\
		}							\
		for (int r_ = 0; r_ < (reps); r_++) {			\
			uint64_t t0_ = now_ns();			\
			for (uint64_t i = 0; i < n_; i++) {		\
				BODY;					\
			}						\
			v_[r_] = (double)(now_ns() - t0_) / (double)n_;	\
		}							\
		(fig) = summarize(v_, (reps));				\
	} while (0)

/* Keeps a value alive without emitting any instruction for it. */
#define SINK(x) __asm__ volatile("" : : "r"(x))

static void print_header(void)
{
	printf("%-36s %9s %9s %9s %8s\n", "path", "median ns", "min", "max",
	       "x rdtsc");
}

static void print_row(const char *name, struct figure f, double base)
{
	printf("%-36s%10.2f%10.2f%10.2f%8.2fx\n", name, f.median, f.min, f.max,
	       f.median / base);
}

/*
 * Liblttng-ust's constructor normally waits for the session daemon to hand
 * over the enabled events before main() runs; poll a little in case it gave
 * up early, then report whether the event's state is the expected one.
 */
static int check_state(int want_enabled)
{
	for (int tries = 0; tries < 50; tries++) {
		int on = lttng_ust_tracepoint_enabled(ttrace_bench, point) ? 1 : 0;

		if (on == want_enabled)
			return 0;
		if (!want_enabled)
			break;
		usleep(100 * 1000);
	}
	fprintf(stderr,
		"bench: ttrace_bench:point is %s, expected %s (is the session daemon running and the session started?)\n",
		want_enabled ? "disabled" : "enabled",
		want_enabled ? "enabled" : "disabled");
	return -1;
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v == 0) {
		fprintf(stderr, "bench: bad %s: %s\n", what, s);
		exit(2);
	}
	return (uint64_t)v;
}

__attribute__((noreturn)) static void usage(void)
{
	fprintf(stderr,
		"usage: bench {disabled|enabled|snapshot} ITERS REPS\n"
		"       bench record COUNT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	const char *mode = argv[1];

	if (strcmp(mode, "record") == 0) {
		if (argc != 3)
			usage();
		uint64_t count = parse_u64(argv[2], "COUNT");

		if (check_state(1))
			return 1;
		for (uint64_t i = 0; i < count; i++)
			lttng_ust_tracepoint(ttrace_bench, point, i, i, i, i, i);
		printf("emitted %llu events\n", (unsigned long long)count);
		return 0;
	}

	const char *row;
	int want_enabled;

	if (strcmp(mode, "disabled") == 0) {
		row = "LTTng-UST disabled point";
		want_enabled = 0;
	} else if (strcmp(mode, "enabled") == 0) {
		row = "LTTng-UST enabled, 5 words";
		want_enabled = 1;
	} else if (strcmp(mode, "snapshot") == 0) {
		row = "LTTng-UST snapshot session, 5 words";
		want_enabled = 1;
	} else {
		usage();
	}
	if (argc != 4)
		usage();
	uint64_t iters = parse_u64(argv[2], "ITERS");
	int reps = (int)parse_u64(argv[3], "REPS");

	if (reps > MAX_REPS) {
		fprintf(stderr, "bench: at most %d repetitions\n", MAX_REPS);
		return 2;
	}
	if (check_state(want_enabled))
		return 1;

	struct figure base, f;

	/* The floor: a bare rdtsc whose result must be produced. */
	MEASURE(base, iters, reps, {
		uint64_t t = __rdtsc();
		SINK(t);
	});
	if (want_enabled) {
		MEASURE(f, iters, reps,
			lttng_ust_tracepoint(ttrace_bench, point, i, i, i, i, i));
	} else {
		/* Like the Rust harness's "disabled point": 4x the iterations. */
		MEASURE(f, iters * 4, reps,
			lttng_ust_tracepoint(ttrace_bench, point, i, i, i, i, i));
	}

	print_header();
	print_row("bare rdtsc (C)", base, base.median);
	print_row(row, f, base.median);
	return 0;
}
