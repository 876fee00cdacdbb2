//! The server's checks the gateway does for its upstream, over real HTTP/1.1
//! and HTTP/2 connections whose `Host` / `:authority` and `Origin` the test
//! writes itself: DNS rebinding (`host_not_allowed`, 421) and foreign origins
//! (`origin_not_allowed`, 403), for spellings of each.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpStream;

use crate::common::*;

fn ok_result(req: &Received) -> Vec<Step> {
    let body = result_json(
        &id_of(req),
        json!({"resultType": "complete", "content": []}),
    );
    vec![http_response("200 OK", "application/json", &body)]
}

#[derive(Clone, Copy, Debug)]
enum Version {
    Http1,
    Http2,
}

/// POST a tools/call to `addr` as if sent to `authority` (the `Host`
/// header on HTTP/1.1, `:authority` on HTTP/2), with `origin` if given.
async fn post_as(
    addr: SocketAddr,
    version: Version,
    authority: &str,
    origin: Option<&str>,
) -> (u16, Value) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let io = TokioIo::new(stream);
    let mut builder = http::Request::post("/mcp");
    match version {
        Version::Http1 => builder = builder.header("host", authority),
        Version::Http2 => builder = builder.uri(format!("http://{authority}/mcp")),
    }
    for (k, v) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", VERSION),
        ("mcp-method", "tools/call"),
        ("mcp-name", "get_room"),
    ] {
        builder = builder.header(k, v);
    }
    if let Some(o) = origin {
        builder = builder.header("origin", o);
    }
    let body = Full::new(Bytes::from(call_body("h1", "get_room", json!({}))));
    let req = builder.body(body).expect("request");
    let resp = match version {
        Version::Http1 => {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.expect("answer")
        }
        Version::Http2 => {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.expect("answer")
        }
    };
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("{authority}: not JSON: {}", String::from_utf8_lossy(&bytes)));
    (status, v)
}

/// Authorities a loopback listener on `port` must refuse.
fn foreign_authorities(port: u16) -> Vec<String> {
    let other = if port == u16::MAX { port - 1 } else { port + 1 };
    let mut out = Vec::new();
    for host in [
        "evil.example.com",
        "evil.example.com.",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "localhost..",
        "127.0.0.2",
        "0.0.0.0",
        "[::2]",
        "[::ffff:127.0.0.1]",
        "127.1",
        "2130706433",
    ] {
        out.push(format!("{host}:{port}"));
        out.push(host.to_owned());
    }
    // The right names on another port, or on the default one.
    for host in ["127.0.0.1", "localhost", "LOCALHOST", "[::1]", "localhost."] {
        out.push(format!("{host}:{other}"));
        out.push(host.to_owned());
    }
    out
}

/// Spellings of the loopback names with the listener's port.
fn own_authorities(port: u16) -> Vec<String> {
    [
        "127.0.0.1",
        "localhost",
        "LocalHost",
        "localhost.",
        "LOCALHOST.",
        "[::1]",
    ]
    .iter()
    .map(|h| format!("{h}:{port}"))
    .collect()
}

#[tokio::test]
async fn requests_for_other_hosts_are_misdirected_on_both_protocols() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let addr = gw.addrs[0];
    let mut refused = 0;
    for version in [Version::Http1, Version::Http2] {
        for authority in foreign_authorities(addr.port()) {
            let (status, v) = post_as(addr, version, &authority, None).await;
            assert_eq!(
                (status, v["error"]["data"]["reason"].as_str()),
                (421, Some("host_not_allowed")),
                "{version:?} {authority}: {v}"
            );
            refused += 1;
        }
        for authority in own_authorities(addr.port()) {
            let (status, v) = post_as(addr, version, &authority, None).await;
            assert_eq!(status, 200, "{version:?} {authority}: {v}");
            assert_eq!(v["id"], "h1");
        }
    }
    assert_eq!(
        up.requests().len(),
        2 * own_authorities(addr.port()).len(),
        "only requests for the gateway's own names reached the upstream ({refused} refused)"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn configured_server_names_replace_the_loopback_default() {
    let up = ScriptedUpstream::start(ok_result).await;
    let text = config_text(&up.url(), "", "").replace(
        "address = \"127.0.0.1:0\"\n\n[admin]",
        "address = \"127.0.0.1:0\"\nserver_names = [\"mcp.example.com\", \"api.example.com:8443\"]\n\n[admin]",
    );
    assert!(text.contains("server_names"));
    let gw = start_gateway(&text).await;
    let addr = gw.addrs[0];
    let loopback = format!("127.0.0.1:{}", addr.port());
    let localhost = format!("localhost:{}", addr.port());
    for (authority, served) in [
        ("mcp.example.com", true),
        ("MCP.Example.COM.", true),
        ("mcp.example.com:9999", true),
        ("api.example.com:8443", true),
        ("api.example.com", false),
        ("api.example.com:443", false),
        ("evil.mcp.example.com", false),
        ("mcp.example.com.evil", false),
        (loopback.as_str(), false),
        (localhost.as_str(), false),
    ] {
        for version in [Version::Http1, Version::Http2] {
            let (status, v) = post_as(addr, version, authority, None).await;
            let expected = if served { 200 } else { 421 };
            assert_eq!(status, expected, "{version:?} {authority}: {v}");
        }
    }
    gw.shutdown().await;
}

/// Origins a gateway on `port` must refuse when nothing is configured.
fn foreign_origins(port: u16) -> Vec<String> {
    vec![
        "https://evil.example".into(),
        format!("http://evil.example:{port}"),
        format!("https://127.0.0.1:{port}"),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        "http://127.0.0.1".into(),
        format!("http://127.0.0.1.nip.io:{port}"),
        format!("http://user@127.0.0.1:{port}"),
        "null".into(),
        "file://".into(),
        "https://app.example.com".into(),
    ]
}

#[tokio::test]
async fn a_foreign_origin_is_refused_by_default_and_the_own_one_passes() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let addr = gw.addrs[0];
    let own = format!("127.0.0.1:{}", addr.port());
    for version in [Version::Http1, Version::Http2] {
        for origin in foreign_origins(addr.port()) {
            let (status, v) = post_as(addr, version, &own, Some(&origin)).await;
            assert_eq!(
                (status, v["error"]["data"]["reason"].as_str()),
                (403, Some("origin_not_allowed")),
                "{version:?} {origin}: {v}"
            );
        }
        for origin in [
            format!("http://{own}"),
            format!("http://{own}/"),
            format!("HTTP://{own}"),
        ] {
            let (status, v) = post_as(addr, version, &own, Some(&origin)).await;
            assert_eq!(status, 200, "{version:?} {origin}: {v}");
        }
        let localhost = format!("localhost:{}", addr.port());
        let (status, v) = post_as(
            addr,
            version,
            &localhost,
            Some(&format!("http://{localhost}")),
        )
        .await;
        assert_eq!(status, 200, "own origin under another loopback name: {v}");
        let (status, v) = post_as(addr, version, &own, Some(&format!("http://{localhost}"))).await;
        assert_eq!(
            status, 200,
            "a page from localhost calling 127.0.0.1 (one loopback): {v}"
        );
        let (status, v) = post_as(addr, version, &own, None).await;
        assert_eq!(status, 200, "no Origin (not a browser): {v}");
    }
    assert_eq!(up.requests().len(), 2 * 6);
    gw.shutdown().await;
}

#[tokio::test]
async fn configured_origins_pass_beside_the_own_one() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&config_text(
        &up.url(),
        "",
        "[security]\nallowed_origins = [\"https://app.example.com\", \"http://localhost:5173\"]",
    ))
    .await;
    let addr = gw.addrs[0];
    let own = format!("127.0.0.1:{}", addr.port());
    let own_origin = format!("http://{own}");
    for (origin, allowed) in [
        ("https://app.example.com", true),
        ("https://APP.example.com/", true),
        ("http://localhost:5173", true),
        (own_origin.as_str(), true),
        ("http://app.example.com", false),
        ("https://app.example.com:8443", false),
        ("https://evil.app.example.com", false),
        ("http://localhost:5174", false),
        ("null", false),
    ] {
        let (status, v) = post_as(addr, Version::Http1, &own, Some(origin)).await;
        let expected = if allowed { 200 } else { 403 };
        assert_eq!(status, expected, "{origin}: {v}");
    }
    gw.shutdown().await;
}

/// POST a tools/call to `addr` with request target `target` (a path, or the
/// absolute form) and the given `Host` header, on either protocol (on HTTP/2
/// an absolute target is the `:authority`, and `host` travels beside it).
async fn post_target(addr: SocketAddr, version: Version, target: &str, host: &str) -> u16 {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let io = TokioIo::new(stream);
    let mut builder = http::Request::post(target).header("host", host);
    for (k, v) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", VERSION),
        ("mcp-method", "tools/call"),
        ("mcp-name", "get_room"),
    ] {
        builder = builder.header(k, v);
    }
    let body = Full::new(Bytes::from(call_body("h1", "get_room", json!({}))));
    let req = builder.body(body).expect("request");
    let resp = match version {
        Version::Http1 => {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.expect("answer")
        }
        Version::Http2 => {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.expect("answer")
        }
    };
    resp.status().as_u16()
}

#[tokio::test]
async fn the_upstream_is_told_the_authority_the_check_read() {
    let up = ScriptedUpstream::start(ok_result).await;
    let gw = start_gateway(&config_text(&up.url(), "", "")).await;
    let addr = gw.addrs[0];
    let own = format!("127.0.0.1:{}", addr.port());
    let absolute = format!("http://{own}/mcp");
    // The checked authority is the absolute target (HTTP/1.1) or
    // `:authority` (HTTP/2); a `Host` beside it was never checked.
    for version in [Version::Http1, Version::Http2] {
        for unchecked in [
            "evil.example.com",
            "evil.example.com:443",
            "127.0.0.1.nip.io",
            "localhost:1",
        ] {
            let before = up.requests().len();
            let status = post_target(addr, version, &absolute, unchecked).await;
            assert_eq!(status, 200, "{version:?} {unchecked}");
            let got = up.requests().pop().expect("forwarded");
            assert_eq!(up.requests().len(), before + 1);
            assert_eq!(
                got.header("x-forwarded-host").as_deref(),
                Some(own.as_str()),
                "{version:?} {unchecked}"
            );
            let forwarded = got.header("forwarded").unwrap_or_default();
            assert!(
                forwarded.ends_with(&format!(";host={own}")) && !forwarded.contains(unchecked),
                "{version:?} {unchecked}: {forwarded}"
            );
        }
    }
    // An origin-form target: the checked `Host` is what goes on.
    assert_eq!(post_target(addr, Version::Http1, "/mcp", &own).await, 200);
    let got = up.requests().pop().expect("forwarded");
    assert_eq!(
        got.header("x-forwarded-host").as_deref(),
        Some(own.as_str())
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn a_wildcard_server_name_does_not_make_the_callers_host_its_own_origin() {
    let up = ScriptedUpstream::start(ok_result).await;
    let wildcard = |extra: &str| {
        config_text(&up.url(), "", extra).replace(
            "address = \"127.0.0.1:0\"\n\n[admin]",
            "address = \"127.0.0.1:0\"\nserver_names = [\"*\"]\n\n[admin]",
        )
    };
    let text = wildcard("");
    assert!(text.contains("server_names = [\"*\"]"));
    let gw = start_gateway(&text).await;
    let addr = gw.addrs[0];
    let port = addr.port();
    // DNS rebinding: a page on the attacker's name, resolved to this
    // address, sends its own name as Host and as Origin. Any Host passes
    // the wildcard, so it proves nothing about the origin.
    let attacker_hosts = [
        format!("rebind.attacker.example:{port}"),
        "rebind.attacker.example".to_owned(),
        format!("127.0.0.1.nip.io:{port}"),
        format!("LOCALHOST.attacker.example:{port}"),
        format!("192.168.1.20:{port}"),
    ];
    for version in [Version::Http1, Version::Http2] {
        for host in &attacker_hosts {
            for origin in [format!("http://{host}"), format!("HTTP://{host}/")] {
                let (status, v) = post_as(addr, version, host, Some(&origin)).await;
                assert_eq!(
                    (status, v["error"]["data"]["reason"].as_str()),
                    (403, Some("origin_not_allowed")),
                    "{version:?} {host} {origin}: {v}"
                );
            }
            // Without an Origin (not a browser) the wildcard serves it.
            let (status, _) = post_as(addr, version, host, None).await;
            assert_eq!(status, 200, "{version:?} {host}");
        }
        // A loopback page on this very port is the gateway's own origin.
        for own in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
            let (status, v) = post_as(addr, version, &own, Some(&format!("http://{own}"))).await;
            assert_eq!(status, 200, "{version:?} {own}: {v}");
        }
    }
    gw.shutdown().await;
    // A configured origin still passes with the wildcard.
    let gw = start_gateway(&wildcard(
        "[security]\nallowed_origins = [\"https://app.example.com\"]",
    ))
    .await;
    let (status, v) = post_as(
        gw.addrs[0],
        Version::Http1,
        "mcp.example.com",
        Some("https://app.example.com"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    gw.shutdown().await;
}
