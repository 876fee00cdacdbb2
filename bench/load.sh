#!/usr/bin/env bash
# Whole-proxy load benchmark for Portcullis.
#
# Starts bench-upstream (bench/upstream: a minimal, fast MCP answerer, on
# three ports: three upstreams), then Portcullis and nginx (a plain, tuned
# reverse proxy) in front of it, each with a plain and a TLS listener, and
# measures per scenario
#     direct (wrk -> upstream; plain scenarios only),
#     portcullis (wrk -> portcullis -> upstream, a route to one upstream),
#     fed (fed* scenarios: wrk -> portcullis's route federating the three upstreams),
#     bridged (bridged scenario: a 2025-11-25 client, wrk -> portcullis's route to the
#              upstream configured as speaking only 2026-07-28: a bridged session),
#     nginx (wrk -> nginx -> upstream),
#     baseline, baseline-fed, baseline-bridged (another Portcullis binary, when
#              BASELINE_BIN is set)
# interleaved (for each rep, each scenario, each target) and prints medians:
# req/s, p50/p99, user and kernel CPU per request of the proxy, the upstream's
# CPU per request (to subtract), RSS, and the ratios. Everything listens on and
# talks to 127.0.0.1 only. See bench/README.md.
#
# Knobs (environment):
#   SCENARIOS="small@16 small@64 sse@64 big@64 mrtr@64 tls@64 handshake@16 fedlist@16 fedcall@16 bridged@16"
#                    scenario@connections, run in this order each rep:
#                    small     tools/call get_room, a small complete result
#                    sse       tools/call watch_room: 3 progress events, then the result
#                    big       tools/call room_report: a ~256 KiB complete result
#                    mrtr      book_room: input_required (policy, sealing) -> retry -> complete
#                    tls       small over TLS 1.3 on the client side, keep-alive
#                    handshake small over TLS 1.3, Connection: close (a handshake per request)
#                    fedlist   tools/list: fed = merged from 3 upstreams; the others = one upstream's
#                    fedcall   small, through the federated route (fed: bench_get_room) and the others
#                    bridged   small; bridged: the same tools/call get_room from a 2025-11-25 client
#                              in a bridged session (bench/wrk/bridged.lua: initialize, then the
#                              call with its Mcp-Session-Id), beside the others' 2026-07-28 call
#                    stdio     small, to a stdio upstream (bench-upstream --stdio, STDIO_PROCESSES
#                              processes): wrk -> portcullis's /stdio route, against the same program
#                              called directly over stdio by `bench-upstream --drive` (one request
#                              in flight per process, as the gateway calls it); measured after the
#                              others, in its own table, interleaved per rep
#   DURATION=10      seconds per measured run
#   REPS=3           repetitions
#   WARMUP=2         seconds of unmeasured load before every measured run (0 = none)
#   WRK_THREADS=1    wrk threads (the machine has 2 cores; wrk needs one)
#   PROXY_THREADS=1  TOKIO_WORKER_THREADS for portcullis; nginx worker_processes
#   UPSTREAM_THREADS=1  TOKIO_WORKER_THREADS for bench-upstream
#   STDIO_PROCESSES=1   processes of the stdio scenario's program (max_processes; the driver's copies)
#   RUNTIME=per_core this tree's binary's [runtime] model: per_core (PROXY_THREADS
#                    single-threaded workers, the gateway's default) or shared
#                    (TOKIO_WORKER_THREADS workers)
#   BASELINE_RUNTIME=per_core  the same for the baseline binary (BASELINE_BIN may be
#                    this tree's binary: per_core against shared in one run; a binary
#                    older than per_core needs BASELINE_RUNTIME=shared)
#   BASELINE_BIN=    a second portcullis binary to measure beside this tree's
#                    (same config; e.g. a build of an older commit): before/after in one run
#   SKIP_BUILD=1     use the existing target/release binaries
#   KEEP=1           keep the temp dir (configs, logs, raw wrk output, results.tsv)
#   BUILD_TIMEOUT=1800  seconds allowed for cargo build
#   OTHER_WARN=10    warn when processes other than ours used more than this %
#                    of a CPU during a measured run (a busy box skews results)
#   QUIET_MAX=60     before each run wait up to this many seconds for the machine
#                    to be quiet (< OTHER_WARN % of a CPU busy); 0 = don't wait
set -euo pipefail

SCENARIOS=${SCENARIOS:-"small@16 small@64 sse@64 big@64 mrtr@64 tls@64 handshake@16 fedlist@16 fedcall@16 bridged@16"}
DURATION=${DURATION:-10}
REPS=${REPS:-3}
WARMUP=${WARMUP:-2}
WRK_THREADS=${WRK_THREADS:-1}
RUNTIME=${RUNTIME:-per_core}
BASELINE_RUNTIME=${BASELINE_RUNTIME:-per_core}
PROXY_THREADS=${PROXY_THREADS:-1}
UPSTREAM_THREADS=${UPSTREAM_THREADS:-1}
STDIO_PROCESSES=${STDIO_PROCESSES:-1}
BASELINE_BIN=${BASELINE_BIN:-}
SKIP_BUILD=${SKIP_BUILD:-0}
OTHER_WARN=${OTHER_WARN:-10}
QUIET_MAX=${QUIET_MAX:-60}
KEEP=${KEEP:-0}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-1800}

for v in DURATION REPS WARMUP WRK_THREADS PROXY_THREADS UPSTREAM_THREADS STDIO_PROCESSES BUILD_TIMEOUT OTHER_WARN QUIET_MAX; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "load.sh: $v must be a non-negative integer (got '${!v}')" >&2; exit 2; }
done
((DURATION > 0 && REPS > 0 && WRK_THREADS > 0 && PROXY_THREADS > 0 && UPSTREAM_THREADS > 0)) \
    || { echo "load.sh: DURATION, REPS and the thread counts must be > 0" >&2; exit 2; }
for s in $SCENARIOS; do
    [[ $s =~ ^(small|sse|big|mrtr|tls|handshake|fedlist|fedcall|bridged|stdio)@[0-9]+$ ]] \
        || { echo "load.sh: bad scenario '$s' (expected NAME@CONNECTIONS)" >&2; exit 2; }
done

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
BIN="$ROOT/target/release/portcullis"
UP_BIN="$ROOT/target/release/bench-upstream"

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
    command -v openssl >/dev/null || pkgs+=(openssl)
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
    for c in wrk nginx curl openssl; do
        command -v "$c" >/dev/null || die "$c still missing after apt-get install"
    done
}
install_missing

# ---------------------------------------------------------------------------
# 2. Build
# ---------------------------------------------------------------------------
cd "$ROOT"
if [[ $SKIP_BUILD != 1 ]]; then
    log "cargo build --release (portcullis, bench-upstream)"
    CARGO_INCREMENTAL=0 timeout "$BUILD_TIMEOUT" cargo build --release --quiet \
        -p portcullis -p portcullis-bench-upstream --bin portcullis --bin bench-upstream \
        || die "cargo build --release failed (if src/ is mid-edit, retry in a few minutes)"
fi
[[ -x $BIN ]] || die "$BIN not found"
[[ -x $UP_BIN ]] || die "$UP_BIN not found (cargo build --release -p portcullis-bench-upstream)"
[[ -z $BASELINE_BIN || -x $BASELINE_BIN ]] || die "BASELINE_BIN=$BASELINE_BIN is not executable"

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
# Two more ports of the same bench-upstream process: the other two upstreams
# of the federated route (their own pools and connections in the proxies).
free_port; UP_PORT2=$REPLY
free_port; UP_PORT3=$REPLY
declare -A PORT TLS_PORT ADMIN
for t in portcullis nginx baseline; do
    free_port; PORT[$t]=$REPLY
    free_port; TLS_PORT[$t]=$REPLY
    free_port; ADMIN[$t]=$REPLY
done

# One certificate for both proxies: EC P-256, for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1 || die "openssl could not make a certificate"

# The request body of each scenario (wrk sends the same bytes, from bench/wrk).
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"progressToken":"p1"}'
body_of() { # tool (tools/call) or "" (tools/list)
    if [[ -z $1 ]]; then
        printf '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{%s}}' "$META"
    else
        printf '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{%s,"name":"%s","arguments":{"room_id":"atrium"}}}' "$META" "$1"
    fi
}
mcp_post() { # url tool-or-"" outfile -> prints "status content-type"
    local hdr=() method=tools/list
    [[ -z $2 ]] || { hdr=(-H "Mcp-Name: $2"); method=tools/call; }
    curl -ksS -o "$3" -w '%{http_code} %{content_type}' --max-time 5 -X POST "$1" \
        -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2026-07-28' \
        -H "Mcp-Method: $method" \
        "${hdr[@]}" \
        --data-binary "$(body_of "$2")"
}
# The bridged scenario: a 2025-11-25 client's initialize, then its tools/call
# get_room in the session (the bytes of bench/wrk/bridged.lua).
LEGACY=2025-11-25
LEGACY_INIT='{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"'$LEGACY'","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}'
LEGACY_CALL='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p1"},"name":"get_room","arguments":{"room_id":"atrium"}}}'
legacy_post() { # url outfile session-or-"" body [curl args...] -> prints "status content-type"
    local url=$1 outf=$2 session=$3 body=$4 hdr=()
    shift 4
    [[ -z $session ]] || hdr=(-H "Mcp-Session-Id: $session")
    curl -ksS -o "$outf" -w '%{http_code} %{content_type}' --max-time 5 -X POST "$url" \
        -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' \
        -H "MCP-Protocol-Version: $LEGACY" \
        "${hdr[@]}" "$@" \
        --data-binary "$body"
}
# initialize (answered by the gateway from the upstream's server/discover,
# under the configured name), then the call in its session -> REPLY = the
# call's "status content-type", its body in outfile.
bridged_call() { # url outfile
    local st session init
    st=$(legacy_post "$1" "$TMP/bridged-init.body" "" "$LEGACY_INIT" -D "$TMP/bridged-init.head") \
        || die "bridged initialize: curl failed"
    [[ $st == 200* ]] || die "bridged initialize: HTTP $st: $(head -c 2000 "$TMP/bridged-init.body")"
    session=$(awk 'tolower($1) == "mcp-session-id:" { print $2 }' "$TMP/bridged-init.head" | tr -d '\r')
    [[ -n $session ]] || die "bridged initialize: no Mcp-Session-Id: $(cat "$TMP/bridged-init.head")"
    init=$(head -c 4000 "$TMP/bridged-init.body")
    # The gateway's own answer (the client's version, the configured name,
    # the upstream's version from its server/discover), not the upstream's.
    [[ $init == *"\"protocolVersion\":\"$LEGACY\""* && $init == *'"name":"Bench upstream (bridged)"'* \
        && $init == *'"version":"0.1.0"'* ]] || die "bridged initialize: not the gateway's bridged answer: $init"
    REPLY=$(legacy_post "$1" "$2" "$session" "$LEGACY_CALL") || die "bridged tools/call: curl failed"
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
answers() { [[ $(mcp_post "$1" get_room /dev/null) == 200* ]]; }

log "bench-upstream on 127.0.0.1:$UP_PORT, :$UP_PORT2, :$UP_PORT3 (TOKIO_WORKER_THREADS=$UPSTREAM_THREADS)"
TOKIO_WORKER_THREADS=$UPSTREAM_THREADS "$UP_BIN" "127.0.0.1:$UP_PORT" "127.0.0.1:$UP_PORT2" "127.0.0.1:$UP_PORT3" \
    >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
PIDS+=("$UP_PID")
wait_ready "bench-upstream" "$UP_PID" "$TMP/upstream.log" answers "http://127.0.0.1:$UP_PORT/mcp"

start_portcullis() { # target binary
    local t=$1 bin=$2 conf="$TMP/$1.toml"
    cat >"$conf" <<EOF
# generated by bench/load.sh
[[listener]]
name = "public"
address = "127.0.0.1:${PORT[$t]}"

[[listener]]
name = "tls"
address = "127.0.0.1:${TLS_PORT[$t]}"
[listener.tls]
cert = "$TMP/cert.pem"
key = "$TMP/key.pem"

[admin]
address = "127.0.0.1:${ADMIN[$t]}"

[log]
level = "warn"

[[upstream]]
id = "bench"
name = "Bench upstream"
url = "http://127.0.0.1:$UP_PORT/mcp"
# Each sealed requestState is redeemed once (the mrtr scenario pays for it).
single_use_state = true

# The other two upstreams of the federated route (the same bench-upstream
# process on two more ports).
[[upstream]]
id = "bench2"
name = "Bench upstream 2"
url = "http://127.0.0.1:$UP_PORT2/mcp"

[[upstream]]
id = "bench3"
name = "Bench upstream 3"
url = "http://127.0.0.1:$UP_PORT3/mcp"

[[route]]
path = "/mcp"
upstream = "bench"

# The fed* scenarios: one endpoint over the three upstreams, names exposed
# under each upstream's id (bench_get_room goes to "bench", as /mcp's get_room).
[[route]]
path = "/fed"
name = "bench-fed"
upstreams = ["bench", "bench2", "bench3"]
EOF
    if ((WANT_STDIO)); then
        cat >>"$conf" <<EOF

# The stdio scenario: bench-upstream as a stdio program, started by the gateway.
[[upstream]]
id = "bench-stdio"
name = "Bench upstream (stdio)"
command = ["$UP_BIN", "--stdio"]
generations = ["2026-07-28"]
max_processes = $STDIO_PROCESSES
eager = true

[[route]]
path = "/stdio"
upstream = "bench-stdio"
EOF
    fi
    if ((WANT_BRIDGED)); then
        cat >>"$conf" <<EOF

# The bridged scenario: the same bench-upstream (its own pool), named as
# speaking only 2026-07-28, so a 2025-11-25 client's initialize on /bridged is
# answered by the gateway from its server/discover and each request of the
# session is carried across as a 2026-07-28 request.
[[upstream]]
id = "bench-bridged"
name = "Bench upstream (bridged)"
url = "http://127.0.0.1:$UP_PORT/mcp"
generations = ["2026-07-28"]

[[route]]
path = "/bridged"
upstream = "bench-bridged"
EOF
    fi
    local model=$RUNTIME
    [[ $t == baseline ]] && model=$BASELINE_RUNTIME
    if [[ $model == per_core ]]; then
        printf '\n[runtime]\nmodel = "per_core"\nworkers = %s\n' "$PROXY_THREADS" >>"$conf"
    else
        printf '\n[runtime]\nmodel = "shared"\n' >>"$conf"
    fi
    "$bin" check --config "$conf" >/dev/null || die "$t rejects the generated config $conf"
    log "$t on 127.0.0.1:${PORT[$t]} and TLS :${TLS_PORT[$t]} (runtime $model, $PROXY_THREADS worker(s))"
    TOKIO_WORKER_THREADS=$PROXY_THREADS "$bin" run --config "$conf" >"$TMP/$t.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    wait_ready "$t" "$pid" "$TMP/$t.log" curl -sf --max-time 2 "http://127.0.0.1:${ADMIN[$t]}/readyz"
    REPLY=$pid
}

# The /bridged route is configured only when a bridged scenario runs (a
# BASELINE_BIN from before the bridge would reject its `generations`).
WANT_BRIDGED=0
[[ " $SCENARIOS" == *" bridged@"* ]] && WANT_BRIDGED=1
# Likewise the /stdio route (measured on its own, after the others).
WANT_STDIO=0
[[ " $SCENARIOS" == *" stdio@"* ]] && WANT_STDIO=1
STDIO_SPECS=$(tr ' ' '\n' <<<"$SCENARIOS" | grep '^stdio@' || true)
SCENARIOS=$(tr ' ' '\n' <<<"$SCENARIOS" | grep -v '^stdio@' | tr '\n' ' ' || true)
SCENARIOS=${SCENARIOS% }
declare -A PROXY_PID=([direct]="")
start_portcullis portcullis "$BIN"; PROXY_PID[portcullis]=$REPLY
PROXY_PID[fed]=${PROXY_PID[portcullis]}
PROXY_PID[bridged]=${PROXY_PID[portcullis]}
TARGETS=(direct portcullis fed bridged nginx)
if [[ -n $BASELINE_BIN ]]; then
    start_portcullis baseline "$BASELINE_BIN"; PROXY_PID[baseline]=$REPLY
    PROXY_PID[baseline-fed]=${PROXY_PID[baseline]}
    PROXY_PID[baseline-bridged]=${PROXY_PID[baseline]}
    TARGETS+=(baseline baseline-fed baseline-bridged)
fi

NGX="$TMP/nginx"
mkdir -p "$NGX"/{client_body,proxy,fastcgi,uwsgi,scgi}
cat >"$NGX/nginx.conf" <<EOF
# generated by bench/load.sh: nginx as a plain reverse proxy to bench-upstream
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

    # TLS 1.3 only, the same certificate as Portcullis.
    ssl_certificate $TMP/cert.pem;
    ssl_certificate_key $TMP/key.pem;
    ssl_protocols TLSv1.3;

    server {
        listen 127.0.0.1:${PORT[nginx]} backlog=4096;
        listen 127.0.0.1:${TLS_PORT[nginx]} ssl backlog=4096;
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
log "nginx on 127.0.0.1:${PORT[nginx]} and TLS :${TLS_PORT[nginx]} (worker_processes $PROXY_THREADS)"
nginx -p "$NGX/" -e "$NGX/error.log" -c "$NGX/nginx.conf" >"$TMP/nginx.out" 2>&1 &
PROXY_PID[nginx]=$!
PIDS+=("${PROXY_PID[nginx]}")
wait_ready nginx "${PROXY_PID[nginx]}" "$NGX/error.log" answers "http://127.0.0.1:${PORT[nginx]}/mcp"

url_of() { # target tls(0/1)
    local t=$1 path=/mcp
    # fed and baseline-fed: the federated route of portcullis and baseline;
    # bridged and baseline-bridged: their route to the 2026-07-28-only upstream.
    [[ $t == *fed ]] && { path=/fed; t=${t%fed}; t=${t%-}; t=${t:-portcullis}; }
    [[ $t == *bridged ]] && { path=/bridged; t=${t%bridged}; t=${t%-}; t=${t:-portcullis}; }
    if [[ $t == direct ]]; then echo "http://127.0.0.1:$UP_PORT/mcp"
    elif (($2)); then echo "https://127.0.0.1:${TLS_PORT[$t]}$path"
    else echo "http://127.0.0.1:${PORT[$t]}$path"; fi
}
# Scenario -> wrk script (lua_of), tool (none: tools/list), TLS, Connection: close.
declare -A LUA=([mrtr]=mrtr.lua) TOOL=([sse]=watch_room [big]=room_report [mrtr]=book_room [fedlist]="") \
    IS_TLS=([tls]=1 [handshake]=1) CLOSE=([handshake]=1)
lua_of() { # scenario target -> the wrk script
    # A bridged target is a 2025-11-25 client in a session.
    if [[ $2 == *bridged ]]; then echo bridged.lua; else echo "${LUA[$1]:-tools_call.lua}"; fi
}
tool_of() { # scenario target -> the tool it calls ("" for tools/list)
    local tool=get_room
    [[ -v "TOOL[$1]" ]] && tool=${TOOL[$1]}
    # The federated route exposes the tool under its upstream's prefix.
    [[ -n $tool && $2 == *fed ]] && tool=bench_$tool
    echo "$tool"
}
targets_of() { # scenario -> REPLY_TARGETS
    REPLY_TARGETS=()
    local t
    for t in "${TARGETS[@]}"; do
        [[ $t == direct && -n ${IS_TLS[$1]:-} ]] && continue
        [[ $t == *fed && $1 != fed* ]] && continue
        [[ $t == *bridged && $1 != bridged ]] && continue
        REPLY_TARGETS+=("$t")
    done
}

# ---------------------------------------------------------------------------
# Correctness check before measuring: 200 + a JSON-RPC result on every path.
# ---------------------------------------------------------------------------
declare -A CHECKED
for spec in $SCENARIOS; do
    sc=${spec%@*}
    tls=${IS_TLS[$sc]:-0}
    targets_of "$sc"
    for t in "${REPLY_TARGETS[@]}"; do
        tool=$(tool_of "$sc" "$t")
        what=${tool:-tools/list}
        key="$t/$what/$tls"
        [[ -n ${CHECKED[$key]:-} ]] && continue
        CHECKED[$key]=1
        out="$TMP/check-$t-${what/\//-}-$tls.body"
        if [[ $t == *bridged ]]; then
            bridged_call "$(url_of "$t" "$tls")" "$out"; st=$REPLY
        else
            st=$(mcp_post "$(url_of "$t" "$tls")" "$tool" "$out") || die "$t: curl failed"
        fi
        body=$(head -c 8000 "$out")
        [[ $st == 200* ]] || die "$t $what: HTTP $st: $body"
        if [[ $st == *event-stream* ]]; then
            body=$(sed -n 's/^data: *//p' "$out" | tail -n 1)
        fi
        [[ $body == *'"jsonrpc":"2.0"'* && $body == *'"result":'* && $body == *'"id":1'* ]] \
            || die "$t $what: HTTP 200 but no JSON-RPC result: $body"
        [[ $body != *'"isError":true'* ]] || die "$t $what: the tool call failed: $body"
        # A bridged result comes back as 2025-11-25 has it (no resultType),
        # with the upstream's answer.
        [[ $t != *bridged || ($body != *'"resultType"'* && $body == *'"seats":24'*) ]] \
            || die "$t $what: not a bridged 2025-11-25 result: $body"
        if [[ -z $tool ]]; then
            # Every upstream's four tools, under its prefix on the federated
            # route, none left out.
            n=$(grep -o '"inputSchema":' <<<"$body" | wc -l)
            want=4
            [[ $t == *fed ]] && want=12
            ((n == want)) || die "$t tools/list: $n tools, expected $want: $body"
            [[ $body != *'dev.portcullis/federation'* ]] || die "$t tools/list: an upstream was left out: $body"
            if [[ $t == *fed ]]; then
                for p in bench bench2 bench3; do
                    [[ $body == *"\"name\":\"${p}_get_room\""* ]] || die "$t tools/list: no ${p}_get_room: $body"
                done
            fi
        fi
        log "check $t $what$( ((tls)) && echo ' (TLS)')$([[ $t == *bridged ]] && echo ' in a 2025-11-25 session'): HTTP ${st%% *}, ${st#* }, $(wc -c <"$out") bytes"
    done
done

# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------
# utime and stime (clock ticks) of a process and its direct children (nginx's
# workers) -> "user sys". /proc/PID/stat covers all threads of the process.
cpu_ticks() {
    local pid=$1 u=0 s=0 p a b
    [[ -n $pid ]] || { echo "0 0"; return; }
    for p in "$pid" $(cat /proc/"$pid"/task/*/children 2>/dev/null || true); do
        read -r a b < <(awk '{ sub(/^.*\) /, ""); print $12, $13 }' /proc/"$p"/stat 2>/dev/null || echo "0 0")
        u=$((u + a)); s=$((s + b))
    done
    echo "$u $s"
}
# Resident memory (KiB) of a process and its direct children.
rss_kib() {
    local pid=$1 total=0 p r
    [[ -n $pid ]] || { echo 0; return; }
    for p in "$pid" $(cat /proc/"$pid"/task/*/children 2>/dev/null || true); do
        r=$(awk '/^VmRSS:/ { print $2 }' /proc/"$p"/status 2>/dev/null || echo 0)
        total=$((total + ${r:-0}))
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

# Before each warm-up: wait (at most QUIET_MAX s) until the machine is quiet,
# i.e. CPU use by anything (our processes are idle between runs) is below
# OTHER_WARN % of one CPU over a 1 s sample.
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
run_wrk() { # scenario target connections url seconds outfile
    local rc=0 sc=$1 tool method=tools/call
    tool=$(tool_of "$sc" "$2")
    [[ -n $tool ]] || method=tools/list
    MCP_METHOD=$method MCP_TOOL=$tool MCP_CLOSE=${CLOSE[$sc]:-0} \
        timeout --kill-after=5 $(($5 + 30)) \
        wrk -t"$WRK_THREADS" -c"$3" -d"$5s" --timeout 5s -s "$BENCH_DIR/wrk/$(lua_of "$sc" "$2")" "$4" >"$6" 2>&1 &
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
COLS='scenario target rep rps p50_us p99_us user_us sys_us cpu_us upstream_us rss_kib requests bytes_per_req wrk_us idle_pct other_pct'
tr ' ' '\t' <<<"$COLS" >"$RESULTS"

nruns=0
for spec in $SCENARIOS; do targets_of "${spec%@*}"; nruns=$((nruns + ${#REPLY_TARGETS[@]})); done
total_s=$((REPS * nruns * (DURATION + WARMUP + 2)))
log "measuring: ${REPS} rep(s) x [$SCENARIOS] x [${TARGETS[*]}], ${DURATION}s each + ${WARMUP}s warm-up, wrk -t${WRK_THREADS} (~${total_s}s)"
printf '\n%-13s %-12s %3s %9s %8s %8s %8s %8s %8s %8s %8s %7s %7s  %s\n' scenario target rep 'req/s' 'p50 ms' 'p99 ms' \
    'user µs' 'sys µs' 'cpu µs' 'upst µs' 'RSS MiB' 'idle%' 'other%' errors
for rep in $(seq 1 "$REPS"); do
    for spec in $SCENARIOS; do
        sc=${spec%@*}
        conns=${spec#*@}
        targets_of "$sc"
        for t in "${REPLY_TARGETS[@]}"; do
            url=$(url_of "$t" "${IS_TLS[$sc]:-0}")
            ((QUIET_MAX > 0)) && wait_quiet
            if ((WARMUP > 0)); then
                run_wrk "$sc" "$t" "$conns" "$url" "$WARMUP" "$TMP/warmup-$spec-$t-$rep.txt" || true
            fi
            pp=${PROXY_PID[$t]}
            read -r pu0 ps0 < <(cpu_ticks "$pp"); read -r uu0 us0 < <(cpu_ticks "$UP_PID")
            child_cpu; w0=$REPLY; machine_ticks; m0=$REPLY
            rc=0
            out="$TMP/wrk-$spec-$t-$rep.txt"
            run_wrk "$sc" "$t" "$conns" "$url" "$DURATION" "$out" || rc=$?
            machine_ticks; m1=$REPLY; child_cpu; w1=$REPLY
            read -r pu1 ps1 < <(cpu_ticks "$pp"); read -r uu1 us1 < <(cpu_ticks "$UP_PID")
            rss=$(rss_kib "$pp")
            line=$(grep '^WRKRESULT ' "$out" || true)
            if ((rc != 0)) || [[ -z $line ]]; then
                cat "$out" >&2
                die "wrk against $t ($spec) failed (exit $rc)"
            fi
            for pid in "$UP_PID" "${PROXY_PID[@]}"; do
                [[ -z $pid ]] || kill -0 "$pid" 2>/dev/null || die "process $pid died during the $t $spec run (logs in $TMP)"
            done
            req=$(field requests "$line")
            ((req > 0)) || die "wrk completed no request against $t ($spec)"
            errs=""
            for e in connect read write status timeout other; do
                n=$(field "$e" "$line")
                [[ -z $n || $n == 0 ]] || errs+="$e=$n "
            done
            [[ -z $errs ]] || ERRORS+=("$spec $t rep $rep: ${errs% }")
            # Per request: proxy user / kernel CPU, upstream and wrk CPU; over
            # the run: machine idle % and "other" = CPU used by anything but
            # proxy+upstream+wrk, in % of one CPU.
            row=$(awk -v l="$line" -v pu="$((pu1 - pu0))" -v ps="$((ps1 - ps0))" -v ut="$((uu1 - uu0 + us1 - us0))" \
                -v w0="$w0" -v w1="$w1" -v m0="$m0" -v m1="$m1" -v ncpu="$NCPU" -v hz="$CLK_TCK" -v req="$req" \
                -v pp="$pp" -v rss="$rss" 'BEGIN {
                    n = split(l, kv, " "); for (i = 2; i <= n; i++) { split(kv[i], a, "="); f[a[1]] = a[2] }
                    us = 1e6 / hz / req; wt = (w1 - w0) * hz
                    if (pp == "") { u = "-"; s = "-"; c = "-"; r = "-"; pt = 0 }
                    else { u = sprintf("%.2f", pu * us); s = sprintf("%.2f", ps * us); c = sprintf("%.2f", (pu + ps) * us); r = rss; pt = pu + ps }
                    split(m0, b0, " "); split(m1, b1, " ")
                    busy = b1[1] - b0[1]; total = b1[2] - b0[2]; if (total <= 0) total = 1
                    idle = 100 * (total - busy) / total
                    other = 100 * (busy - pt - ut - wt) / (total / ncpu); if (other < 0) other = 0
                    printf "%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%.0f\t%.2f\t%.0f\t%.0f\n", f["rps"], f["p50_us"], f["p99_us"],
                        u, s, c, ut * us, r, req, f["bytes"] / req, wt / hz * 1e6 / req, idle, other }')
            printf '%s\t%s\t%s\t%s\n' "$spec" "$t" "$rep" "$row" >>"$RESULTS"
            IFS=$'\t' read -r rps p50 p99 u s c up r _req _bpr _wcpu idle other <<<"$row"
            rmib=$(awk -v r="$r" 'BEGIN { if (r == "-") print "-"; else printf "%.1f", r / 1024 }')
            printf '%-13s %-12s %3s %9.0f %8.3f %8.3f %8s %8s %8s %8s %8s %7s %7s  %s\n' "$spec" "$t" "$rep" "$rps" \
                "$(awk -v x="$p50" 'BEGIN{print x/1000}')" "$(awk -v x="$p99" 'BEGIN{print x/1000}')" \
                "$u" "$s" "$c" "$up" "$rmib" "$idle" "$other" "${errs:-0}"
            ((other > OTHER_WARN)) && NOISY+=("$spec $t rep $rep: other processes used ${other}% of a CPU")
            sleep 1
        done
    done
done

# ---------------------------------------------------------------------------
# The stdio scenario: wrk -> portcullis -> its stdio programs, against the
# driver calling the same program directly. Per request: the gateway's own
# CPU (its /proc/PID/stat: every thread, not its children), the programs'
# (its children), the driver's.
# ---------------------------------------------------------------------------
own_ticks() { awk '{ sub(/^.*\) /, ""); print $12, $13 }' /proc/"$1"/stat 2>/dev/null || echo "0 0"; }
children_ticks() { # pid -> "user sys" of its direct children
    local u=0 s=0 p a b
    for p in $(cat /proc/"$1"/task/*/children 2>/dev/null || true); do
        read -r a b < <(own_ticks "$p"); u=$((u + a)); s=$((s + b))
    done
    echo "$u $s"
}
children_rss() { # pid -> mean VmRSS (KiB) of its direct children
    local n=0 t=0 p r
    for p in $(cat /proc/"$1"/task/*/children 2>/dev/null || true); do
        r=$(awk '/^VmRSS:/ { print $2 }' /proc/"$p"/status 2>/dev/null || echo 0); t=$((t + ${r:-0})); n=$((n + 1))
    done
    if ((n)); then echo $((t / n)); else echo 0; fi
}
STDIO_RESULTS="$TMP/stdio.tsv"
: >"$STDIO_RESULTS"
us_per() { awk -v t="$1" -v hz="$CLK_TCK" -v r="$2" 'BEGIN { printf "%.2f", t * 1e6 / hz / (r > 0 ? r : 1) }'; }
for spec in $STDIO_SPECS; do
    conns=${spec#*@}
    for rep in $(seq 1 "$REPS"); do
        pp=${PROXY_PID[portcullis]}
        url="http://127.0.0.1:${PORT[portcullis]}/stdio"
        ((QUIET_MAX > 0)) && wait_quiet
        if ((WARMUP > 0)); then run_wrk small stdio "$conns" "$url" "$WARMUP" "$TMP/warmup-$spec-$rep.txt" || true; fi
        read -r gu0 gs0 < <(own_ticks "$pp"); read -r cu0 cs0 < <(children_ticks "$pp")
        out="$TMP/wrk-$spec-portcullis-$rep.txt"
        run_wrk small stdio "$conns" "$url" "$DURATION" "$out" || die "wrk against /stdio failed: $(cat "$out")"
        read -r gu1 gs1 < <(own_ticks "$pp"); read -r cu1 cs1 < <(children_ticks "$pp")
        line=$(grep '^WRKRESULT ' "$out") || die "no wrk result for /stdio: $(cat "$out")"
        req=$(field requests "$line")
        for e in connect read write status timeout other; do
            n=$(field "$e" "$line"); [[ -z $n || $n == 0 ]] || ERRORS+=("$spec portcullis rep $rep: $e=$n")
        done
        printf '%s\tportcullis\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$spec" "$rep" "$(field rps "$line")" "$(field p50_us "$line")" \
            "$(field p99_us "$line")" "$(us_per $((gu1 - gu0 + gs1 - gs0)) "$req")" "$(us_per $((cu1 - cu0 + cs1 - cs0)) "$req")" \
            "$(children_rss "$pp")" >>"$STDIO_RESULTS"
        ((QUIET_MAX > 0)) && wait_quiet
        out="$TMP/drive-$spec-$rep.txt"
        timeout $((DURATION + 30)) "$UP_BIN" --drive "$DURATION" "$STDIO_PROCESSES" "$CLK_TCK" -- "$UP_BIN" --stdio >"$out" 2>&1 \
            || die "the stdio driver failed: $(cat "$out")"
        line=$(grep '^WRKRESULT ' "$out")
        req=$(field requests "$line")
        printf '%s\tdirect\t%s\t%s\t%s\t%s\t%s\t%s\t-\n' "$spec" "$rep" "$(field rps "$line")" "$(field p50_us "$line")" \
            "$(field p99_us "$line")" "$(us_per $(($(field driver_user_ticks "$line") + $(field driver_sys_ticks "$line"))) "$req")" \
            "$(us_per $(($(field program_user_ticks "$line") + $(field program_sys_ticks "$line"))) "$req")" >>"$STDIO_RESULTS"
        log "$spec rep $rep measured"
    done
done
stdio_report() {
    local spec t c
    echo
    echo "stdio (medians over $REPS rep(s); front = the gateway's own CPU, or the driver's; prog = the stdio"
    echo "program's; ${STDIO_PROCESSES} process(es) on both sides; RSS = VmRSS per program process, gateway side):"
    printf '%-13s %-11s %9s %8s %8s %10s %10s %10s %8s\n' scenario target 'req/s' 'p50 ms' 'p99 ms' 'front µs' 'prog µs' 'total µs' 'RSS MiB'
    for spec in $STDIO_SPECS; do
        declare -A S=()
        for t in portcullis direct; do
            for c in 4 5 6 7 8 9; do
                S[$t,$c]=$(awk -F'\t' -v sc="$spec" -v t="$t" -v c="$c" '$1 == sc && $2 == t && $c != "-" { print $c }' "$STDIO_RESULTS" |
                    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
            done
            S[$t,total]=$(awk -v a="${S[$t,7]}" -v b="${S[$t,8]}" 'BEGIN { printf "%.2f", a + b }')
            printf '%-13s %-11s %9.0f %8s %8s %10s %10s %10s %8s\n' "$spec" "$t" "${S[$t,4]}" "$(ms "${S[$t,5]}")" "$(ms "${S[$t,6]}")" \
                "$(f2 "${S[$t,7]}")" "$(f2 "${S[$t,8]}")" "${S[$t,total]}" "$(mib "${S[$t,9]}")"
        done
        printf '%-13s ratios portcullis/direct: throughput %s, p50 %s, p99 %s, total CPU/req %s\n' "" \
            "$(ratio "${S[portcullis,4]}" "${S[direct,4]}")" "$(ratio "${S[portcullis,5]}" "${S[direct,5]}")" \
            "$(ratio "${S[portcullis,6]}" "${S[direct,6]}")" "$(ratio "${S[portcullis,total]}" "${S[direct,total]}")"
        unset S
    done
}

# ---------------------------------------------------------------------------
# Report: medians per scenario and target, ratios
# ---------------------------------------------------------------------------
col() { # name -> column number in results.tsv
    local i=1 c
    for c in $COLS; do [[ $c == "$1" ]] && { echo "$i"; return; }; i=$((i + 1)); done
    die "no column $1"
}
OTHER_COL=$(col other_pct)
median() { # scenario target column max_other
    awk -F'\t' -v sc="$1" -v t="$2" -v c="$(col "$3")" -v oc="$OTHER_COL" -v mo="$4" \
        'NR > 1 && $1 == sc && $2 == t && $c != "-" && $oc + 0 <= mo + 0 { print $c }' "$RESULTS" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
f2() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.2f", x }'; }
ms() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.3f", x / 1000 }'; }
mib() { awk -v x="$1" 'BEGIN { if (x == "-") print "-"; else printf "%.1f", x / 1024 }'; }
report() { # max_other title
    local spec t n m
    echo
    echo "$2:"
    printf '%-13s %-12s %4s %9s %8s %8s %8s %8s %8s %8s %8s\n' scenario target runs 'req/s' 'p50 ms' 'p99 ms' \
        'user µs' 'sys µs' 'cpu µs' 'upst µs' 'RSS MiB'
    for spec in $SCENARIOS; do
        declare -A M=()
        targets_of "${spec%@*}"
        for t in "${REPLY_TARGETS[@]}"; do
            n=$(awk -F'\t' -v sc="$spec" -v t="$t" -v oc="$OTHER_COL" -v mo="$1" 'NR > 1 && $1 == sc && $2 == t && $oc + 0 <= mo + 0' "$RESULTS" | wc -l)
            for m in rps p50_us p99_us user_us sys_us cpu_us upstream_us rss_kib; do
                M[$t,$m]=$(median "$spec" "$t" "$m" "$1")
            done
            printf '%-13s %-12s %4s %9s %8s %8s %8s %8s %8s %8s %8s\n' "$spec" "$t" "$n" "${M[$t,rps]%.*}" \
                "$(ms "${M[$t,p50_us]}")" "$(ms "${M[$t,p99_us]}")" "$(f2 "${M[$t,user_us]}")" "$(f2 "${M[$t,sys_us]}")" \
                "$(f2 "${M[$t,cpu_us]}")" "$(f2 "${M[$t,upstream_us]}")" "$(mib "${M[$t,rss_kib]}")"
        done
        printf '%-13s ratios: throughput p/nginx %s, p/direct %s; p99 p/nginx %s; CPU/req p/nginx %s (user %s, sys %s)' "" \
            "$(ratio "${M[portcullis,rps]}" "${M[nginx,rps]}")" "$(ratio "${M[portcullis,rps]:-}" "${M[direct,rps]:--}")" \
            "$(ratio "${M[portcullis,p99_us]}" "${M[nginx,p99_us]}")" "$(ratio "${M[portcullis,cpu_us]}" "${M[nginx,cpu_us]}")" \
            "$(ratio "${M[portcullis,user_us]}" "${M[nginx,user_us]}")" "$(ratio "${M[portcullis,sys_us]}" "${M[nginx,sys_us]}")"
        if [[ -n $BASELINE_BIN ]]; then
            printf '; p/baseline: throughput %s, CPU/req %s' "$(ratio "${M[portcullis,rps]}" "${M[baseline,rps]}")" \
                "$(ratio "${M[portcullis,cpu_us]}" "${M[baseline,cpu_us]}")"
        fi
        echo
        if [[ $spec == fed* ]]; then
            # The federated route against the route to one upstream, same
            # gateway (fedcall: the same call to the same upstream; target
            # <= 1.10 for CPU/req and p50).
            printf '%-13s fed/portcullis: CPU/req %s (user %s, sys %s), p50 %s, p99 %s, throughput %s; fed/nginx: CPU/req %s, throughput %s' "" \
                "$(ratio "${M[fed,cpu_us]}" "${M[portcullis,cpu_us]}")" "$(ratio "${M[fed,user_us]}" "${M[portcullis,user_us]}")" \
                "$(ratio "${M[fed,sys_us]}" "${M[portcullis,sys_us]}")" "$(ratio "${M[fed,p50_us]}" "${M[portcullis,p50_us]}")" \
                "$(ratio "${M[fed,p99_us]}" "${M[portcullis,p99_us]}")" "$(ratio "${M[fed,rps]}" "${M[portcullis,rps]}")" \
                "$(ratio "${M[fed,cpu_us]}" "${M[nginx,cpu_us]}")" "$(ratio "${M[fed,rps]}" "${M[nginx,rps]}")"
            if [[ -n $BASELINE_BIN ]]; then
                printf '; baseline-fed/baseline: CPU/req %s, p50 %s; fed/baseline-fed: CPU/req %s' \
                    "$(ratio "${M[baseline-fed,cpu_us]}" "${M[baseline,cpu_us]}")" \
                    "$(ratio "${M[baseline-fed,p50_us]}" "${M[baseline,p50_us]}")" \
                    "$(ratio "${M[fed,cpu_us]}" "${M[baseline-fed,cpu_us]}")"
            fi
            echo
        fi
        if [[ $spec == bridged* ]]; then
            # A 2025-11-25 client's call in a bridged session against the
            # same call from a 2026-07-28 client on the route to the same
            # upstream (same gateway, seconds apart).
            printf '%-13s bridged/portcullis: CPU/req %s (user %s, sys %s), p50 %s, p99 %s, throughput %s; bridged/nginx: CPU/req %s, throughput %s' "" \
                "$(ratio "${M[bridged,cpu_us]}" "${M[portcullis,cpu_us]}")" "$(ratio "${M[bridged,user_us]}" "${M[portcullis,user_us]}")" \
                "$(ratio "${M[bridged,sys_us]}" "${M[portcullis,sys_us]}")" "$(ratio "${M[bridged,p50_us]}" "${M[portcullis,p50_us]}")" \
                "$(ratio "${M[bridged,p99_us]}" "${M[portcullis,p99_us]}")" "$(ratio "${M[bridged,rps]}" "${M[portcullis,rps]}")" \
                "$(ratio "${M[bridged,cpu_us]}" "${M[nginx,cpu_us]}")" "$(ratio "${M[bridged,rps]}" "${M[nginx,rps]}")"
            if [[ -n $BASELINE_BIN ]]; then
                printf '; baseline-bridged/baseline: CPU/req %s, p50 %s; bridged/baseline-bridged: CPU/req %s' \
                    "$(ratio "${M[baseline-bridged,cpu_us]}" "${M[baseline,cpu_us]}")" \
                    "$(ratio "${M[baseline-bridged,p50_us]}" "${M[baseline,p50_us]}")" \
                    "$(ratio "${M[bridged,cpu_us]}" "${M[baseline-bridged,cpu_us]}")"
            fi
            echo
        fi
        unset M
    done
}

threads() { ls /proc/"$1"/task 2>/dev/null | wc -l; }
ngx_workers=$(cat /proc/"${PROXY_PID[nginx]}"/task/*/children 2>/dev/null | wc -w)
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || commit+=" (+ uncommitted changes)"
cat <<EOF

== Portcullis whole-proxy load benchmark (upstream: bench-upstream) ==
commit:    $commit${BASELINE_BIN:+; baseline: $BASELINE_BIN}
machine:   $(nproc) CPU(s), $(uname -sr); $(nginx -v 2>&1 | sed 's/^nginx version: //'); $(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}'); $(openssl version | awk '{print $1, $2}')
load:      wrk -t$WRK_THREADS, ${DURATION}s per run (+${WARMUP}s warm-up), $REPS rep(s), scenarios [$SCENARIOS], interleaved
fairness:  portcullis runs with TOKIO_WORKER_THREADS=$PROXY_THREADS, nginx with worker_processes $PROXY_THREADS
           (upstream keepalive 64, HTTP/1.1, proxy_buffering off, TLS 1.3 with the same P-256 certificate);
           bench-upstream with TOKIO_WORKER_THREADS=$UPSTREAM_THREADS. No CPU pinning.
           OS threads at the end: portcullis $(threads "${PROXY_PID[portcullis]}"), upstream $(threads "$UP_PID"), nginx $ngx_workers worker process(es).
cpu:       utime (user) and stime (sys) from /proc/PID/stat (all threads; nginx master + workers) over each
           measured run / requests completed; 'upst' = bench-upstream's CPU per request (subtract it
           from direct-style figures); RSS = VmRSS at the end of the run (nginx: master + workers).
EOF
[[ -n $SCENARIOS ]] && report 1000000 "medians over all $REPS rep(s)"
((WANT_STDIO)) && stdio_report
if ((${#NOISY[@]})); then
    report "$OTHER_WARN" "medians over the quiet runs only (other% <= $OTHER_WARN; '-' = none was quiet)"
fi
for f in "$TMP/portcullis.log" "$TMP/baseline.log" "$TMP/upstream.log" "$NGX/error.log"; do
    [[ -f $f ]] || continue
    n=$(grep -cv '^bench-upstream on ' "$f" 2>/dev/null || true)
    if ((n > 0)); then
        echo
        echo "note: ${f#"$TMP/"} has $n line(s) (first 5):"
        # awk reads the whole log (a `head` would end the pipe early: SIGPIPE
        # under pipefail, and the run would exit 141 after measuring).
        awk '!/^bench-upstream on / && n++ < 5' "$f" | sed $'s/\x1b\\[[0-9;]*m//g' | cut -c1-300 | sed 's/^/  /'
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
    echo "wrk errors (non-2xx responses = status; other = MRTR answers that were neither input_required nor complete, or bridged 200 answers that were no result; the rest are socket errors):"
    printf '  %s\n' "${ERRORS[@]}"
    log "some runs had errors: their figures are suspect"
    exit 3
else
    echo
    echo "wrk errors: none"
fi
