mcp_post() { curl -s "$URL" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' "$@"; echo; }

# 1. list the tools
mcp_post -H 'Mcp-Method: tools/list' \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'

# 2. the booking request: book "the big room" on 2026-09-17 at 9:00; the server asks which room (input_required)
ASK=$(mcp_post -H 'Mcp-Method: tools/call' -H 'Mcp-Name: book_room' \
  -d '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"book_room","arguments":{"day":"2026-09-17","hour":9,"room_hint":"the big room"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}'); echo "$ASK"

# 3. the retry (needs jq): a new id, the same params, the answer in inputResponses and the
#    requestState from $ASK. The demo's states are single-use: run step 2 again to repeat it.
mcp_post -H 'Mcp-Method: tools/call' -H 'Mcp-Name: book_room' \
  -d '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"book_room","arguments":{"day":"2026-09-17","hour":9,"room_hint":"the big room"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},"inputResponses":{"room":{"action":"accept","content":{"room_id":"studio-b"}}},"requestState":'"$(echo "$ASK" | jq .result.requestState)"'}}'

# 4. the gateway asks first: cancel_booking is listed as destructive, so the gateway answers
#    with its own question (input_required, key dev.portcullis/approval); the server has seen nothing
APPROVAL=$(mcp_post -H 'Mcp-Method: tools/call' -H 'Mcp-Name: cancel_booking' \
  -d '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"cancel_booking","arguments":{"room_id":"studio-b","day":"2026-09-17","hour":9},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}'); echo "$APPROVAL"

# 5. approve it (needs jq): tick "approve"; only then does the server get the call, as it was sent.
#    "decline" (or "accept" without the tick) is refused with approval_declined instead.
mcp_post -H 'Mcp-Method: tools/call' -H 'Mcp-Name: cancel_booking' \
  -d '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"cancel_booking","arguments":{"room_id":"studio-b","day":"2026-09-17","hour":9},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},"inputResponses":{"dev.portcullis/approval":{"action":"accept","content":{"approve":true}}},"requestState":'"$(echo "$APPROVAL" | jq .result.requestState)"'}}'

# a streamed answer: progress events, then the result (text/event-stream)
mcp_post -N -H 'Mcp-Method: tools/call' -H 'Mcp-Name: room_report' \
  -d '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p1"},"name":"room_report","arguments":{"steps":3}}}'

# a refusal: the Mcp-Name header does not match the body
mcp_post -i -H 'Mcp-Method: tools/call' -H 'Mcp-Name: get_room' \
  -d '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}},"name":"book_room","arguments":{"day":"2026-09-17","hour":9,"room_hint":"the nook"}}}'
