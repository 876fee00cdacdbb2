"""The Python SDK client (mcp 2.3.0, its `OAuthClientProvider`) signs in to the gateway as an
OAuth protected resource, against the real authorization server of the TypeScript interop
tests (`oidc-provider`, tests/interop/lib/auth_server.mjs, run as a program): the 401's
`resource_metadata`, RFC 9728 metadata, the server's metadata, dynamic registration, PKCE
with the resource indicator, the code handed back with its `iss` (RFC 9207), a tool call;
then step-up on 403 `insufficient_scope`. That no upstream sees a client's token is asserted
by the TypeScript test at upstreams that record what they get; here the client's side is
the subject, and the gateway's log must hold none of the tokens.
"""

from __future__ import annotations

import re
import urllib.parse
from contextlib import contextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from interop_peers import INTEROP, _spawn, _wait, demo_server, gateway, require_node

pytestmark = pytest.mark.anyio

ISSUER = re.compile(rb"authorization server (http://127\.0\.0\.1:\d+)")


@contextmanager
def authorization_server():
    with _spawn([str(require_node()), str(INTEROP / "lib" / "auth_server.mjs")]) as process:

        def issuer() -> str | None:
            match = ISSUER.search(process.log_path.read_bytes())
            return match.group(1).decode() if match else None

        yield _wait(process, issuer, "issuer line")


@pytest.fixture(scope="module")
def protected():
    with authorization_server() as issuer, demo_server() as demo:
        extra = f"""
[[auth]]
name = "corp"
type = "oauth"
issuer = "{issuer}"
scopes = ["mcp:tools", "mcp:admin"]
required_scopes = ["mcp:tools"]

[[upstream]]
id = "demo"
name = "Demo"
url = "{demo}"

[[route]]
path = "/mcp/protected"
upstream = "demo"
auth = ["corp"]
[[route.allow]]
tools = ["get_room", "book_room"]
[[route.allow]]
scopes = ["mcp:admin"]
tools = ["room_report"]
"""
        with gateway({}, extra=extra) as gw:
            yield gw.at("/mcp/protected"), gw


class Memory:
    """The host's keychain: client registration and tokens, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.issued: list[str] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.issued.append(tokens.access_token)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """Plays the user's browser: follows the authorization URL (the server signs alice in)
    to the redirect and hands its parameters to the SDK."""

    def __init__(self) -> None:
        self.asked: list[dict[str, list[str]]] = []
        self.callback: AuthorizationCodeResult | None = None

    async def open(self, url: str) -> None:
        self.asked.append(urllib.parse.parse_qs(urllib.parse.urlsplit(url).query))
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            for _ in range(20):
                resp = await http.get(url)
                location = resp.headers.get("location")
                assert location, f"sign-in stopped: {resp.status_code} {resp.text[:200]}"
                url = urllib.parse.urljoin(url, location)
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
                if "code" in query:
                    self.callback = AuthorizationCodeResult(
                        code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
                    )
                    return
        raise AssertionError("too many redirects")

    async def code(self) -> AuthorizationCodeResult:
        assert self.callback, "no sign-in happened"
        callback, self.callback = self.callback, None
        return callback


def provider(url: str, memory: Memory, browser: Browser) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="portcullis-python-sdk-host",
        redirect_uris=["http://127.0.0.1:1/callback"],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, memory, browser.open, browser.code)


async def test_the_python_sdk_signs_in_and_steps_up(protected):
    url, gw = protected
    memory, browser = Memory(), Browser()
    http = create_mcp_http_client(auth=provider(url, memory, browser))
    async with http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"get_room", "book_room", "room_report"}
            room = await client.call_tool("get_room", {"room_id": "atrium"})
            assert not room.is_error
            assert memory.client is not None and memory.client.client_id, "registered dynamically"
            first = browser.asked[0]
            assert first["resource"] == [url], "the RFC 8707 resource is the gateway route"
            assert "mcp:tools" in first["scope"][0].split()
            assert first["code_challenge_method"] == ["S256"]
            # room_report needs mcp:admin: 403 insufficient_scope, and the SDK steps up.
            report = await client.call_tool("room_report", {"steps": 1, "delay_ms": 10})
            assert not report.is_error
            assert len(browser.asked) == 2, "one more sign-in, for the new scope"
            assert "mcp:admin" in browser.asked[1]["scope"][0].split()
    assert len(memory.issued) >= 2
    log = gw.log_path.read_text(errors="replace")
    assert not any(token in log for token in memory.issued), "no token in the gateway's log"
