#!/usr/bin/env bash
# Peer benchmark: LTTng-UST next to ttrace's hot path.
#
# Builds a small C program (benches/peers/lttng/) with an LTTng-UST tracepoint
# ttrace_bench:point carrying five uint64 fields, and times it the way
# `cargo run --release -p ttrace-benches --bin hotpath` times ttrace: each run
# of the program prints its own bare-rdtsc floor, so ratios are within a run.
#
#   1. event not enabled (session daemon up, no session enables it)
#   2. event enabled in a recording session (discard mode, written to disk)
#   3. event enabled in a snapshot session (overwrite mode, in memory)
#   4. babeltrace2 decode rate over a freshly recorded trace
#
# Usage: benches/peers/lttng.sh [--quick] [--decode-only] [--iters N]
#                               [--reps N] [--decode-events N] [--keep]
#
# Installs lttng-tools, liblttng-ust-dev, babeltrace2 and gcc from Debian's
# packages when missing. Everything else lives in a temporary directory
# (LTTNG_HOME included); every process started here is stopped on exit.
set -euo pipefail
export LC_ALL=C # '.' as the decimal separator in EPOCHREALTIME and printf

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/lttng

# ---- options -------------------------------------------------------------
usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
	exit "${1:-0}"
}
quick=0 decode_only=0 keep=0
iters='' reps='' decode_events=''
while (($#)); do
	case $1 in
	--quick) quick=1 ;;
	--decode-only) decode_only=1 ;;
	--keep) keep=1 ;;
	--iters) iters=${2:?--iters needs a value}; shift ;;
	--reps) reps=${2:?--reps needs a value}; shift ;;
	--decode-events) decode_events=${2:?--decode-events needs a value}; shift ;;
	-h | --help) usage 0 ;;
	*) echo "unknown option: $1" >&2; usage 2 >&2 ;;
	esac
	shift
done
if ((quick)); then
	: "${iters:=20000}" "${reps:=3}" "${decode_events:=200000}"
else
	: "${iters:=5000000}" "${reps:=7}" "${decode_events:=4000000}"
fi
decode_timed_runs=$((quick ? 1 : 3))

# Ring buffers, per CPU (per-UID buffers, the UST default).
# Recording session: discard mode, large enough that the consumer keeps up.
rec_subbuf=4M rec_nsubbuf=16
# Decode trace: large enough to hold every event without relying on the consumer.
dec_subbuf=8M dec_nsubbuf=32
# Snapshot session: overwrite mode, kept in memory.
snap_subbuf=1M snap_nsubbuf=8

log() { printf '%s\n' "$*" >&2; }
die() { log "lttng.sh: $*"; exit 1; }

# ---- packages --------------------------------------------------------------
SUDO=()
if ((EUID != 0)); then
	if command -v sudo >/dev/null; then SUDO=(sudo); else log "not root and no sudo: package installs may fail"; fi
fi

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

install_missing() {
	local need=()
	command -v lttng >/dev/null && command -v lttng-sessiond >/dev/null || need+=(lttng-tools)
	pkg_installed liblttng-ust-dev || need+=(liblttng-ust-dev)
	command -v babeltrace2 >/dev/null || need+=(babeltrace2)
	command -v gcc >/dev/null || need+=(gcc libc6-dev)
	((${#need[@]})) || return 0
	log "installing: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# Update the package lists only if the install cannot proceed without it.
	if ! "${SUDO[@]}" apt-get install -y --no-install-recommends "${need[@]}"; then
		"${SUDO[@]}" apt-get update
		"${SUDO[@]}" apt-get install -y --no-install-recommends "${need[@]}"
	fi
}
install_missing

# ---- workspace and cleanup ----------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/ttrace-lttng.XXXXXX")
export LTTNG_HOME=$work/home # lttng's config (.lttngrc), non-root run dir
mkdir -p "$LTTNG_HOME"
sessiond_pid='' # set only if this script started the session daemon
sessions=()     # sessions created here and not yet destroyed

descendants() { # all descendants of a PID, deepest last
	local c
	for c in $(pgrep -P "$1" || true); do
		echo "$c"
		descendants "$c"
	done
}

cleanup() {
	local rc=$? s p kids=() i
	set +e
	for s in "${sessions[@]}"; do lttng destroy "$s" >/dev/null 2>&1; done
	if [[ -n $sessiond_pid ]] && kill -0 "$sessiond_pid" 2>/dev/null; then
		# Consumer daemons and run-as helpers are children of the session daemon.
		mapfile -t kids < <(descendants "$sessiond_pid")
		kill -TERM "$sessiond_pid"
		for ((i = 0; i < 100; i++)); do
			kill -0 "$sessiond_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$sessiond_pid" 2>/dev/null && kill -KILL "$sessiond_pid"
		for p in "${kids[@]}"; do kill -0 "$p" 2>/dev/null && kill -TERM "$p"; done
		sleep 0.2
		for p in "${kids[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p"; done
	fi
	if ((keep)); then log "kept $work"; else rm -rf "$work"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- build -------------------------------------------------------------------
bench=$work/bench
gcc -O2 -Wall -Wextra -I"$src" -o "$bench" "$src/bench.c" "$src/tp.c" -llttng-ust -ldl

# ---- session daemon ------------------------------------------------------------
lttng_ust_version=$(dpkg-query -W -f='${Version}' liblttng-ust-dev 2>/dev/null || echo '?')
echo "lttng: $(lttng --version | head -n1); liblttng-ust-dev $lttng_ust_version; $(babeltrace2 --version | head -n1)"
echo "iterations: $iters, repetitions: $reps; decode trace: $decode_events events"

# A root session daemon is the system-wide one (run dir /var/run/lttng); a
# user's lives under $LTTNG_HOME/.lttng. `lttng list` answers only if one runs
# (unlike `lttng create`, it never spawns one).
if lttng list >/dev/null 2>&1; then
	log "note: a session daemon is already running; using it (and leaving it running)"
else
	lttng-sessiond --daemonize --no-kernel --pidfile="$work/sessiond.pid"
	for ((i = 0; i < 100; i++)); do
		[[ -s $work/sessiond.pid ]] && break
		sleep 0.1
	done
	[[ -s $work/sessiond.pid ]] || die "lttng-sessiond wrote no pid file"
	sessiond_pid=$(<"$work/sessiond.pid")
	kill -0 "$sessiond_pid" || die "lttng-sessiond ($sessiond_pid) is not running"
fi

tag="ttrace-bench-$$"

# create_session NAME DIR [create options...] -- CHANNEL OPTIONS...
create_session() {
	local name=$1 dir=$2 create=() chan=()
	shift 2
	while (($#)) && [[ $1 != -- ]]; do create+=("$1"); shift; done
	shift
	chan=("$@")
	lttng create "$name" --output="$dir" "${create[@]}" >/dev/null
	sessions+=("$name")
	lttng enable-channel -u -s "$name" "${chan[@]}" ch >/dev/null
	lttng enable-event -u -s "$name" -c ch 'ttrace_bench:*' >/dev/null
	lttng start "$name" >/dev/null
}

# stop_session NAME EMITTED: stops it and prints what the tracer reports as
# lost: `lttng list` has per-channel statistics ("Discarded events: N" in
# discard mode, "Lost packets: N" in overwrite mode, when there are any).
stop_session() {
	local name=$1 emitted=$2 out line n
	out=$(lttng stop "$name" 2>&1)
	local found=0
	while IFS= read -r line; do
		found=1
		n=${line##*: }
		if [[ $line == *'Discarded events'* ]] && ((emitted > 0)); then
			line+=" of $emitted emitted ($(awk -v n="$n" -v e="$emitted" 'BEGIN { printf "%.2f", 100 * n / e }')%)"
		fi
		echo "  ${line#"${line%%[! ]*}"}"
	done < <(lttng list "$name" 2>/dev/null | grep -Ei 'discarded events|lost packets' || true)
	# Fall back on the warnings `lttng stop` prints.
	((found)) || grep -i 'warn' <<<"$out" | sed 's/^/  /' || echo "  lost events: none reported"
}

destroy_session() {
	local name=$1 s keep_s=()
	lttng destroy "$name" >/dev/null
	for s in "${sessions[@]}"; do [[ $s == "$name" ]] || keep_s+=("$s"); done
	sessions=("${keep_s[@]}")
}

# ---- hot-path rows -------------------------------------------------------------
if ((!decode_only)); then
	echo
	echo "== event not enabled (session daemon running, no session enables it) =="
	"$bench" disabled "$iters" "$reps"

	echo
	echo "== recording session (discard mode, ${rec_nsubbuf} x ${rec_subbuf} per CPU, to disk) =="
	s=$tag-rec
	create_session "$s" "$work/trace-rec" -- --discard --subbuf-size="$rec_subbuf" --num-subbuf="$rec_nsubbuf"
	"$bench" enabled "$iters" "$reps"
	emitted=$(((reps + 1) * iters)) # warm-up included
	stop_session "$s" "$emitted"
	destroy_session "$s"
	echo "  trace on disk: $(du -sh "$work/trace-rec" | cut -f1)"
	rm -rf "$work/trace-rec"

	echo
	echo "== snapshot session (overwrite mode, ${snap_nsubbuf} x ${snap_subbuf} per CPU, in memory) =="
	s=$tag-snap
	create_session "$s" "$work/trace-snap" --snapshot -- --overwrite --subbuf-size="$snap_subbuf" --num-subbuf="$snap_nsubbuf"
	"$bench" snapshot "$iters" "$reps"
	lttng snapshot record -s "$s" >/dev/null
	stop_session "$s" "$(((reps + 1) * iters))"
	destroy_session "$s"
	echo "  snapshot taken: $(du -sh "$work/trace-snap" | cut -f1)"
	rm -rf "$work/trace-snap"
fi

# ---- babeltrace2 decode rate -----------------------------------------------------
echo
echo "== babeltrace2 decode (discard mode, ${dec_nsubbuf} x ${dec_subbuf} per CPU) =="
s=$tag-dec
trace=$work/trace-dec
create_session "$s" "$trace" -- --discard --subbuf-size="$dec_subbuf" --num-subbuf="$dec_nsubbuf"
"$bench" record "$decode_events" | sed 's/^/  /'
stop_session "$s" "$decode_events"
destroy_session "$s" # waits until the consumer has written everything
echo "  trace on disk: $(du -sh "$trace" | cut -f1)"

# Count once (this pass also brings the trace into the page cache), then time.
events=$(babeltrace2 "$trace" 2>"$work/bt.err" | wc -l)
[[ -s $work/bt.err ]] && sed 's/^/  babeltrace2: /' "$work/bt.err" | head -n 5
((events > 0)) || die "babeltrace2 decoded no events"
((events == decode_events)) || echo "  note: $decode_events emitted, $events decoded (the rest were discarded)"

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
times=()
for ((r = 0; r < decode_timed_runs; r++)); do
	t0=$EPOCHREALTIME
	babeltrace2 "$trace" >/dev/null 2>&1
	t1=$EPOCHREALTIME
	times+=("$(elapsed "$t0" "$t1")")
done
secs=$(printf '%s\n' "${times[@]}" | sort -g | sed -n "$(((decode_timed_runs + 1) / 2))p")
((decode_timed_runs > 1)) && echo "  text output, timed runs (s): ${times[*]}; median taken"
rate=$(awk -v n="$events" -v s="$secs" 'BEGIN { printf "%.2f", n / s / 1e6 }')
echo "babeltrace2 decode: $events events in $secs s = $rate M events/s"

# For reference: decoding alone, without text formatting (dummy sink).
t0=$EPOCHREALTIME
babeltrace2 "$trace" --output-format=dummy >/dev/null 2>&1
t1=$EPOCHREALTIME
secs=$(elapsed "$t0" "$t1")
rate=$(awk -v n="$events" -v s="$secs" 'BEGIN { printf "%.2f", n / s / 1e6 }')
echo "babeltrace2 decode, dummy sink (no text output): $events events in $secs s = $rate M events/s"
