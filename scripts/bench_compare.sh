#!/usr/bin/env bash
# Compares Google Benchmark programs built from two versions, run alternately so both see the same minutes of a
# noisy machine (a shared VM's wall clock can vary by a third from one minute to the next).
#
#   scripts/bench_compare.sh OLD_BINARY NEW_BINARY [FILTER] [ROUNDS]
#
# e.g. scripts/bench_compare.sh /tmp/old/bench_engine_throughput build/bench/bench_engine_throughput 'Flow|Compute'
# Each round runs each binary once (4 repetitions of each benchmark that matches FILTER, default all); the table
# gives, per benchmark, the fastest and the mean wall time over all rounds (ROUNDS, default 4) in the binary's
# own unit. Build the old version in a separate tree (git worktree add /tmp/old <commit>).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
old=$1 new=$2 filter=${3:-.} rounds=${4:-4}
for b in "$old" "$new"; do
  [ -x "$b" ] || { echo "bench_compare.sh: $b: not an executable" >&2; exit 2; }
done
case "$rounds" in '' | *[!0-9]* | 0) echo "bench_compare.sh: ROUNDS: '$rounds'; valid: 1 or more" >&2; exit 2 ;; esac
printf "%-52s %12s %12s %12s %12s\n" "benchmark" "old min" "new min" "old mean" "new mean"
for ((r = 0; r < rounds; r++)); do
  for label in old new; do
    [ "$label" = old ] && b=$old || b=$new
    "$b" --benchmark_filter="$filter" --benchmark_repetitions=4 --benchmark_min_time=0.15 \
      --benchmark_report_aggregates_only=false 2>/dev/null |
      awk -v who="$label" '/^BM_/ && $1 !~ /_(mean|median|stddev|cv)$/ {print who, $1, $2, $3}'
  done
done | awk '
  { key = $2 " " $1; t = $3 + 0; unit[key] = $4
    if (!(key in best) || t < best[key]) best[key] = t
    sum[key] += t; n[key]++; names[$2] = 1 }
  END {
    for (b in names) {
      o = b " old"; w = b " new"
      printf "%-52s %9.3f %-2s %9.3f %-2s %9.3f %-2s %9.3f %-2s\n", b, best[o], unit[o], best[w], unit[w],
             sum[o] / n[o], unit[o], sum[w] / n[w], unit[w]
    }
  }' | sort
