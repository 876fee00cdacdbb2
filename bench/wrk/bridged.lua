-- wrk script: a 2025-11-25 client's tools/call get_room in a bridged session
-- (bench/load.sh, scenario "bridged", target "bridged": Portcullis's route to
-- an upstream it knows speaks only 2026-07-28, so it answers initialize itself
-- from the upstream's server/discover and carries each call of the session as
-- a 2026-07-28 request).
--
-- 2025-11-25 headers only: MCP-Protocol-Version: 2025-11-25, no Mcp-Method /
-- Mcp-Name, and no capabilities in the call's _meta (the session's, declared
-- at initialize, are what the gateway sends upstream). The call carries the
-- same progressToken as tools_call.lua's, so the upstream gets the same
-- request either way.
--
-- Each thread (wrk runs one Lua state per thread) sends initialize until an
-- answer brings an Mcp-Session-Id (captured in response()); from then on
-- every request is the call in that session: a constant string, built once.
-- The first requests of each connection go out before any answer came back,
-- so a thread sends about one initialize per connection; they are counted in
-- wrk's requests and latency (16 of hundreds of thousands). No
-- notifications/initialized is sent (the gateway would answer it 202 and
-- nothing else).
--
-- done() prints the WRKRESULT line (see tools_call.lua) with, in addition,
-- sessions=N (initialize answers with a session id), calls=N (200 answers to
-- the call with a JSON-RPC result that is not a tool error) and other=N
-- (anything else with status 200: an error, an initialize without a session);
-- load.sh counts other > 0 as an error. Non-2xx answers (e.g. 404
-- session_invalid) are wrk's status errors.

local VERSION = "2025-11-25"
local INIT_HEADERS = {
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["MCP-Protocol-Version"] = VERSION,
}
local INIT = '{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"' .. VERSION
  .. '","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}'
local CALL = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p1"},'
  .. '"name":"get_room","arguments":{"room_id":"atrium"}}}'

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

local init_req, call_req
sessions, calls, other = 0, 0, 0

function init(args)
  init_req = wrk.format("POST", nil, INIT_HEADERS, INIT)
end

function request()
  return call_req or init_req
end

function response(status, headers, body)
  if status ~= 200 then
    return -- counted by wrk (status errors)
  end
  if body:find('"id":"init"', 1, true) then
    local session = headers["mcp-session-id"] or headers["Mcp-Session-Id"]
    if session and body:find('"result":', 1, true) then
      sessions = sessions + 1
      if not call_req then
        local h = {}
        for k, v in pairs(INIT_HEADERS) do h[k] = v end
        h["Mcp-Session-Id"] = session
        call_req = wrk.format("POST", nil, h, CALL)
      end
      return
    end
  elseif body:find('"result":', 1, true) and not body:find('"isError":true', 1, true) then
    calls = calls + 1
    return
  end
  other = other + 1
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  local s, c, o = 0, 0, 0
  for _, t in ipairs(threads) do
    s = s + t:get("sessions")
    c = c + t:get("calls")
    o = o + t:get("other")
  end
  io.write(string.format(
    "WRKRESULT requests=%d duration_us=%d bytes=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d connect=%d read=%d write=%d status=%d timeout=%d sessions=%d calls=%d other=%d\n",
    summary.requests, summary.duration, summary.bytes, summary.requests / secs,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout, s, c, o))
end
