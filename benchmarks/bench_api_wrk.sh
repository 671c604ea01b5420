#!/usr/bin/env bash
# The API under load with wrk (a C load generator, so the client does not compete with the
# Python server for this machine's cores), on loopback, bounded in time:
#   estimate: POST /v1/estimate (preset model, stored preset cluster, inline training and plan)
#   estimate-varied: the same with 4,608 plans in turn, so every request is priced afresh
#   plans:    GET /v1/searches/{id}/plans of a finished search with top_k 10 plans
# Usage: benchmarks/bench_api_wrk.sh [DATABASE_URL] [WORKERS] [CONNECTIONS] [SCENARIOS] [SECONDS]
#   defaults: a fresh SQLite file, 2 server workers, 64 connections, all three scenarios, 30 s.
# A PostgreSQL database is used as it is (the benchmark adds one search and its plans to it).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "error: wrk not installed (apt-get install wrk)" >&2; exit 2; }
tmp=$(mktemp -d)
url=${1:-sqlite:///$tmp/bench.db}
workers=${2:-2}
connections=${3:-64}
scenarios=${4:-estimate estimate-varied plans}
seconds=${5:-30}
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
# The embedded worker runs the one search the plans scenario reads (it then idles: one indexed
# query a second per process, far below the load).
AUTOPAR_DATABASE_URL=$url AUTOPAR_LOG_LEVEL=warning \
  .venv/bin/autopar serve --port "$port" --workers "$workers" --no-access-log >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 150); do
  curl -sf "$base/healthz" >/dev/null && break
  sleep 0.2
done
curl -sf "$base/healthz" >/dev/null || { cat "$tmp/server.log" >&2; exit 1; }

# CPU seconds used so far by the server and its worker processes, and by a PostgreSQL server on
# this machine (benchmarks/proc_cpu.py): per request, they separate each one's own cost from the
# other load on a shared machine, which the latencies include.
server_cpu_s() { .venv/bin/python benchmarks/proc_cpu.py tree "$server"; }
local_database=false
if [[ $url == postgresql* ]] && [[ $url =~ @(127\.0\.0\.1|localhost)[:/] ]]; then
  local_database=true
fi
database_cpu_s() { .venv/bin/python benchmarks/proc_cpu.py command postgres; }

# Established connections per server process, halfway through a run: the kernel spreads them
# over the processes' sockets (SO_REUSEPORT), and an uneven spread shows in the tail.
connection_spread() {
  ss -tnpH state established "( sport = :$port )" | grep -o 'pid=[0-9]*' | sort | uniq -c \
    | awk '{ printf "%s%s", sep, $1; sep = " / " } END { print "" }'
}

run_wrk() {  # run_wrk NAME URL [wrk options...]
  local name=$1 target=$2
  shift 2
  echo "== $name: database ${url%%://*}, $workers server workers, $connections connections, ${seconds} s; $(uptime | sed 's/.*load average/load average/')"
  wrk -t2 -c"$connections" -d5s "$@" "$target" >/dev/null   # warm-up: pools, caches, JIT-free paths
  local before after database_before=0 database_after=0
  before=$(server_cpu_s)
  $local_database && database_before=$(database_cpu_s)
  (sleep "$((seconds / 2))"; connection_spread >"$tmp/spread") &
  local spread=$!
  wrk -t2 -c"$connections" -d"${seconds}s" --latency "$@" "$target" 2>"$tmp/wrk.err" | tee "$tmp/wrk.out"
  wait "$spread"
  # wrk reports a broken Lua script on stderr and then runs anyway (with a bare GET), so a
  # script error or any error answer fails the benchmark instead of passing as a figure.
  if [[ -s $tmp/wrk.err ]] || grep -q "Non-2xx" "$tmp/wrk.out"; then
    cat "$tmp/wrk.err" >&2
    echo "error: $name: error answers or a wrk script error (above)" >&2
    exit 1
  fi
  after=$(server_cpu_s)
  $local_database && database_after=$(database_cpu_s)
  .venv/bin/python - "$before" "$after" "$database_before" "$database_after" "$tmp/wrk.out" <<'PY'
import re, sys
from pathlib import Path
requests = max(int(re.search(r"(\d+) requests in", Path(sys.argv[5]).read_text()).group(1)), 1)
server_ms, database_ms = ((float(b) - float(a)) * 1e3 for a, b in (sys.argv[1:3], sys.argv[3:5]))
print(f"server CPU per request: {server_ms / requests:.2f} ms")
if database_ms:
    print(f"database server CPU per request: {database_ms / requests:.2f} ms")
PY
  echo "connections per server process: $(cat "$tmp/spread")"
  echo "load average after: $(uptime | sed 's/.*load average: //')"
}

for scenario in $scenarios; do
  case $scenario in
    estimate)
      run_wrk "POST /v1/estimate" "$base/v1/estimate" -s benchmarks/estimate_post.lua
      ;;
    estimate-varied)
      # Every request another plan: each is priced (no answer from the service's memory).
      run_wrk "POST /v1/estimate, a new plan each request" "$base/v1/estimate" \
        -s benchmarks/estimate_varied.lua
      ;;
    plans)
      # A small exhaustive search (about a second); the plans scenario reads its ranking.
      search_id=$(curl -sf -X POST "$base/v1/searches" -H 'Content-Type: application/json' \
        -d '{"preset": "llama2-7b", "training": {"seq_length": 4096, "global_batch_size": 512}, "cluster_id": "dgx-a100-8n", "sampler": "exhaustive", "top_k": 10}' \
        | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["id"])')
      for _ in $(seq 300); do
        state=$(curl -sf "$base/v1/searches/$search_id" | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["status"])')
        [ "$state" = succeeded ] && break
        case $state in failed|cancelled) echo "error: search $search_id $state" >&2; exit 1;; esac
        sleep 0.5
      done
      [ "$state" = succeeded ] || { echo "error: search $search_id still $state" >&2; exit 1; }
      count=$(curl -sf "$base/v1/searches/$search_id/plans" | .venv/bin/python -c 'import json, sys; print(len(json.load(sys.stdin)["items"]))')
      echo "search $search_id: $count plans"
      run_wrk "GET /v1/searches/{id}/plans" "$base/v1/searches/$search_id/plans" -s benchmarks/count_errors.lua
      ;;
    *) echo "error: unknown scenario '$scenario' (estimate, plans)" >&2; exit 2 ;;
  esac
done
