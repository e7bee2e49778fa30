#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 600) each, JOBS (default 2) at a time, with a
# 10 s limit per input (a hang) and libFuzzer's 2 GiB memory limit, then prints the inputs
# tried per target. Crash inputs land in fuzz/artifacts/<target>/; add them to git: the
# `fuzz_regressions` test replays them. Needs nightly and cargo-fuzz
# (`rustup toolchain install nightly && cargo install cargo-fuzz`).
#
#   fuzz/run.sh [SECONDS] [JOBS]
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-600}
jobs=${2:-2}
targets=(open ring aux metadata ctl decode snapshot)
mkdir -p logs
cargo +nightly fuzz build -O
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} sh -c \
  "cargo +nightly fuzz run -O {} -- -max_total_time=$secs -timeout=10 -rss_limit_mb=2048 > logs/{}.log 2>&1; echo \"{}: exit \$?\""
for t in "${targets[@]}"; do
  echo "$t: $(grep -E '^Done [0-9]+ runs' "logs/$t.log" || echo 'no summary: see fuzz/logs/'"$t"'.log')"
done
