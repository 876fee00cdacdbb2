#!/usr/bin/env bash
# System calls per request of Portcullis and of nginx (one worker each), in
# front of the same bench-upstream, counted by `strace -c` attached to every
# thread of the proxy while wrk sends small tools/calls. strace slows the
# proxy down a lot: read the counts, not the time. Epoll waits and
# wake-ups are where a proxy's kernel time goes besides reading and writing.
#
# usage: bench/syscalls.sh            Knobs: BIN=target/release/portcullis,
#        DURATION=4 (s of wrk), CONNECTIONS=16, TOOL=get_room.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
BIN=${BIN:-$ROOT/target/release/portcullis}
UP_BIN="$ROOT/target/release/bench-upstream"
DURATION=${DURATION:-4}
CONNECTIONS=${CONNECTIONS:-16}
export MCP_TOOL=${TOOL:-get_room} MCP_METHOD=tools/call
export PATH="$PATH:/usr/sbin:/sbin"
for c in strace wrk nginx curl; do
    command -v "$c" >/dev/null || { echo "syscalls.sh: $c missing (apt-get install strace wrk nginx curl)" >&2; exit 1; }
done
[[ -x $BIN && -x $UP_BIN ]] || { echo "build first: cargo build --release -p portcullis -p portcullis-bench-upstream --bin portcullis --bin bench-upstream" >&2; exit 1; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-sys.XXXXXX")"
PIDS=()
cleanup() {
    local rc=$? all=() p
    trap - EXIT
    for p in "${PIDS[@]}"; do
        # shellcheck disable=SC2207  # pids: plain words
        all+=("$p" $(cat /proc/"$p"/task/*/children 2>/dev/null || true))
    done
    ((${#all[@]})) && kill -TERM "${all[@]}" 2>/dev/null
    wait 2>/dev/null || true
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ready() { # url
    local i
    for i in $(seq 1 100); do curl -sf -o /dev/null --max-time 1 -X POST "$1" && return 0; sleep 0.1; done
    for i in $(seq 1 100); do curl -s -o /dev/null --max-time 1 "$1" && return 0; sleep 0.1; done
    echo "$1 not ready" >&2; exit 1
}
UP=$(port); PC=$(port); NG=$(port)
TOKIO_WORKER_THREADS=1 "$UP_BIN" "127.0.0.1:$UP" 2>"$TMP/upstream.log" &
PIDS+=($!)
cat >"$TMP/p.toml" <<EOF
[[listener]]
address = "127.0.0.1:$PC"
[log]
level = "warn"
[audit]
sink = "off"
[[upstream]]
id = "bench"
name = "Bench upstream"
url = "http://127.0.0.1:$UP/mcp"
[[route]]
path = "/mcp"
upstream = "bench"
EOF
TOKIO_WORKER_THREADS=1 "$BIN" run --config "$TMP/p.toml" >"$TMP/portcullis.log" 2>&1 &
PC_PID=$!
PIDS+=("$PC_PID")
mkdir -p "$TMP/ngx"
cat >"$TMP/ngx/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $TMP/ngx/nginx.pid;
error_log $TMP/ngx/error.log warn;
events { worker_connections 4096; multi_accept on; }
http {
    access_log off;
    tcp_nodelay on;
    keepalive_requests 1000000;
    client_body_buffer_size 64k;
    client_body_temp_path $TMP/ngx;
    proxy_temp_path $TMP/ngx;
    upstream up { server 127.0.0.1:$UP; keepalive 64; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:$NG backlog=4096;
        location /mcp {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_set_header X-Forwarded-Host \$http_host;
            proxy_buffering off;
        }
    }
}
EOF
nginx -p "$TMP/ngx/" -e "$TMP/ngx/error.log" -c "$TMP/ngx/nginx.conf" >"$TMP/nginx.out" 2>&1 &
NG_PID=$!
PIDS+=("$NG_PID")
ready "http://127.0.0.1:$PC/mcp"
ready "http://127.0.0.1:$NG/mcp"

# Context switches (voluntary + involuntary) of every thread of these processes.
switches() {
    local p
    for p in "$@"; do cat /proc/"$p"/task/*/status 2>/dev/null; done |
        awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'
}

count() { # name pid url
    local name=$1 pid=$2 url=$3 tids=() t out req
    # Every thread of the proxy (nginx: its worker processes).
    local procs=("$pid")
    # shellcheck disable=SC2207
    procs+=($(cat /proc/"$pid"/task/*/children 2>/dev/null || true))
    # Without strace first: wake-ups per request at full speed.
    local before after
    before=$(switches "${procs[@]}")
    out=$(wrk -t1 -c"$CONNECTIONS" -d2s -s "$BENCH_DIR/wrk/tools_call.lua" "$url")
    after=$(switches "${procs[@]}")
    req=$(grep -o 'requests=[0-9]*' <<<"$out" | cut -d= -f2)
    [[ -n $req && $req -gt 0 ]] || { echo "wrk completed no request: $out" >&2; exit 1; }
    printf '%-11s %8s requests unstraced: %.3f context switches/req\n' "$name" "$req" \
        "$(awk -v a="$before" -v b="$after" -v r="$req" 'BEGIN { print (b - a) / r }')"
    for p in "${procs[@]}"; do
        for t in /proc/"$p"/task/*; do tids+=(-p "${t##*/}"); done
    done
    strace -c -f -o "$TMP/$name.strace" "${tids[@]}" 2>/dev/null &
    local st=$!
    sleep 0.5
    out=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s -s "$BENCH_DIR/wrk/tools_call.lua" "$url")
    kill -INT "$st"
    wait "$st" 2>/dev/null || true
    req=$(grep -o 'requests=[0-9]*' <<<"$out" | cut -d= -f2)
    [[ -n $req && $req -gt 0 ]] || { echo "wrk completed no request: $out" >&2; exit 1; }
    printf '%-11s %8s requests under strace\n' "$name" "$req"
    awk -v r="$req" -v n="$name" '
        # "% time, seconds, usecs/call, calls, [errors,] syscall"
        NF >= 5 && $1 ~ /^[0-9.]+$/ && $NF != "total" { calls[$NF] = $4 }
        END { t = 0; for (c in calls) { t += calls[c]; printf "  %-18s %6.2f/req\n", c, calls[c] / r }
              printf "  %-18s %6.2f/req\n", "TOTAL", t / r }' "$TMP/$name.strace" | sort -k2 -rn
}
count portcullis "$PC_PID" "http://127.0.0.1:$PC/mcp"
count nginx "$NG_PID" "http://127.0.0.1:$NG/mcp"
