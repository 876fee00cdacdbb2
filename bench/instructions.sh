#!/usr/bin/env bash
# User-space instructions per request of Portcullis, counted by valgrind's
# callgrind: repeatable whatever else the machine does (wall-clock figures on
# a shared 2-core box are not). Portcullis runs under callgrind in front of
# bench-upstream; counting is switched on only while wrk sends one scenario's
# requests, so start-up is not counted; the total is divided by the requests
# wrk completed. Optionally prints the top functions (inclusive).
#
# usage: bench/instructions.sh [SCENARIO...]   (small sse big mrtr list fedlist
#        fedcall; default: small). list: tools/list of one upstream; fedlist:
#        tools/list of the route federating three (bench-upstream on three
#        ports); fedcall: small through the federated route (bench_get_room).
# Knobs: BIN=target/release/portcullis (or another build, e.g. a baseline),
#        DURATION=5 (s of wrk), CONNECTIONS=16, TOP=0 (functions to list),
#        KEEP=1 (keep the callgrind output), AUDIT=off, RUNTIME=per_core
#        (one single-threaded worker, the default; or shared: TOKIO_WORKER_THREADS=1),
#        PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 (try an allocator
#        without rebuilding: it is preloaded into Portcullis).
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
BIN=${BIN:-$ROOT/target/release/portcullis}
UP_BIN="$ROOT/target/release/bench-upstream"
DURATION=${DURATION:-5}
CONNECTIONS=${CONNECTIONS:-16}
TOP=${TOP:-0}
KEEP=${KEEP:-0}
AUDIT=${AUDIT:-off}
RUNTIME=${RUNTIME:-per_core}
SCENARIOS=("${@:-small}")
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null || { echo "valgrind missing" >&2; exit 1; }
[[ -x $BIN && -x $UP_BIN ]] || { echo "build first: cargo build --release -p portcullis -p portcullis-bench-upstream --bin portcullis --bin bench-upstream" >&2; exit 1; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/portcullis-ir.XXXXXX")"
PIDS=()
cleanup() {
    local rc=$?
    trap - EXIT
    ((${#PIDS[@]})) && kill -TERM "${PIDS[@]}" 2>/dev/null
    wait 2>/dev/null || true
    if [[ $KEEP == 1 ]]; then echo "kept: $TMP" >&2; else rm -rf "$TMP"; fi
    exit "$rc"
}
trap cleanup EXIT

USED=" "
free_port() {
    local p _
    for _ in $(seq 1 200); do
        p=$((20000 + RANDOM % 12000))
        [[ $USED == *" $p "* ]] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then USED+="$p "; REPLY=$p; return 0; fi
    done
    echo "no free port" >&2; exit 1
}
wait_http() { # url pid
    local i
    for i in $(seq 1 600); do
        kill -0 "$2" 2>/dev/null || { tail -n 5 "$TMP/portcullis.log" >&2; exit 1; }
        curl -sf -o /dev/null --max-time 1 "$1" && return 0
        sleep 0.1
    done
    echo "$1 not ready" >&2; exit 1
}
free_port; UP=$REPLY; free_port; UP2=$REPLY; free_port; UP3=$REPLY; free_port; PC=$REPLY; free_port; ADM=$REPLY
"$UP_BIN" "127.0.0.1:$UP" "127.0.0.1:$UP2" "127.0.0.1:$UP3" 2>"$TMP/upstream.log" &
PIDS+=($!)
cat >"$TMP/p.toml" <<EOF
[[listener]]
address = "127.0.0.1:$PC"
[admin]
address = "127.0.0.1:$ADM"
[log]
level = "warn"
[audit]
sink = "$AUDIT"
[[upstream]]
id = "bench"
name = "Bench upstream"
url = "http://127.0.0.1:$UP/mcp"
single_use_state = true
[[upstream]]
id = "bench2"
name = "Bench upstream 2"
url = "http://127.0.0.1:$UP2/mcp"
[[upstream]]
id = "bench3"
name = "Bench upstream 3"
url = "http://127.0.0.1:$UP3/mcp"
[[route]]
path = "/mcp"
upstream = "bench"
[[route]]
path = "/fed"
name = "bench-fed"
upstreams = ["bench", "bench2", "bench3"]
EOF
if [[ $RUNTIME == per_core ]]; then
    printf '[runtime]\nmodel = "per_core"\nworkers = 1\n' >>"$TMP/p.toml"
else
    printf '[runtime]\nmodel = "shared"\n' >>"$TMP/p.toml"
fi
TOKIO_WORKER_THREADS=1 LD_PRELOAD=${PRELOAD:-} valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.%p" \
    "$BIN" run --config "$TMP/p.toml" >"$TMP/portcullis.log" 2>&1 &
VG=$!
PIDS+=("$VG")
wait_http "http://127.0.0.1:$ADM/readyz" "$VG"

declare -A LUA=([mrtr]=mrtr.lua) TOOL=([sse]=watch_room [big]=room_report [mrtr]=book_room [fedcall]=bench_get_room)
declare -A METHOD=([list]=tools/list [fedlist]=tools/list) ROUTE=([fedlist]=fed [fedcall]=fed)
printf '%-8s %10s %14s %12s\n' scenario requests instructions 'Ir/request'
for sc in "${SCENARIOS[@]}"; do
    export MCP_TOOL=${TOOL[$sc]:-get_room} MCP_METHOD=${METHOD[$sc]:-tools/call}
    url="http://127.0.0.1:$PC/${ROUTE[$sc]:-mcp}"
    # A short unmeasured run first: pools, lazy statics, allocator warm.
    wrk -t1 -c"$CONNECTIONS" -d2s -s "$BENCH_DIR/wrk/${LUA[$sc]:-tools_call.lua}" "$url" >/dev/null 2>&1 || true
    callgrind_control -z "$VG" >/dev/null 2>&1
    callgrind_control -i on "$VG" >/dev/null 2>&1
    out=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s -s "$BENCH_DIR/wrk/${LUA[$sc]:-tools_call.lua}" "$url")
    callgrind_control -i off "$VG" >/dev/null 2>&1
    callgrind_control -d "$sc" "$VG" >/dev/null 2>&1
    echo "$out" >"$TMP/wrk-$sc.txt"
    req=$(grep -o 'requests=[0-9]*' <<<"$out" | cut -d= -f2 || true)
    [[ -n $req && $req -gt 0 ]] || { echo "wrk completed no request: $out" >&2; exit 1; }
    errs=$(grep -o 'status=[0-9]* timeout=[0-9]*' <<<"$out" || true)
    sleep 1
    f=$(ls -t "$TMP"/cg.*.[0-9]* | head -n1)
    ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ && !n { gsub(",", "", $1); print $1; n = 1 }')
    printf '%-8s %10s %14s %12.0f   (%s)\n' "$sc" "$req" "$ir" "$(awk -v a="$ir" -v b="$req" 'BEGIN { print a / b }')" "$errs"
    if ((TOP > 0)); then
        callgrind_annotate --inclusive=yes "$f" 2>/dev/null | sed -n '/^Ir/,$p' | awk -v n=$((TOP + 2)) 'NR <= n' |
            awk -v r="$req" 'NR <= 2 { print; next } { n = $1; gsub(",", "", n); printf "%10.0f/req  %s\n", n / r, $0 }' | cut -c1-220
    fi
done
