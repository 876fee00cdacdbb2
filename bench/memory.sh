#!/usr/bin/env bash
# Memory benchmark: what idle keep-alive client connections cost, and whether
# the memory comes back after they close.
#
# For Portcullis (and nginx, and BASELINE_BIN when given), freshly started in
# front of bench-upstream: RSS at rest, RSS with N idle keep-alive connections
# (each has sent one tools/call and read its answer), 3 s and 15 s after the last
# opened, and RSS 1/5/10/20/30/60 s
# after all of them closed (bench/idle_conns.py). Loopback only.
#
# Knobs: N=10000 connections; PROXY_THREADS=1; BASELINE_BIN=; SKIP_BUILD=1;
# KEEP=1 (keep the temp dir); TARGETS="portcullis nginx" (baseline is added
# when BASELINE_BIN is set); PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
# preloads a library into Portcullis (another allocator without rebuilding).
# MALLOC_CONF / MIMALLOC_* in the environment reach Portcullis unchanged, to
# try allocator settings.
set -euo pipefail

N=${N:-10000}
PROXY_THREADS=${PROXY_THREADS:-1}
BASELINE_BIN=${BASELINE_BIN:-}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP=${KEEP:-0}
TARGETS=${TARGETS:-"portcullis nginx"}
[[ -n $BASELINE_BIN ]] && TARGETS+=" baseline"
[[ $N =~ ^[0-9]+$ ]] && ((N > 0)) || { echo "memory.sh: N must be a positive integer" >&2; exit 2; }

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
BIN="$ROOT/target/release/portcullis"
UP_BIN="$ROOT/target/release/bench-upstream"
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf '[memory.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[memory.sh] error: %s\n' "$*" >&2; exit 1; }

PIDS=()
TMP=""
stop() { # pid...: TERM, then KILL after 5 s; children (nginx workers) too
    local all=() pid i
    for pid in "$@"; do
        all+=("$pid")
        # shellcheck disable=SC2207
        all+=($(cat /proc/"$pid"/task/*/children 2>/dev/null || true))
    done
    ((${#all[@]})) || return 0
    kill -TERM "${all[@]}" 2>/dev/null || true
    for i in $(seq 1 50); do
        local alive=0
        for pid in "${all[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    kill -KILL "${all[@]}" 2>/dev/null || true
    wait "$@" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    ((${#PIDS[@]})) && stop "${PIDS[@]}"
    if [[ -n $TMP && -d $TMP ]]; then
        if [[ $KEEP == 1 || $rc -ne 0 ]]; then log "temp dir kept: $TMP"; else rm -rf "$TMP"; fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v nginx >/dev/null || die "nginx missing (bench/load.sh installs it)"
cd "$ROOT"
if [[ $SKIP_BUILD != 1 ]]; then
    log "cargo build --release (portcullis, bench-upstream)"
    CARGO_INCREMENTAL=0 cargo build --release --quiet -p portcullis -p portcullis-bench-upstream --bin portcullis --bin bench-upstream \
        || die "cargo build --release failed"
fi
[[ -x $BIN && -x $UP_BIN ]] || die "release binaries missing"
ulimit -n "$(ulimit -Hn)"
(($(ulimit -n) >= N + 1000)) || die "the open-file limit ($(ulimit -n)) is too low for N=$N"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-mem.XXXXXX")"

free_port() {
    local p _
    for _ in $(seq 1 200); do
        p=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then REPLY=$p; return 0; fi
    done
    die "no free loopback port found"
}
wait_port() { # pid port
    local i
    for i in $(seq 1 150); do
        kill -0 "$1" 2>/dev/null || die "process $1 exited during start-up (logs in $TMP)"
        (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    die "nothing listens on $2 after 15 s"
}

free_port; UP_PORT=$REPLY
"$UP_BIN" "127.0.0.1:$UP_PORT" >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
PIDS+=("$UP_PID")
wait_port "$UP_PID" "$UP_PORT"

start_portcullis() { # binary -> REPLY=pid, PORT
    free_port; PORT=$REPLY
    free_port; local admin=$REPLY
    cat >"$TMP/p.toml" <<EOF
[[listener]]
address = "127.0.0.1:$PORT"
[admin]
address = "127.0.0.1:$admin"
[limits]
max_connections = $((N + 1000))
[log]
level = "warn"
[[upstream]]
id = "bench"
name = "Bench upstream"
url = "http://127.0.0.1:$UP_PORT/mcp"
[[route]]
path = "/mcp"
upstream = "bench"
EOF
    TOKIO_WORKER_THREADS=$PROXY_THREADS LD_PRELOAD=${PRELOAD:-} "$1" run --config "$TMP/p.toml" >>"$TMP/portcullis.log" 2>&1 &
    REPLY=$!
    wait_port "$REPLY" "$PORT"
}
start_nginx() {
    free_port; PORT=$REPLY
    local d="$TMP/nginx"
    mkdir -p "$d"/{client_body,proxy,fastcgi,uwsgi,scgi}
    cat >"$d/nginx.conf" <<EOF
daemon off;
worker_processes $PROXY_THREADS;
worker_rlimit_nofile $((2 * N + 1000));
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections $((2 * N + 1000)); }
http {
    access_log off;
    keepalive_timeout 300s;
    client_body_temp_path $d/client_body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
    upstream up { server 127.0.0.1:$UP_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        location /mcp { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; }
    }
}
EOF
    nginx -p "$d/" -e "$d/error.log" -c "$d/nginx.conf" >"$TMP/nginx.out" 2>&1 &
    REPLY=$!
    wait_port "$REPLY" "$PORT"
}

RESULTS=()
for t in $TARGETS; do
    case $t in
        portcullis) start_portcullis "$BIN" ;;
        baseline) start_portcullis "$BASELINE_BIN" ;;
        nginx) start_nginx ;;
        *) die "unknown target $t" ;;
    esac
    pid=$REPLY
    PIDS+=("$pid")
    sleep 1
    pids=$pid
    for c in $(cat /proc/"$pid"/task/*/children 2>/dev/null || true); do pids+=",$c"; done
    log "$t (pid $pid): $N idle keep-alive connections, then closed"
    out=$(python3 "$BENCH_DIR/idle_conns.py" "$PORT" "$N" "$pids") || die "idle_conns.py failed against $t"
    RESULTS+=("$t $(grep '^RESULT' <<<"$out" | sed 's/^RESULT //' | tr '\n' ' ')")
    stop "$pid"
done

kv() { # key line
    local re="(^| )$1=([^ ]+)"
    [[ $2 =~ $re ]] && echo "${BASH_REMATCH[2]}" || echo "-"
}
mib() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.1f", x / 1024 }'; }
echo
echo "== idle keep-alive connections: $N, then all closed (RSS in MiB; PROXY_THREADS=$PROXY_THREADS) =="
printf '%-11s %8s %8s %10s %9s %10s %7s %7s %7s %7s %7s %7s %6s\n' target 'at rest' 'idle' 'B/conn' 'idle 15s' 'B/conn 15s' '+1s' '+5s' '+10s' '+20s' '+30s' '+60s' non200
for r in "${RESULTS[@]}"; do
    t=${r%% *}
    printf '%-11s %8s %8s %10s %9s %10s %7s %7s %7s %7s %7s %7s %6s\n' "$t" "$(mib "$(kv before_kib "$r")")" \
        "$(mib "$(kv idle_kib "$r")")" "$(kv per_conn_b "$r")" "$(mib "$(kv idle_15s_kib "$r")")" \
        "$(kv settled_per_conn_b "$r")" "$(mib "$(kv after_1s_kib "$r")")" \
        "$(mib "$(kv after_5s_kib "$r")")" "$(mib "$(kv after_10s_kib "$r")")" "$(mib "$(kv after_20s_kib "$r")")" \
        "$(mib "$(kv after_30s_kib "$r")")" "$(mib "$(kv after_60s_kib "$r")")" "$(kv non200 "$r")"
done
