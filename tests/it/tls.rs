//! TLS on both sides: a listener with a certificate generated here, and an
//! https upstream whose certificate chains to a custom CA in the config.

use std::convert::Infallible;
use std::sync::Arc;

use crate::common::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

struct Pki {
    ca_pem: String,
    leaf_pem: String,
    leaf_key_pem: String,
}

/// A CA and a leaf for localhost/127.0.0.1 signed by it.
fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Portcullis test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
    Pki {
        ca_pem: ca.pem(),
        leaf_pem: leaf.pem(),
        leaf_key_pem: leaf_key.serialize_pem(),
    }
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// An https MCP upstream (hyper + rustls, HTTP/1.1 and HTTP/2 by ALPN).
async fn tls_upstream(pki: &Pki) -> std::net::SocketAddr {
    install_crypto();
    let certs = CertificateDer::pem_slice_iter(pki.leaf_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.leaf_key_pem.as_bytes()).unwrap();
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    let out = json!({"jsonrpc":"2.0","id":v["id"],"result":{"resultType":"complete","content":[{"type":"text","text":"over tls"}]}});
                    let mut resp = hyper::Response::new(Full::new(Bytes::from(out.to_string())));
                    resp.headers_mut()
                        .insert("content-type", "application/json".parse().unwrap());
                    Ok::<_, Infallible>(resp)
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn tls_listener_and_https_upstream_with_custom_ca() {
    let dir = tempfile::tempdir().unwrap();
    let upstream_pki = pki();
    let listener_pki = pki();
    let up = tls_upstream(&upstream_pki).await;
    let ca = write(dir.path(), "upstream-ca.pem", &upstream_pki.ca_pem);
    let cert = write(dir.path(), "gw.pem", &listener_pki.leaf_pem);
    let key = write(dir.path(), "gw.key", &listener_pki.leaf_key_pem);
    let text = config_text(
        &format!("https://localhost:{}/mcp", up.port()),
        &format!("ca_file = \"{ca}\""),
        "",
    )
    .replace(
        "address = \"127.0.0.1:0\"\n\n[admin]",
        &format!(
            "address = \"127.0.0.1:0\"\ntls = {{ cert = \"{cert}\", key = \"{key}\" }}\n\n[admin]"
        ),
    );
    let gw = start_gateway(&text).await;
    let addr = gw.addrs[0];

    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(listener_pki.ca_pem.as_bytes()).unwrap(),
        )
        .resolve("localhost", addr)
        .build()
        .unwrap();
    let gw_url = format!("https://localhost:{}/mcp", addr.port());
    let resp = call(&client, &gw_url, "t1", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), reqwest::Version::HTTP_2, "ALPN offers h2");
    let v = json_of(resp).await;
    assert_eq!(v["result"]["content"][0]["text"], "over tls");

    // A client that does not trust the listener's CA cannot connect.
    let untrusting = reqwest::Client::builder()
        .resolve("localhost", addr)
        .build()
        .unwrap();
    assert!(call(&untrusting, &gw_url, "t2", "get_room", json!({}))
        .send()
        .await
        .is_err());
    gw.shutdown().await;
}

#[tokio::test]
async fn an_https_upstream_outside_the_trusted_roots_is_unreachable() {
    let upstream_pki = pki();
    let up = tls_upstream(&upstream_pki).await;
    // No ca_file: the upstream's private CA is not trusted.
    let gw = start_gateway(&config_text(
        &format!("https://localhost:{}/mcp", up.port()),
        "",
        "",
    ))
    .await;
    let resp = call(&client(), &url(&gw), "t3", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let v = json_of(resp).await;
    assert_eq!(v["error"]["data"]["reason"], "upstream_unreachable");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("certificate"),
        "{v}"
    );
    gw.shutdown().await;
}

#[test]
fn check_names_the_line_of_a_bad_certificate_path() {
    let text = config_text("http://127.0.0.1:9/mcp", "", "")
        .replace("address = \"127.0.0.1:0\"\n\n[admin]", "address = \"127.0.0.1:0\"\ntls = { cert = \"/nonexistent/cert.pem\", key = \"/nonexistent/key.pem\" }\n\n[admin]");
    let err = portcullis::config::GatewayConfig::parse(&text, std::path::Path::new("gw.toml"))
        .unwrap_err();
    assert_eq!(err[0].field, "listener[0].tls.cert");
    assert_eq!(err[0].line, 4);
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
}

#[tokio::test]
async fn mtls_client_certificates_identify_callers() {
    let dir = tempfile::tempdir().unwrap();
    let server = pki();
    // A client CA and a client certificate for "svc-billing".
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Client CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let client_key = KeyPair::generate().unwrap();
    let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "svc-billing");
    let client_cert = client_params.signed_by(&client_key, &ca, &ca_key).unwrap();

    let up = ScriptedUpstream::start(|req| {
        vec![http_response(
            "200 OK",
            "application/json",
            &result_json(
                &id_of(req),
                json!({"resultType": "complete", "content": []}),
            ),
        )]
    })
    .await;
    let cert = write(dir.path(), "gw.pem", &server.leaf_pem);
    let key = write(dir.path(), "gw.key", &server.leaf_key_pem);
    let client_ca = write(dir.path(), "client-ca.pem", &ca.pem());
    let mut text = config_text(&up.url(), "", "").replace(
        "address = \"127.0.0.1:0\"\n\n[admin]",
        &format!("address = \"127.0.0.1:0\"\ntls = {{ cert = \"{cert}\", key = \"{key}\", client_ca = \"{client_ca}\", client_auth = \"required\" }}\n\n[admin]"),
    );
    text = text.replace("upstream = \"test\"\n\n", "upstream = \"test\"\nauth = [\"clients\"]\n[[route.allow]]\nprincipals = [\"svc-billing\"]\ntools = [\"*\"]\n\n");
    text = format!(
        "[[auth]]\nname = \"clients\"\ntype = \"mtls\"\nprincipal_from = \"subject_cn\"\n\n{text}"
    );
    let gw = start_gateway(&text).await;
    let addr = gw.addrs[0];
    let gw_url = format!("https://localhost:{}/mcp", addr.port());
    let identity = reqwest::Identity::from_pem(
        format!("{}{}", client_cert.pem(), client_key.serialize_pem()).as_bytes(),
    )
    .unwrap();
    let trusted = || {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(server.ca_pem.as_bytes()).unwrap())
            .resolve("localhost", addr)
    };
    let with_cert = trusted().identity(identity).build().unwrap();
    assert_eq!(
        call(&with_cert, &gw_url, "m1", "get_room", json!({}))
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "svc-billing may call"
    );
    let without = trusted().build().unwrap();
    assert!(
        call(&without, &gw_url, "m2", "get_room", json!({}))
            .send()
            .await
            .is_err(),
        "no client certificate: handshake refused"
    );
    assert_eq!(up.requests().len(), 1);
    gw.shutdown().await;
}

/// The pin (`sha256/<base64>`) of a PEM certificate's key.
fn pin_of(cert_pem: &str) -> String {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap();
    let pin = portcullis::pins::SpkiPin::of_certificate(&der).unwrap();
    format!("sha256/{}", pin.to_base64())
}

#[tokio::test]
async fn an_upstream_whose_key_is_not_pinned_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let upstream_pki = pki();
    let up = tls_upstream(&upstream_pki).await;
    let ca = write(dir.path(), "upstream-ca.pem", &upstream_pki.ca_pem);
    let other = pki();
    let gateway = |pins: Vec<String>| {
        let pins = serde_json::to_string(&pins).unwrap();
        config_text(
            &format!("https://localhost:{}/mcp", up.port()),
            &format!("ca_file = \"{ca}\"\ntls_pins = {pins}"),
            "",
        )
    };
    // The key pinned (beside the next one, for rotation): delivered.
    let gw = start_gateway(&gateway(vec![
        pin_of(&other.leaf_pem),
        pin_of(&upstream_pki.leaf_pem),
    ]))
    .await;
    let v = json_of(
        call(&client(), &url(&gw), "p1", "get_room", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["result"]["content"][0]["text"], "over tls", "{v}");
    gw.shutdown().await;

    // The same name and CA, another key: refused as an identity mismatch.
    let gw = start_gateway(&gateway(vec![pin_of(&other.leaf_pem)])).await;
    let resp = call(&client(), &url(&gw), "p2", "get_room", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let v = json_of(resp).await;
    assert_eq!(
        v["error"]["data"]["reason"], "upstream_identity_mismatch",
        "{v}"
    );
    let m = metrics(&gw).await;
    assert!(m.contains("outcome=\"upstream_identity_mismatch\""), "{m}");
    gw.shutdown().await;
}

#[test]
fn check_rejects_a_pin_it_cannot_read() {
    let hex = "ab".repeat(32);
    for (pins, ok) in [
        (format!("[\"sha256/{}\"]", "A".repeat(43) + "="), true),
        (format!("[\"{hex}\"]"), true),
        ("[\"sha256/AAA=\"]".to_owned(), false),
        ("[\"not a pin\"]".to_owned(), false),
        ("[]".to_owned(), false),
    ] {
        let text = config_text(
            "https://localhost:8443/mcp",
            &format!("tls_pins = {pins}"),
            "",
        );
        let parsed =
            portcullis::config::GatewayConfig::parse(&text, std::path::Path::new("pins.toml"));
        match (parsed, ok) {
            (Ok(_), true) => {}
            (Err(e), false) => assert!(e.to_string().contains("tls_pins"), "{e}"),
            (other, _) => panic!("{pins}: {:?}", other.map(|_| ())),
        }
    }
    let plain = config_text(
        "http://127.0.0.1:8080/mcp",
        &format!("tls_pins = [\"{hex}\"]"),
        "",
    );
    let Err(e) =
        portcullis::config::GatewayConfig::parse(&plain, std::path::Path::new("pins.toml"))
    else {
        panic!("a pin on plain http is an error");
    };
    assert!(e.to_string().contains("only applies to https"), "{e}");
}
