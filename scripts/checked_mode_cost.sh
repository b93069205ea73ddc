#!/usr/bin/env bash
# What forward()'s checked mode costs on CPU_FLASH (docs/reliability.md): a decode and a
# prefill shape, run alternately with ATTNKIT_CHECKED=0 and =1 (so that a busy machine
# disturbs both alike), ROUNDS times each. Each run is `attnkit bench` (median of its
# repeats); printed: per shape and mode the median over rounds of wall and CPU time, and the
# ratio checked / unchecked.
#   scripts/checked_mode_cost.sh [ROUNDS] [ATTNKIT]   (defaults: 3, build/cli/attnkit)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
attnkit="${2:-build/cli/attnkit}"
common=(bench --backend CPU_FLASH --heads 32/8 --head-size 128 --repeats 9 --warmup 2
  --read-buffer-mb 64 --json)
declare -A shapes=(
  [decode]="--batch 8 --context 4096 --query-len 1"
  [prefill]="--batch 2 --context 512 --query-len 512 --causal"
)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq "$rounds"); do
  for shape in decode prefill; do
    for checked in 0 1; do
      # shellcheck disable=SC2086
      ATTNKIT_CHECKED=$checked "$attnkit" "${common[@]}" ${shapes[$shape]} |
        python3 -c 'import json, sys; d = json.load(sys.stdin); print(sys.argv[1], sys.argv[2], d["median_us"], d["median_cpu_us"], d["shape"])' \
          "$shape" "$checked" >>"$results"
    done
  done
  echo "round $round of $rounds done" >&2
done
python3 - "$results" <<'EOF'
import statistics, sys
rows = [line.split(maxsplit=4) for line in open(sys.argv[1])]
for shape in ("decode", "prefill"):
    med = {}
    for checked in ("0", "1"):
        sel = [r for r in rows if r[0] == shape and r[1] == checked]
        med[checked] = (statistics.median(float(r[2]) for r in sel),
                        statistics.median(float(r[3]) for r in sel), sel[0][4].strip())
    off, on = med["0"], med["1"]
    print(f"{shape}: {off[2]}")
    print(f"  checked off: wall {off[0] / 1e3:.2f} ms, cpu {off[1] / 1e3:.2f} ms")
    print(f"  checked on:  wall {on[0] / 1e3:.2f} ms, cpu {on[1] / 1e3:.2f} ms")
    print(f"  ratio on/off: wall {on[0] / off[0]:.3f}, cpu {on[1] / off[1]:.3f}")
EOF
