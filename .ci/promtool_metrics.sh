#!/usr/bin/env bash
# `promtool check metrics` on the live /metrics of a real dispatcher and
# worker started from the `tfdata` binary, after a read so that counters
# and histograms carry samples. Any promtool complaint fails.
#
# promtool lints the Prometheus text format (0.0.4), which /metrics serves
# to a client asking for text/plain (Prometheus itself negotiates
# OpenMetrics, whose counter families drop the `_total` that promtool's
# parser expects on HELP lines); the OpenMetrics form is fetched too and
# must hold the same samples.
#
# Installs Debian's `prometheus` package (which ships promtool) when
# promtool is missing. Usage: .ci/promtool_metrics.sh [path/to/tfdata]
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1; then
  echo "installing promtool (Debian's prometheus package)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq prometheus >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y -qq prometheus >/dev/null
  fi
fi

BIN="${1:-}"
if [[ -z "$BIN" ]]; then
  cargo build -q -p tfdata-cli
  BIN="$PWD/target/debug/tfdata"
fi

scratch="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT

# Starts `tfdata $@` with its stdout in $scratch/$name.out.
start() {
  local name="$1"
  shift
  "$BIN" "$@" >"$scratch/$name.out" 2>"$scratch/$name.err" &
  pids+=("$!")
}

# The port on the line of $scratch/$1.out matching $2, waited for (30 s).
port_of() {
  local line
  for _ in $(seq 300); do
    line="$(grep -m1 -- "$2" "$scratch/$1.out" || true)"
    if [[ -n "$line" ]]; then
      echo "${line##* port }" | awk '{print $1}'
      return
    fi
    sleep 0.1
  done
  echo "no '$2' line from $1:" >&2
  cat "$scratch/$1.err" >&2
  exit 1
}

# GET http://127.0.0.1:$1$2 into $3 (Accept: $4, if given), waited for
# until it answers 200 (30 s).
get_ok() {
  for _ in $(seq 300); do
    if curl -fsS -H "Accept: ${4:-*/*}" "http://127.0.0.1:$1$2" -o "$3" 2>/dev/null; then
      return
    fi
    sleep 0.1
  done
  echo "http://127.0.0.1:$1$2 never answered 200" >&2
  exit 1
}

start dispatcher dispatcher --port 0 --http-port 0 --work-dir "$scratch/work" --fault-tolerant-mode
grpc="$(port_of dispatcher ' listening on port ')"
dhttp="$(port_of dispatcher 'http listening on port ')"
start worker worker --dispatcher-address "localhost:$grpc" --http-port 0 --heartbeat-interval-ms 200
whttp="$(port_of worker 'http listening on port ')"
get_ok "$whttp" /readyz /dev/null

echo '{"op": "range", "stop": 1000}' >"$scratch/pipeline.json"
id="$("$BIN" register --service "grpc://localhost:$grpc" --pipeline "$scratch/pipeline.json")"
"$BIN" read --service "grpc://localhost:$grpc" --dataset-id "$id" >"$scratch/read.out" 2>"$scratch/read.err"
[[ "$(wc -l <"$scratch/read.out")" == 1000 ]] || { echo "the read returned $(wc -l <"$scratch/read.out") elements" >&2; exit 1; }
sleep 0.5 # a worker heartbeat with the read's figures

status=0
for role in dispatcher worker; do
  port="$dhttp"
  [[ "$role" == worker ]] && port="$whttp"
  get_ok "$port" /metrics "$scratch/$role.metrics" "text/plain; version=0.0.4"
  get_ok "$port" /metrics "$scratch/$role.openmetrics" "application/openmetrics-text; version=1.0.0"
  grep -q "^tfdata_${role}_" "$scratch/$role.metrics" || { echo "no tfdata_${role}_ metrics" >&2; exit 1; }
  tail -n1 "$scratch/$role.openmetrics" | grep -qx '# EOF' || { echo "the $role's OpenMetrics text does not end in # EOF" >&2; exit 1; }
  # Same series in both forms (values may have moved between the fetches;
  # label order and number formatting differ).
  if ! python3 - "$scratch/$role.metrics" "$scratch/$role.openmetrics" <<'PY'
import re, sys
def series(path):
    out = set()
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        name, _, labels = line.split(" ")[0].partition("{")
        pairs = re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels)
        norm = tuple(sorted((k, str(float(v)) if k == "le" and v != "+Inf" else v) for k, v in pairs))
        out.add((name, norm))
    return out
a, b = series(sys.argv[1]), series(sys.argv[2])
for s in sorted(a ^ b):
    print("only in one form:", s, file=sys.stderr)
sys.exit(1 if a != b else 0)
PY
  then
    echo "the $role's two exposition formats hold different series" >&2
    status=1
  fi
  if ! report="$(promtool check metrics <"$scratch/$role.metrics" 2>&1)" || [[ -n "$report" ]]; then
    echo "promtool check metrics complains about the $role's /metrics:" >&2
    echo "$report" >&2
    status=1
  else
    echo "$role: $(grep -c '^# TYPE' "$scratch/$role.metrics") metric families, promtool clean"
  fi
done
exit "$status"
