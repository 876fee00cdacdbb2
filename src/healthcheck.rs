//! `portcullis healthcheck`: a liveness probe for places that have no HTTP
//! client, such as Docker's `HEALTHCHECK` in a minimal image. It sends
//! `GET /healthz` to the admin listener and succeeds only on `200`.
//!
//! The admin address is read from the same config file the gateway runs
//! with (`[admin] address`), so the port is written in one place; a wildcard
//! bind address (`0.0.0.0`, `::`) is probed on the loopback of its family.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;

/// How long one probe may take, connection included. Docker's own
/// `--timeout` (deploy/Dockerfile) is longer, so this one reports first.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a probe failed. Each says what was tried, never what a body held.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot read {}: {source}", path.display())]
    ReadConfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    ParseConfig {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("{}: no [admin] address to probe", path.display())]
    NoAdmin { path: PathBuf },
    #[error("[admin] address {0:?} is not an IP:PORT socket address")]
    BadAddress(String),
    #[error("{0:?} is not an http://HOST:PORT/PATH URL")]
    BadUrl(String),
    #[error("cannot connect to {target}: {source}")]
    Connect {
        target: String,
        source: std::io::Error,
    },
    #[error("HTTP exchange with {target} failed: {source}")]
    Http {
        target: String,
        source: hyper::Error,
    },
    #[error("no answer from {target} within {timeout:?}")]
    Timeout { target: String, timeout: Duration },
    #[error("{url} answered {status}")]
    Status { url: String, status: StatusCode },
}

/// The `/healthz` URL of the admin listener configured in `path`.
pub fn url_from_config(path: &Path) -> Result<String, ProbeError> {
    Ok(format!("http://{}/healthz", admin_from_config(path)?))
}

/// Where to reach the admin listener configured in `path`.
pub fn admin_from_config(path: &Path) -> Result<SocketAddr, ProbeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProbeError::ReadConfig {
        path: path.to_owned(),
        source,
    })?;
    // Only [admin] is needed: a full config load would also read policies
    // and keys on every probe.
    let table: toml::Table = text.parse().map_err(|source| ProbeError::ParseConfig {
        path: path.to_owned(),
        source,
    })?;
    let address = table
        .get("admin")
        .and_then(|admin| admin.get("address"))
        .and_then(toml::Value::as_str)
        .ok_or_else(|| ProbeError::NoAdmin {
            path: path.to_owned(),
        })?;
    let bound: SocketAddr = address
        .parse()
        .map_err(|_| ProbeError::BadAddress(address.to_owned()))?;
    Ok(probe_address(bound))
}

/// Where to reach a listener bound to `bound`: wildcards become loopback.
fn probe_address(bound: SocketAddr) -> SocketAddr {
    let ip = match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, bound.port())
}

/// GET `url` once; Ok only for a `200` within `timeout`.
pub async fn probe(url: &str, timeout: Duration) -> Result<(), ProbeError> {
    let parsed = url::Url::parse(url).map_err(|_| ProbeError::BadUrl(url.to_owned()))?;
    let (Some(host), Some(port), "http") = (
        parsed.host_str(),
        parsed.port_or_known_default(),
        parsed.scheme(),
    ) else {
        return Err(ProbeError::BadUrl(url.to_owned()));
    };
    let target = format!("{host}:{port}");
    let exchange = get_status(&parsed, host, port, &target);
    let status = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| ProbeError::Timeout {
            target: target.clone(),
            timeout,
        })??;
    if status == StatusCode::OK {
        Ok(())
    } else {
        Err(ProbeError::Status {
            url: url.to_owned(),
            status,
        })
    }
}

async fn get_status(
    url: &url::Url,
    host: &str,
    port: u16,
    target: &str,
) -> Result<StatusCode, ProbeError> {
    // url keeps the brackets of an IPv6 host; the socket API wants none.
    let connect_host = host.trim_start_matches('[').trim_end_matches(']');
    let stream = tokio::net::TcpStream::connect((connect_host, port))
        .await
        .map_err(|source| ProbeError::Connect {
            target: target.to_owned(),
            source,
        })?;
    let http_error = |source| ProbeError::Http {
        target: target.to_owned(),
        source,
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(http_error)?;
    tokio::spawn(connection);
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let request = Request::get(path)
        .header(header::HOST, target)
        .header(header::USER_AGENT, "portcullis-healthcheck")
        .body(Empty::<Bytes>::new())
        .map_err(|_| ProbeError::BadUrl(url.to_string()))?;
    let response = sender.send_request(request).await.map_err(http_error)?;
    Ok(response.status())
}

/// The subcommand: probe `url`, or the admin listener of `config`; print why
/// on failure. Exit 0 when healthy, 1 when not, 2 when the target is unclear.
pub async fn run(config: Option<&Path>, url: Option<&str>) -> ExitCode {
    let url = match (config, url) {
        (_, Some(url)) => url.to_owned(),
        (Some(path), None) => match url_from_config(path) {
            Ok(url) => url,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        (None, None) => {
            eprintln!("error: give --config FILE (probes its [admin] address) or --url URL");
            return ExitCode::from(2);
        }
    };
    match probe(&url, PROBE_TIMEOUT).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("unhealthy: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::record::Metrics;
    use std::sync::atomic::Ordering;
    use tokio::net::TcpListener;

    fn config_file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        std::io::Write::write_all(&mut f, text.as_bytes()).expect("write");
        f
    }

    /// The gateway's real admin listener on an OS-chosen loopback port.
    async fn admin_listener(ready: bool) -> (SocketAddr, tokio::sync::watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics = Metrics::new().expect("metrics");
        metrics.ready.store(ready, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::watch::channel(false);
        let keys = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        tokio::spawn(crate::admin::serve(listener, metrics, keys, None, rx));
        (addr, tx)
    }

    #[test]
    fn wildcard_addresses_are_probed_on_loopback() {
        for (bound, probed) in [
            ("0.0.0.0:9901", "http://127.0.0.1:9901/healthz"),
            ("[::]:9902", "http://[::1]:9902/healthz"),
            ("10.1.2.3:9903", "http://10.1.2.3:9903/healthz"),
        ] {
            let f = config_file(&format!("[admin]\naddress = \"{bound}\"\n"));
            assert_eq!(url_from_config(f.path()).expect("url"), probed);
        }
    }

    #[test]
    fn a_config_without_a_usable_admin_address_is_a_clear_error() {
        let none = config_file("[[listener]]\naddress = \"0.0.0.0:8080\"\n");
        assert!(matches!(
            url_from_config(none.path()),
            Err(ProbeError::NoAdmin { .. })
        ));
        let name = config_file("[admin]\naddress = \"localhost:9901\"\n");
        assert!(matches!(
            url_from_config(name.path()),
            Err(ProbeError::BadAddress(_))
        ));
        let broken = config_file("[admin\naddress = 1\n");
        assert!(matches!(
            url_from_config(broken.path()),
            Err(ProbeError::ParseConfig { .. })
        ));
        assert!(matches!(
            url_from_config(Path::new("/nonexistent/portcullis.toml")),
            Err(ProbeError::ReadConfig { .. })
        ));
    }

    #[tokio::test]
    async fn healthz_of_the_admin_listener_is_healthy() {
        let (addr, _stop) = admin_listener(true).await;
        probe(&format!("http://{addr}/healthz"), PROBE_TIMEOUT)
            .await
            .expect("healthy");
    }

    #[tokio::test]
    async fn a_status_other_than_200_is_unhealthy() {
        let (addr, _stop) = admin_listener(false).await;
        let err = probe(&format!("http://{addr}/readyz"), PROBE_TIMEOUT)
            .await
            .expect_err("503 is not healthy");
        assert!(matches!(
            err,
            ProbeError::Status { status, .. } if status == StatusCode::SERVICE_UNAVAILABLE
        ));
    }

    #[tokio::test]
    async fn a_closed_port_is_unhealthy() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        drop(listener);
        let err = probe(&format!("http://{addr}/healthz"), PROBE_TIMEOUT)
            .await
            .expect_err("nothing listens");
        assert!(matches!(err, ProbeError::Connect { .. }));
    }

    #[tokio::test]
    async fn a_listener_that_never_answers_times_out() {
        // Accepts the connection (the kernel does) and never reads it.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let err = probe(
            &format!("http://{addr}/healthz"),
            Duration::from_millis(200),
        )
        .await
        .expect_err("no answer");
        assert!(matches!(err, ProbeError::Timeout { .. }));
        drop(listener);
    }

    #[tokio::test]
    async fn only_plain_http_urls_are_probed() {
        for url in [
            "https://127.0.0.1:1/healthz",
            "127.0.0.1:1",
            "ftp://127.0.0.1/healthz",
            "not a url",
        ] {
            assert!(
                matches!(probe(url, PROBE_TIMEOUT).await, Err(ProbeError::BadUrl(_))),
                "{url}"
            );
        }
    }
}
