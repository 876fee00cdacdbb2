-- wrk script: the MRTR book_room exchange of MCP 2026-07-28, over and over.
--
-- A first call gets an input_required result (a 5-field form and a
-- requestState); the retry brings the answers and that requestState back and
-- gets the complete result. Every requestState a response carries is queued;
-- the next request (on whichever connection is free) is the retry of the
-- oldest queued state, or a new first call when none waits. So each state is
-- redeemed exactly once (the gateway's single-use states allow no other use),
-- and about half the HTTP requests are first calls, half retries.
--
-- done() prints the WRKRESULT line (see tools_call.lua) with, in addition,
-- asked=N (input_required answers), completed=N (complete answers to a
-- retry) and other=N (anything else: an error, a refusal); load.sh counts
-- other > 0 as an error.

local PARAMS = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}},"name":"book_room","arguments":{"day":"2026-09-17","hour":9,"room_hint":"the big room"}'
local ANSWERS = '"inputResponses":{"contact":{"action":"accept","content":{"name":"Ada Lovelace","email":"ada@example.com","seats":4,"room":"atrium","catering":false}}}'
local HEADERS = {
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["MCP-Protocol-Version"] = "2026-07-28",
  ["Mcp-Method"] = "tools/call",
  ["Mcp-Name"] = "book_room",
}
local FIRST = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{' .. PARAMS .. '}}'

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

local queue, head, tail = {}, 1, 0
asked, completed, other = 0, 0, 0

function request()
  if head <= tail then
    local state = queue[head]
    queue[head] = nil
    head = head + 1
    local body = '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{' .. PARAMS .. ','
      .. ANSWERS .. ',"requestState":"' .. state .. '"}}'
    return wrk.format("POST", nil, HEADERS, body)
  end
  return wrk.format("POST", nil, HEADERS, FIRST)
end

function response(status, headers, body)
  if status == 200 and body:find('"resultType":"input_required"', 1, true) then
    local state = body:match('"requestState":"([^"]+)"')
    if state then
      asked = asked + 1
      tail = tail + 1
      queue[tail] = state
      return
    end
  elseif status == 200 and body:find('"resultType":"complete"', 1, true) then
    completed = completed + 1
    return
  end
  other = other + 1
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  local a, c, o = 0, 0, 0
  for _, t in ipairs(threads) do
    a = a + t:get("asked")
    c = c + t:get("completed")
    o = o + t:get("other")
  end
  io.write(string.format(
    "WRKRESULT requests=%d duration_us=%d bytes=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d connect=%d read=%d write=%d status=%d timeout=%d asked=%d completed=%d other=%d\n",
    summary.requests, summary.duration, summary.bytes, summary.requests / secs,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout, a, c, o))
end
