-- wrk script: one MCP 2026-07-28 tools/call per request, of the tool named
-- by $MCP_TOOL (default get_room; bench/upstream answers get_room small,
-- watch_room as an event stream, room_report with ~256 KiB). $MCP_CLOSE=1
-- adds "Connection: close" (a new connection, and TLS handshake, per request).
-- $MCP_METHOD=tools/list sends tools/list instead (no tool, no Mcp-Name).
--
-- The gateway checks that the Mcp-Method / Mcp-Name headers match the body,
-- so every request carries both. The body is a constant string: wrk sends the
-- same bytes on every request, so the generator spends no CPU building it.
--
-- done() prints one machine-readable line that bench/load.sh parses:
--   WRKRESULT requests=N duration_us=N bytes=N rps=X p50_us=N p90_us=N p99_us=N
--             max_us=N connect=N read=N write=N status=N timeout=N
-- ("status" counts non-2xx/3xx responses; the others are socket errors.)

local META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p1"}'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
if os.getenv("MCP_CLOSE") == "1" then
  wrk.headers["Connection"] = "close"
end
if os.getenv("MCP_METHOD") == "tools/list" then
  wrk.headers["Mcp-Method"] = "tools/list"
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{' .. META .. '}}'
else
  local tool = os.getenv("MCP_TOOL")
  if tool == nil or tool == "" then tool = "get_room" end
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{' .. META .. ',"name":"' .. tool .. '","arguments":{"room_id":"atrium"}}}'
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "WRKRESULT requests=%d duration_us=%d bytes=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d connect=%d read=%d write=%d status=%d timeout=%d\n",
    summary.requests, summary.duration, summary.bytes, summary.requests / secs,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
