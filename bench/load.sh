#!/usr/bin/env bash
# Whole-proxy load benchmark for Portcullis.
#
# One run: installs wrk/nginx if missing, builds the release binary, starts the
# built-in demo MCP upstream, Portcullis in front of it and nginx (a plain,
# tuned reverse proxy) in front of the same upstream, then measures the MCP
# tools/call throughput, latency and CPU cost per request of
#     direct (wrk -> upstream), portcullis (wrk -> portcullis -> upstream),
#     nginx (wrk -> nginx -> upstream)
# interleaved (direct, portcullis, nginx, direct, ...) and prints the medians.
# Everything listens on and talks to 127.0.0.1 only. See bench/README.md.
#
# Knobs (environment):
#   DURATION=10      seconds per measured run
#   CONNECTIONS=64   wrk connections
#   REPS=3           repetitions of the (direct, portcullis, nginx) cycle
#   WARMUP=2         seconds of unmeasured load before every measured run (0 = none)
#   WRK_THREADS=1    wrk threads (the machine has 2 cores; wrk needs one)
#   PROXY_THREADS=1  TOKIO_WORKER_THREADS for portcullis (nginx: worker_processes 1)
#   UPSTREAM_THREADS=1  TOKIO_WORKER_THREADS for the demo upstream
#   SKIP_BUILD=1     use the existing target/release/portcullis
#   KEEP=1           keep the temp dir (configs, logs, raw wrk output)
#   BUILD_TIMEOUT=1800  seconds allowed for cargo build
#   OTHER_WARN=10    warn when processes other than ours used more than this %
#                    of a CPU during a measured run (a busy box skews results)
#   QUIET_MAX=60     before each run wait up to this many seconds for the machine
#                    to be quiet (< OTHER_WARN % of a CPU busy); 0 = don't wait
set -euo pipefail

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
REPS=${REPS:-3}
WARMUP=${WARMUP:-2}
WRK_THREADS=${WRK_THREADS:-1}
PROXY_THREADS=${PROXY_THREADS:-1}
UPSTREAM_THREADS=${UPSTREAM_THREADS:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
OTHER_WARN=${OTHER_WARN:-10}
QUIET_MAX=${QUIET_MAX:-60}
KEEP=${KEEP:-0}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-1800}

for v in DURATION CONNECTIONS REPS WARMUP WRK_THREADS PROXY_THREADS UPSTREAM_THREADS BUILD_TIMEOUT OTHER_WARN QUIET_MAX; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "load.sh: $v must be a non-negative integer (got '${!v}')" >&2; exit 2; }
done
(( DURATION > 0 && CONNECTIONS > 0 && REPS > 0 && WRK_THREADS > 0 && PROXY_THREADS > 0 && UPSTREAM_THREADS > 0 )) \
    || { echo "load.sh: DURATION, CONNECTIONS, REPS and the thread counts must be > 0" >&2; exit 2; }

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
LUA="$BENCH_DIR/wrk/tools_call.lua"
BIN="$ROOT/target/release/portcullis"
TARGETS=(direct portcullis nginx)

log() { printf '[load.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[load.sh] error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------
# Cleanup: every process we start is recorded in PIDS; on exit (normal,
# failure, Ctrl-C) they and their direct children (nginx workers) are stopped.
# ---------------------------------------------------------------------------
PIDS=()
TMP=""
cleanup() {
    local rc=$? pid all=() i
    trap - EXIT INT TERM
    if [[ -n ${WRK_PID:-} ]]; then kill -TERM "$WRK_PID" 2>/dev/null || true; fi
    for pid in "${PIDS[@]}"; do
        all+=("$pid")
        # shellcheck disable=SC2207  # pids: plain words
        all+=($(cat /proc/"$pid"/task/*/children 2>/dev/null || true))
    done
    if ((${#all[@]})); then
        kill -TERM "${all[@]}" 2>/dev/null || true
        for i in $(seq 1 50); do
            local alive=0
            for pid in "${all[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
            ((alive)) || break
            sleep 0.1
        done
        kill -KILL "${all[@]}" 2>/dev/null || true
        wait 2>/dev/null || true
    fi
    if [[ -n $TMP && -d $TMP ]]; then
        if [[ $KEEP == 1 || $rc -ne 0 ]]; then
            log "temp dir kept: $TMP"
        else
            rm -rf "$TMP"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------
# 1. Tools
# ---------------------------------------------------------------------------
export PATH="$PATH:/usr/sbin:/sbin"
install_missing() {
    local pkgs=()
    command -v wrk >/dev/null || pkgs+=(wrk)
    command -v nginx >/dev/null || pkgs+=(nginx-light)
    command -v curl >/dev/null || pkgs+=(curl)
    ((${#pkgs[@]})) || return 0
    [[ $(id -u) == 0 ]] || die "missing ${pkgs[*]} and not root: install them first"
    command -v apt-get >/dev/null || die "missing ${pkgs[*]} and no apt-get"
    export DEBIAN_FRONTEND=noninteractive
    log "installing ${pkgs[*]} (apt-get update first)"
    timeout 600 apt-get update -q >/dev/null
    if ! timeout 600 apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; then
        # nginx-light is gone in newer Debian releases; plain nginx is the same thing.
        pkgs=("${pkgs[@]/nginx-light/nginx}")
        timeout 600 apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null
    fi
    command -v wrk >/dev/null && command -v nginx >/dev/null && command -v curl >/dev/null \
        || die "wrk/nginx/curl still missing after apt-get install"
}
install_missing

# ---------------------------------------------------------------------------
# 2. Build
# ---------------------------------------------------------------------------
cd "$ROOT"
if [[ $SKIP_BUILD != 1 ]]; then
    log "cargo build --release"
    timeout "$BUILD_TIMEOUT" cargo build --release --quiet --bin portcullis \
        || die "cargo build --release failed (if src/ is mid-edit, retry in a few minutes)"
fi
[[ -x $BIN ]] || die "$BIN not found"
"$BIN" --help 2>&1 | grep -q 'demo-upstream' || die "$BIN has no demo-upstream subcommand yet"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-bench.XXXXXX")"

# ---------------------------------------------------------------------------
# 3. Processes
# ---------------------------------------------------------------------------
# A free loopback port below the ephemeral range (wrk's client ports live there).
USED_PORTS=" "
free_port() {
    local p _
    for _ in $(seq 1 200); do
        p=$((20000 + RANDOM % 12000))
        [[ $USED_PORTS == *" $p "* ]] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            USED_PORTS+="$p "
            REPLY=$p
            return 0
        fi
    done
    die "no free loopback port found"
}
free_port; UP_PORT=$REPLY
free_port; PC_PORT=$REPLY
free_port; ADMIN_PORT=$REPLY
free_port; NGX_PORT=$REPLY

# The one request of the benchmark, for the curl checks (wrk sends the same
# bytes, from bench/wrk/tools_call.lua).
BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"get_room","arguments":{"room_id":"atrium"}}}'
mcp_post() { # url outfile -> prints http status
    curl -sS -o "$2" -w '%{http_code} %{content_type}' --max-time 5 -X POST "$1" \
        -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2026-07-28' \
        -H 'Mcp-Method: tools/call' \
        -H 'Mcp-Name: get_room' \
        --data-binary "$BODY"
}

wait_ready() { # name pid logfile check-command...
    local name=$1 pid=$2 logf=$3 i
    shift 3
    for i in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$logf" >&2 || true; die "$name exited during start-up"; }
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    tail -n 20 "$logf" >&2 || true
    die "$name not ready after 15 s"
}
upstream_answers() { [[ $(mcp_post "http://127.0.0.1:$UP_PORT/mcp" /dev/null) == 200* ]]; }

log "demo upstream on 127.0.0.1:$UP_PORT (TOKIO_WORKER_THREADS=$UPSTREAM_THREADS)"
TOKIO_WORKER_THREADS=$UPSTREAM_THREADS RUST_LOG=warn \
    "$BIN" demo-upstream --listen "127.0.0.1:$UP_PORT" >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
PIDS+=("$UP_PID")
wait_ready "demo upstream" "$UP_PID" "$TMP/upstream.log" upstream_answers

cat >"$TMP/portcullis.toml" <<EOF
# generated by bench/load.sh
[[listener]]
name = "public"
address = "127.0.0.1:$PC_PORT"

[admin]
address = "127.0.0.1:$ADMIN_PORT"

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
"$BIN" check --config "$TMP/portcullis.toml" >/dev/null || die "portcullis rejects the generated config $TMP/portcullis.toml"
log "portcullis on 127.0.0.1:$PC_PORT (TOKIO_WORKER_THREADS=$PROXY_THREADS)"
TOKIO_WORKER_THREADS=$PROXY_THREADS \
    "$BIN" run --config "$TMP/portcullis.toml" >"$TMP/portcullis.log" 2>&1 &
PC_PID=$!
PIDS+=("$PC_PID")
wait_ready portcullis "$PC_PID" "$TMP/portcullis.log" \
    curl -sf --max-time 2 "http://127.0.0.1:$ADMIN_PORT/readyz"

NGX="$TMP/nginx"
mkdir -p "$NGX"/{client_body,proxy,fastcgi,uwsgi,scgi}
cat >"$NGX/nginx.conf" <<EOF
# generated by bench/load.sh: nginx as a plain reverse proxy to the demo upstream
daemon off;
master_process on;
worker_processes $PROXY_THREADS;
pid $NGX/nginx.pid;
error_log $NGX/error.log warn;

events {
    worker_connections 4096;
    multi_accept on;
}

http {
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;      # never close wrk's connections mid-run
    client_body_buffer_size 64k;     # request bodies stay in memory
    client_body_temp_path $NGX/client_body;
    proxy_temp_path $NGX/proxy;
    fastcgi_temp_path $NGX/fastcgi;
    uwsgi_temp_path $NGX/uwsgi;
    scgi_temp_path $NGX/scgi;

    upstream mcp_upstream {
        server 127.0.0.1:$UP_PORT;
        keepalive 64;
        keepalive_requests 1000000;
        keepalive_timeout 60s;
    }

    server {
        listen 127.0.0.1:$NGX_PORT backlog=4096;
        location /mcp {
            proxy_pass http://mcp_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host 127.0.0.1:$UP_PORT;
            # The forwarding headers Portcullis adds, so the upstream parses the
            # same request either way.
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_set_header X-Forwarded-Host \$http_host;
            proxy_set_header Forwarded "for=\$remote_addr;proto=\$scheme;host=\$http_host";
            proxy_buffering off;
        }
    }
}
EOF
nginx -t -q -p "$NGX/" -e "$NGX/error.log" -c "$NGX/nginx.conf" >/dev/null 2>&1 \
    || { nginx -t -p "$NGX/" -e "$NGX/error.log" -c "$NGX/nginx.conf" || true; die "nginx rejects $NGX/nginx.conf"; }
log "nginx on 127.0.0.1:$NGX_PORT (worker_processes $PROXY_THREADS)"
nginx -p "$NGX/" -e "$NGX/error.log" -c "$NGX/nginx.conf" >"$TMP/nginx.out" 2>&1 &
NGX_PID=$!
PIDS+=("$NGX_PID")
nginx_answers() { [[ $(mcp_post "http://127.0.0.1:$NGX_PORT/mcp" /dev/null) == 200* ]]; }
wait_ready nginx "$NGX_PID" "$NGX/error.log" nginx_answers

declare -A URL=(
    [direct]="http://127.0.0.1:$UP_PORT/mcp"
    [portcullis]="http://127.0.0.1:$PC_PORT/mcp"
    [nginx]="http://127.0.0.1:$NGX_PORT/mcp"
)
# Whose CPU each run is charged with: the proxy (none for direct) and the upstream.
declare -A PROXY_PID=([direct]="" [portcullis]=$PC_PID [nginx]=$NGX_PID)

# ---------------------------------------------------------------------------
# Correctness check before measuring: 200 + a JSON-RPC result on every path.
# ---------------------------------------------------------------------------
for t in "${TARGETS[@]}"; do
    out="$TMP/check-$t.body"
    st=$(mcp_post "${URL[$t]}" "$out") || die "$t: curl failed"
    body=$(head -c 2000 "$out")
    [[ $st == 200* ]] || die "$t: HTTP $st: $body"
    if [[ $st == *event-stream* ]]; then
        # An SSE answer: the JSON-RPC message is in the data: line(s).
        body=$(sed -n 's/^data: *//p' "$out" | tr -d '\n')
    fi
    [[ $body == *'"jsonrpc":"2.0"'* && $body == *'"result":'* && $body == *'"id":1'* ]] \
        || die "$t: HTTP 200 but no JSON-RPC result: $body"
    [[ $body != *'"isError":true'* ]] || die "$t: the tool call failed: $body"
    log "check $t: HTTP ${st%% *}, ${st#* }, $(wc -c <"$out") bytes: $(head -c 160 "$out")"
done

# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------
# utime+stime (clock ticks) of a process and its direct children (nginx's
# workers). /proc/PID/stat covers all threads of the process.
cpu_ticks() {
    local pid=$1 total=0 p t
    [[ -n $pid ]] || { echo 0; return; }
    for p in "$pid" $(cat /proc/"$pid"/task/*/children 2>/dev/null || true); do
        t=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' /proc/"$p"/stat 2>/dev/null || echo 0)
        total=$((total + t))
    done
    echo "$total"
}
CLK_TCK=$(getconf CLK_TCK)
NCPU=$(nproc)
# Machine-wide busy and total ticks (all CPUs) from /proc/stat -> REPLY="busy total".
machine_ticks() {
    local _c u n s i w q sq st _rest
    read -r _c u n s i w q sq st _rest </proc/stat
    REPLY="$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}
# CPU seconds of this shell's reaped children (wrk, via timeout) -> REPLY.
# `times` must run in this shell, not in a $(...) subshell.
child_cpu() {
    times >"$TMP/times"
    REPLY=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.3f", t }' "$TMP/times")
}

# Before each target's warm-up: wait (at most QUIET_MAX s) until the machine is
# quiet, i.e. CPU use by anything (our proxies and upstream are idle between
# runs) is below OTHER_WARN % of one CPU over a 1 s sample. Other people's
# builds on a 2-core box otherwise decide the result.
wait_quiet() {
    local start=$SECONDS a b busy said=0
    while :; do
        machine_ticks; a=$REPLY
        sleep 1
        machine_ticks; b=$REPLY
        busy=$(awk -v a="$a" -v b="$b" -v n="$NCPU" 'BEGIN { split(a, x, " "); split(b, y, " ");
            t = y[2] - x[2]; if (t <= 0) t = 1; printf "%.0f", 100 * (y[1] - x[1]) / (t / n) }')
        ((busy <= OTHER_WARN)) && return 0
        if ((SECONDS - start >= QUIET_MAX)); then
            log "machine still busy (${busy}% of a CPU) after ${QUIET_MAX}s: measuring anyway"
            return 0
        fi
        ((said)) || { log "waiting for the machine to quiet down (${busy}% of a CPU busy; at most ${QUIET_MAX}s)"; said=1; }
    done
}

# wrk runs in the background and is waited for, so that a TERM/INT to this
# script is handled at once (cleanup stops it) rather than after the run.
WRK_PID=""
run_wrk() { # url seconds outfile
    local rc=0
    timeout --kill-after=5 $(($2 + 30)) \
        wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"$2s" --timeout 5s -s "$LUA" "$1" >"$3" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=""
    return "$rc"
}

field() { # name line -> value
    local re="(^| )$1=([^ ]+)"
    [[ $2 =~ $re ]] && echo "${BASH_REMATCH[2]}" || echo ""
}

ERRORS=()
RESULTS="$TMP/results.tsv"
NOISY=()
printf 'target\trep\trps\tp50_us\tp99_us\tproxy_cpu_us_per_req\tupstream_cpu_us_per_req\trequests\tbytes_per_req\twrk_cpu_us_per_req\tidle_pct\tother_pct\n' >"$RESULTS"

total_s=$((REPS * ${#TARGETS[@]} * (DURATION + WARMUP + 2)))
log "measuring: ${REPS} rep(s) x ${TARGETS[*]}, ${DURATION}s each + ${WARMUP}s warm-up, ${CONNECTIONS} connections, wrk -t${WRK_THREADS} (~${total_s}s)"
printf '\n%-11s %3s %10s %9s %9s %9s %13s %13s %11s %6s %7s  %s\n' target rep 'req/s' 'p50 ms' 'p90 ms' 'p99 ms' \
    'proxy µs/req' 'upstr µs/req' 'wrk µs/req' 'idle%' 'other%' errors
for rep in $(seq 1 "$REPS"); do
    for t in "${TARGETS[@]}"; do
        url=${URL[$t]}
        ((QUIET_MAX > 0)) && wait_quiet
        if ((WARMUP > 0)); then
            run_wrk "$url" "$WARMUP" "$TMP/warmup-$t-$rep.txt" || true
        fi
        pp=${PROXY_PID[$t]}
        p0=$(cpu_ticks "$pp"); u0=$(cpu_ticks "$UP_PID")
        child_cpu; w0=$REPLY; machine_ticks; m0=$REPLY
        rc=0
        run_wrk "$url" "$DURATION" "$TMP/wrk-$t-$rep.txt" || rc=$?
        machine_ticks; m1=$REPLY; child_cpu; w1=$REPLY
        p1=$(cpu_ticks "$pp"); u1=$(cpu_ticks "$UP_PID")
        line=$(grep '^WRKRESULT ' "$TMP/wrk-$t-$rep.txt" || true)
        if ((rc != 0)) || [[ -z $line ]]; then
            cat "$TMP/wrk-$t-$rep.txt" >&2
            die "wrk against $t failed (exit $rc)"
        fi
        for pid in "$UP_PID" "$PC_PID" "$NGX_PID"; do
            kill -0 "$pid" 2>/dev/null || die "process $pid died during the $t run (logs in $TMP)"
        done
        req=$(field requests "$line")
        ((req > 0)) || die "wrk completed no request against $t"
        errs=""
        for e in connect read write status timeout; do
            n=$(field "$e" "$line")
            ((n == 0)) || errs+="$e=$n "
        done
        if [[ -n $errs ]]; then
            ERRORS+=("$t rep $rep: ${errs% }")
        fi
        # Per request: proxy, upstream and wrk CPU; over the run: machine idle %
        # and "other" = CPU used by anything but proxy+upstream+wrk, in % of one
        # CPU (other work on the box skews a run; see the warning below).
        read -r rps p50 p90 p99 pcpu ucpu wcpu idle other bpr < <(awk -v l="$line" -v p0="$p0" -v p1="$p1" \
            -v u0="$u0" -v u1="$u1" -v w0="$w0" -v w1="$w1" -v m0="$m0" -v m1="$m1" -v ncpu="$NCPU" \
            -v hz="$CLK_TCK" -v req="$req" -v pp="$pp" 'BEGIN {
                n = split(l, kv, " "); for (i = 2; i <= n; i++) { split(kv[i], a, "="); f[a[1]] = a[2] }
                pt = (pp == "") ? 0 : p1 - p0; ut = u1 - u0; wt = (w1 - w0) * hz
                pc = (pp == "") ? "-" : sprintf("%.2f", pt / hz * 1e6 / req)
                split(m0, b0, " "); split(m1, b1, " ")
                busy = b1[1] - b0[1]; total = b1[2] - b0[2]; if (total <= 0) total = 1
                idle = 100 * (total - busy) / total
                other = 100 * (busy - pt - ut - wt) / (total / ncpu); if (other < 0) other = 0
                printf "%s %s %s %s %s %.2f %.2f %.0f %.0f %.0f\n", f["rps"], f["p50_us"], f["p90_us"], f["p99_us"], pc,
                    ut / hz * 1e6 / req, wt / hz * 1e6 / req, idle, other, f["bytes"] / req }')
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$rep" "$rps" "$p50" "$p99" "$pcpu" "$ucpu" \
            "$req" "$bpr" "$wcpu" "$idle" "$other" >>"$RESULTS"
        printf '%-11s %3s %10.0f %9.3f %9.3f %9.3f %13s %13s %11s %6s %7s  %s\n' "$t" "$rep" "$rps" \
            "$(awk -v x="$p50" 'BEGIN{print x/1000}')" "$(awk -v x="$p90" 'BEGIN{print x/1000}')" \
            "$(awk -v x="$p99" 'BEGIN{print x/1000}')" "$pcpu" "$ucpu" "$wcpu" "$idle" "$other" "${errs:-0}"
        if ((other > OTHER_WARN)); then
            NOISY+=("$t rep $rep: other processes used ${other}% of a CPU")
        fi
        sleep 1
    done
done

# ---------------------------------------------------------------------------
# Report: medians per target, ratios
# ---------------------------------------------------------------------------
median() { # target column max_other -> median of that column over the runs whose other% <= max_other
    awk -F'\t' -v t="$1" -v c="$2" -v mo="$3" 'NR > 1 && $1 == t && $c != "-" && $12 + 0 <= mo + 0 { print $c }' "$RESULTS" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
f2() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.2f", x }'; }
ms() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.3f", x / 1000 }'; }
report() { # max_other title
    local t n
    declare -A M
    echo
    echo "$2:"
    printf '%-11s %4s %10s %9s %9s %14s %14s %10s\n' target runs 'req/s' 'p50 ms' 'p99 ms' 'proxy µs/req' 'upstr µs/req' 'bytes/resp'
    for t in "${TARGETS[@]}"; do
        n=$(awk -F'\t' -v t="$t" -v mo="$1" 'NR > 1 && $1 == t && $12 + 0 <= mo + 0' "$RESULTS" | wc -l)
        M[$t,rps]=$(median "$t" 3 "$1"); M[$t,p50]=$(median "$t" 4 "$1"); M[$t,p99]=$(median "$t" 5 "$1")
        M[$t,pcpu]=$(median "$t" 6 "$1"); M[$t,ucpu]=$(median "$t" 7 "$1"); M[$t,bpr]=$(median "$t" 9 "$1")
        printf '%-11s %4s %10s %9s %9s %14s %14s %10s\n' "$t" "$n" "${M[$t,rps]%.*}" "$(ms "${M[$t,p50]}")" \
            "$(ms "${M[$t,p99]}")" "$(f2 "${M[$t,pcpu]}")" "$(f2 "${M[$t,ucpu]}")" "${M[$t,bpr]%.*}"
    done
    cat <<EOF
ratios of these medians:
  throughput   portcullis/direct = $(ratio "${M[portcullis,rps]}" "${M[direct,rps]}")   portcullis/nginx = $(ratio "${M[portcullis,rps]}" "${M[nginx,rps]}")   (higher is better)
  p99 latency  portcullis/direct = $(ratio "${M[portcullis,p99]}" "${M[direct,p99]}")   portcullis/nginx = $(ratio "${M[portcullis,p99]}" "${M[nginx,p99]}")   (lower is better)
  CPU/request  portcullis/nginx  = $(ratio "${M[portcullis,pcpu]}" "${M[nginx,pcpu]}")   (lower is better)
EOF
}

threads() { ls /proc/"$1"/task 2>/dev/null | wc -l; }
ngx_workers=$(cat /proc/"$NGX_PID"/task/*/children 2>/dev/null | wc -w)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || commit+=" (+ uncommitted changes)"
cat <<EOF

== Portcullis whole-proxy load benchmark: MCP tools/call get_room ==
commit:   $commit
machine:  $(nproc) CPU(s), $(uname -sr); $(nginx -v 2>&1 | sed 's/^nginx version: //'); $(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}')
load:     wrk -t$WRK_THREADS -c$CONNECTIONS, ${DURATION}s per run (+${WARMUP}s warm-up), $REPS rep(s), interleaved ${TARGETS[*]}
fairness: portcullis runs with TOKIO_WORKER_THREADS=$PROXY_THREADS (tokio worker threads),
          nginx with worker_processes $PROXY_THREADS (upstream keepalive 64, HTTP/1.1, proxy_buffering off);
          the demo upstream with TOKIO_WORKER_THREADS=$UPSTREAM_THREADS. No CPU pinning.
          OS threads at the end: portcullis $(threads "$PC_PID"), upstream $(threads "$UP_PID"), nginx $ngx_workers worker process(es).
cpu:      utime+stime from /proc/PID/stat (all threads; nginx master + workers) over each
          measured run / requests completed. 'proxy' = the proxy process, 'upstream' = demo server;
          per run also wrk's own CPU, machine idle % and 'other' = CPU of everything else (% of one CPU).
EOF
report 1000000 "medians over all $REPS rep(s)"
if ((${#NOISY[@]})); then
    report "$OTHER_WARN" "medians over the quiet runs only (other% <= $OTHER_WARN; '-' = none was quiet)"
fi
for f in "$TMP/portcullis.log" "$TMP/upstream.log" "$NGX/error.log"; do
    # The demo upstream announces itself on stderr; anything else is worth a look.
    n=$(grep -cv '^demo MCP server on ' "$f" 2>/dev/null || true)
    if ((n > 0)); then
        echo
        echo "note: ${f#"$TMP/"} has $n line(s) (first 5):"
        grep -v '^demo MCP server on ' "$f" | head -n 5 | sed $'s/\x1b\\[[0-9;]*m//g' | cut -c1-300 | sed 's/^/  /'
    fi
done
if ((${#NOISY[@]})); then
    echo
    echo "warning: the machine was not quiet during some runs (their throughput/latency are suspect;"
    echo "         CPU per request is less affected):"
    printf '  %s\n' "${NOISY[@]}"
fi
if ((${#ERRORS[@]})); then
    echo
    echo "wrk errors (non-2xx responses = status; the rest are socket errors):"
    printf '  %s\n' "${ERRORS[@]}"
    log "some runs had errors: their figures are suspect"
    exit 3
else
    echo
    echo "wrk errors: none (no non-2xx responses, no socket errors)"
fi
