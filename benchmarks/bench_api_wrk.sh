#!/usr/bin/env bash
# POST /v1/estimate under load with wrk (a C load generator, so the client does not compete
# with the Python server for this machine's cores): 32 connections for 30 s on loopback.
# Usage: benchmarks/bench_api_wrk.sh [DATABASE_URL] [WORKERS]   (default: a fresh SQLite file)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "error: wrk not installed (apt-get install wrk)" >&2; exit 2; }
tmp=$(mktemp -d)
url=${1:-sqlite:///$tmp/bench.db}
workers=${2:-1}
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
AUTOPAR_DATABASE_URL=$url AUTOPAR_EMBEDDED_WORKER=false AUTOPAR_LOG_LEVEL=warning \
  .venv/bin/autopar serve --port "$port" --workers "$workers" >"$tmp/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.2
done
echo "database: ${url%%://*}, server workers: $workers"
wrk -t2 -c32 -d5s -s benchmarks/estimate_post.lua "http://127.0.0.1:$port/v1/estimate" >/dev/null
wrk -t2 -c32 -d30s --latency -s benchmarks/estimate_post.lua "http://127.0.0.1:$port/v1/estimate"
