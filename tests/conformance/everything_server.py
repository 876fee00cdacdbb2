"""The server the MCP conformance suite's server scenarios expect (`conformance list`
names them; each scenario's description says which tool, resource or prompt it calls),
built on the official Python SDK's low-level `Server` (mcp 2.3.0), served over
Streamable HTTP with sessions and an in-memory event store (stream resumption).

    python everything_server.py          listens on 127.0.0.1, a port the OS picks

prints "listening http://127.0.0.1:PORT/mcp" once it accepts connections.
"""

from __future__ import annotations

import base64
import json
import socket
import warnings
from collections import defaultdict
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore

# A 1x1 red PNG and a 1-sample silent 8 kHz mono WAV.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = base64.b64encode(
    b"RIFF"
    + (37).to_bytes(4, "little")
    + b"WAVEfmt "
    + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little")
    + (1).to_bytes(2, "little")
    + (8000).to_bytes(4, "little")
    + (8000).to_bytes(4, "little")
    + (1).to_bytes(2, "little")
    + (8).to_bytes(2, "little")
    + b"data"
    + (1).to_bytes(4, "little")
    + b"\x80"
).decode()

NO_ARGS = {"type": "object", "properties": {}}


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


TOOLS = [
    ("test_simple_text", "Returns a simple text.", NO_ARGS),
    ("test_image_content", "Returns an image.", NO_ARGS),
    ("test_audio_content", "Returns audio.", NO_ARGS),
    ("test_embedded_resource", "Returns an embedded resource.", NO_ARGS),
    ("test_multiple_content_types", "Returns text, an image and a resource.", NO_ARGS),
    ("test_tool_with_logging", "Logs three messages while it runs.", NO_ARGS),
    ("test_tool_with_progress", "Reports progress while it runs.", NO_ARGS),
    ("test_error_handling", "Always fails.", NO_ARGS),
    ("test_reconnection", "Closes its event stream mid-call; the answer comes after the client reconnects.", NO_ARGS),
    (
        "test_sampling",
        "Asks the client's model.",
        {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    ),
    (
        "test_elicitation",
        "Asks the user for a username and an email.",
        {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    ),
    ("test_elicitation_sep1034_defaults", "Asks with a default for every primitive type.", NO_ARGS),
    ("test_elicitation_sep1330_enums", "Asks with every enum variant.", NO_ARGS),
    (
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
]

DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}

ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name=n, description=d, input_schema=s) for n, d, s in TOOLS])


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    session = ctx.session
    related = ctx.request_id
    match params.name:
        case "test_simple_text":
            content = [text("This is a simple text response for testing.")]
        case "test_image_content":
            content = [types.ImageContent(type="image", data=PNG, mime_type="image/png")]
        case "test_audio_content":
            content = [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
        case "test_embedded_resource":
            content = [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]
        case "test_multiple_content_types":
            content = [
                text("Multiple content types test:"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                embedded(
                    "test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})
                ),
            ]
        case "test_tool_with_logging":
            for i, message in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
                if i:
                    await anyio.sleep(0.05)
                await session.send_log_message("info", message, related_request_id=related)
            content = [text("Tool with logging executed successfully")]
        case "test_tool_with_progress":
            token = (ctx.meta or {}).get("progress_token")
            for i, value in enumerate([0, 50, 100]):
                if i:
                    await anyio.sleep(0.05)
                if token is not None:
                    await session.send_progress_notification(token, value, 100, related_request_id=related)
            content = [text("Tool with progress executed successfully")]
        case "test_error_handling":
            return types.CallToolResult(
                is_error=True, content=[text("This tool intentionally returns an error for testing")]
            )
        case "test_reconnection":
            await anyio.sleep(0.05)
            if ctx.close_sse_stream is not None:
                await ctx.close_sse_stream()
            await anyio.sleep(0.3)
            content = [text("Reconnection test completed successfully")]
        case "test_sampling":
            reply = await session.create_message(
                [types.SamplingMessage(role="user", content=text(args.get("prompt", "")))],
                max_tokens=100,
                related_request_id=related,
            )
            answer = reply.content.text if isinstance(reply.content, types.TextContent) else str(reply.content)
            content = [text(f"LLM response: {answer}")]
        case "test_elicitation":
            schema = {
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            }
            reply = await session.elicit_form(args.get("message", ""), schema, related_request_id=related)
            content = [text(f"User response: action={reply.action}, content={json.dumps(reply.content)}")]
        case "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums":
            schema = DEFAULTS_SCHEMA if params.name.endswith("defaults") else ENUMS_SCHEMA
            reply = await session.elicit_form("Please review and submit the form.", schema, related_request_id=related)
            content = [text(f"Elicitation completed: action={reply.action}, content={json.dumps(reply.content)}")]
        case "json_schema_2020_12_tool":
            content = [text(f"Received: {json.dumps(args)}")]
        case _:
            raise ValueError(f"unknown tool {params.name}")
    return types.CallToolResult(content=content)


def embedded(uri: str, mime: str, body: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime, text=body)
    )


RESOURCES = [
    types.Resource(
        uri="test://static-text", name="static-text", description="A static text resource", mime_type="text/plain"
    ),
    types.Resource(uri="test://static-binary", name="static-binary", description="A static PNG", mime_type="image/png"),
    types.Resource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource to subscribe to",
        mime_type="text/plain",
    ),
]


async def list_resources(ctx, params) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_templates(ctx, params) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template="test://template/{id}/data",
                name="template",
                description="Data by id",
                mime_type="application/json",
            )
        ]
    )


async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "test://static-text":
        contents: list[Any] = [
            types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
            )
        ]
    elif uri == "test://static-binary":
        contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)]
    elif uri == "test://watched-resource":
        contents = [types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content.")]
    elif uri.startswith("test://template/") and uri.endswith("/data"):
        rid = uri.removeprefix("test://template/").removesuffix("/data")
        body = json.dumps({"id": rid, "templateTest": True, "data": f"Data for ID: {rid}"})
        contents = [types.TextResourceContents(uri=uri, mime_type="application/json", text=body)]
    else:
        raise ValueError(f"unknown resource {uri}")
    return types.ReadResourceResult(contents=contents)


SUBSCRIBED: set[str] = set()


async def subscribe(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


def user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def list_prompts(ctx, params) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = params.arguments or {}
    match params.name:
        case "test_simple_prompt":
            messages = [user(text("This is a simple prompt for testing."))]
        case "test_prompt_with_arguments":
            messages = [user(text(f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"))]
        case "test_prompt_with_embedded_resource":
            uri = args.get("resourceUri", "test://example-resource")
            messages = [
                user(embedded(uri, "text/plain", "Embedded resource content for testing.")),
                user(text("Please process the embedded resource above.")),
            ]
        case "test_prompt_with_image":
            messages = [
                user(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
                user(text("Please analyze the image above.")),
            ]
        case _:
            raise ValueError(f"unknown prompt {params.name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))


async def set_level(ctx, params) -> types.EmptyResult:
    return types.EmptyResult()


class MemoryEventStore(EventStore):
    """Every event of every stream, kept for replay after Last-Event-ID (stream resumption)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, types.JSONRPCMessage | None]] = []  # (event id, stream id, message)
        self.counter: defaultdict[str, int] = defaultdict(int)

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = f"{stream_id}:{len(self.events)}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        index = next((i for i, (eid, _, _) in enumerate(self.events) if eid == last_event_id), None)
        if index is None:
            return None
        stream_id = self.events[index][1]
        for eid, sid, message in self.events[index + 1 :]:
            if sid == stream_id and message is not None:
                await send_callback(EventMessage(message, eid))
        return stream_id


def build() -> Server:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # logging/setLevel is deprecated in 2026-07-28; the 2025 scenarios use it
        return Server(
            "portcullis-conformance-python",
            version="1.0.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_level,
        )


async def main() -> None:
    warnings.simplefilter("ignore")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = build().streamable_http_app(event_store=MemoryEventStore(), retry_interval=200)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))

    async def announce() -> None:
        while not server.started:
            await anyio.sleep(0.02)
        print(f"listening http://127.0.0.1:{port}/mcp", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await server.serve(sockets=[sock])
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main)
