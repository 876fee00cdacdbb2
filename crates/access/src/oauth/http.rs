//! One small HTTP client for authorization servers: GET a JSON document,
//! POST a form with client_secret_basic; bounded bodies, a timeout, and
//! errors that never carry a secret or a token.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

const TIMEOUT: Duration = Duration::from_secs(10);
/// Metadata, key sets and token answers are small; anything larger is refused.
const MAX_BODY: usize = 1 << 20;
const AGENT: &str = concat!("portcullis/", env!("CARGO_PKG_VERSION"));

/// An authorization server endpoint: https, or http on a loopback host.
pub type Endpoint = Uri;

/// Checks a URL the gateway will send tokens or secrets to.
pub fn check_endpoint(s: &str) -> Result<Endpoint, &'static str> {
    let uri: Uri = s.trim().parse().map_err(|_| "not a valid URL")?;
    let host = uri.host().ok_or("the URL has no host")?;
    let h = host.trim_start_matches('[').trim_end_matches(']');
    let loopback =
        h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if loopback => Ok(uri),
        Some("http") => {
            Err("must be an https:// URL (plain http is accepted only for a loopback host)")
        }
        _ => Err("must be an https:// URL"),
    }
}

/// A URL as logs show it: scheme, host, port and path; never a user name,
/// password or query (where a careless setup might keep a token).
pub fn shown(url: &Uri) -> String {
    let host = url.host().unwrap_or_default();
    let port = url.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{host}{port}{}",
        url.scheme_str().unwrap_or_default(),
        url.path()
    )
}

/// A client's id and secret for `client_secret_basic` (RFC 6749 §2.3.1).
/// `Debug` shows the id only.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSecret {
    pub id: String,
    secret: Arc<str>,
}

impl ClientSecret {
    pub fn new(id: String, secret: String) -> ClientSecret {
        ClientSecret {
            id,
            secret: Arc::from(secret),
        }
    }

    fn basic(&self) -> Option<HeaderValue> {
        // RFC 6749 §2.3.1: both parts form-urlencoded before base64.
        let pair = format!("{}:{}", form_encode(&self.id), form_encode(&self.secret));
        let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
        let mut v = HeaderValue::from_str(&format!("Basic {b64}")).ok()?;
        v.set_sensitive(true);
        Some(v)
    }
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecret")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Why a call to an authorization server failed. Never holds a token,
/// secret or response body: only what a log may say.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthHttpError {
    #[error("{url}: {cause}")]
    Unreachable { url: String, cause: String },
    #[error("{url}: no answer within {TIMEOUT:?}")]
    Timeout { url: String },
    #[error("{url}: HTTP status {status}{}", error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default())]
    Status {
        url: String,
        status: u16,
        /// The OAuth `error` code of the answer, when it is one (RFC 6749 §5.2).
        error: Option<String>,
    },
    #[error("{url}: {why}")]
    Malformed { url: String, why: &'static str },
}

type Hyper = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The client; cheap to clone (one connection pool).
#[derive(Clone)]
pub struct OAuthHttp {
    client: Hyper,
}

impl std::fmt::Debug for OAuthHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OAuthHttp")
    }
}

impl OAuthHttp {
    /// Public web roots (and those of the system).
    pub fn new() -> Result<OAuthHttp, crate::tls::TlsError> {
        let tls = crate::tls::client_config(None, &[])?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http() // plain http only reaches a loopback host (check_endpoint)
            .enable_http1()
            .enable_http2()
            .build();
        Ok(OAuthHttp {
            client: Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector),
        })
    }

    /// GETs `url`; the body of a 200 answer.
    pub async fn get(&self, url: &Uri, accept: &'static str) -> Result<Bytes, OAuthHttpError> {
        let req = Request::get(url.clone())
            .header(ACCEPT, accept)
            .header(USER_AGENT, AGENT)
            .body(Full::new(Bytes::new()));
        self.call(url, req).await
    }

    /// POSTs `form` (already-encoded pairs) with `client` as Basic
    /// authentication; the JSON body of a 200 answer.
    pub async fn post_form(
        &self,
        url: &Uri,
        client: Option<&ClientSecret>,
        form: &[(&str, &str)],
    ) -> Result<Bytes, OAuthHttpError> {
        let body: String = form
            .iter()
            .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(url.clone())
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, AGENT)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(auth) = client.and_then(ClientSecret::basic) {
            req = req.header(AUTHORIZATION, auth);
        }
        self.call(url, req.body(Full::new(Bytes::from(body)))).await
    }

    async fn call(
        &self,
        url: &Uri,
        req: Result<Request<Full<Bytes>>, http::Error>,
    ) -> Result<Bytes, OAuthHttpError> {
        let at = shown(url);
        let req = req.map_err(|_| OAuthHttpError::Malformed {
            url: at.clone(),
            why: "cannot build the request",
        })?;
        let work = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| OAuthHttpError::Unreachable {
                    url: at.clone(),
                    cause: chain(&e),
                })?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|_| OAuthHttpError::Malformed {
                    url: at.clone(),
                    why: "the answer is over 1 MiB or was cut",
                })?
                .to_bytes();
            if status != StatusCode::OK {
                return Err(OAuthHttpError::Status {
                    url: at.clone(),
                    status: status.as_u16(),
                    error: oauth_error(&body),
                });
            }
            Ok(body)
        };
        tokio::time::timeout(TIMEOUT, work)
            .await
            .map_err(|_| OAuthHttpError::Timeout { url: at.clone() })?
    }
}

/// The `error` code of an RFC 6749 §5.2 answer, when it is a short token
/// (never the description: a server may echo what it was sent).
fn oauth_error(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct E {
        error: String,
    }
    let e: E = serde_json::from_slice(body).ok()?;
    (e.error.len() <= 64
        && e.error
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'))
    .then_some(e.error)
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// `application/x-www-form-urlencoded` (the WHATWG set: only `*-._` and
/// alphanumerics are left alone; a space is `+`).
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_https_or_loopback() {
        assert!(check_endpoint("https://idp.example.com/token").is_ok());
        assert!(check_endpoint("http://127.0.0.1:9/token").is_ok());
        assert!(check_endpoint("http://[::1]:9/token").is_ok());
        assert!(check_endpoint("http://localhost/token").is_ok());
        assert!(check_endpoint("http://idp.example.com/token").is_err());
        assert!(check_endpoint("ftp://idp.example.com/token").is_err());
        assert!(check_endpoint("not a url").is_err());
    }

    #[test]
    fn form_encoding_and_basic_auth() {
        assert_eq!(form_encode("a b+c/é"), "a+b%2Bc%2F%C3%A9");
        let c = ClientSecret::new("gw:1".into(), "s3cr=t".into());
        let v = c.basic().unwrap();
        let b64 = v.to_str().unwrap().strip_prefix("Basic ").unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(raw, b"gw%3A1:s3cr%3Dt");
        assert!(v.is_sensitive());
        assert!(!format!("{c:?}").contains("s3cr"));
    }

    #[test]
    fn only_short_error_codes_are_kept() {
        assert_eq!(
            oauth_error(br#"{"error":"invalid_grant","error_description":"tok123"}"#).as_deref(),
            Some("invalid_grant")
        );
        assert_eq!(oauth_error(br#"{"error":"has space"}"#), None);
        assert_eq!(oauth_error(b"<html>"), None);
    }
}
