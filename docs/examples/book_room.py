"""Book a room through the Portcullis demo with the official MCP Python SDK (mcp 2.3.0).

The server asks which room "the big room" means; the SDK hands the question to
ask_person, which shows it on the terminal and reads the answer.
"""

import sys

import anyio
import mcp_types as types
from mcp import Client

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/mcp/rooms"


async def ask_person(context, params):
    print(params.message)
    answers = {}
    for field, schema in params.requested_schema["properties"].items():
        options = f" {schema['enum']}" if "enum" in schema else ""
        answer = await anyio.to_thread.run_sync(input, f"{field}{options}: ")
        answers[field] = answer.strip()
    return types.ElicitResult(action="accept", content=answers)


async def main():
    async with Client(URL, elicitation_callback=ask_person) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(t.name for t in tools.tools))
        arguments = {"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}
        result = await client.call_tool("book_room", arguments)
        print(result.content[0].text)


anyio.run(main)
