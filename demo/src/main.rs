//! `portcullis-demo`: the example MCP server on its own, for a demo upstream that needs no
//! gateway in the same binary (the compose demo's `upstream` service; the production image
//! does not contain it). The same server as `portcullis demo-upstream`.
//!
//! Usage: `portcullis-demo [--listen ADDR]` (default 127.0.0.1:9100). Stops on SIGTERM or
//! Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

const USAGE: &str = "usage: portcullis-demo [--listen ADDR]";

fn listen_addr(mut args: impl Iterator<Item = String>) -> Result<SocketAddr, String> {
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 9100));
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => {
                let value = args.next().ok_or("--listen needs an address")?;
                listen = value
                    .parse()
                    .map_err(|e| format!("--listen {value}: {e}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(listen)
}

async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[tokio::main]
async fn main() -> ExitCode {
    let listen = match listen_addr(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    portcullis_demo::listen_and_serve(listen, shutdown()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_address_from_the_arguments() {
        let args = |a: &[&str]| listen_addr(a.iter().map(|s| s.to_string()));
        assert_eq!(args(&[]).unwrap(), "127.0.0.1:9100".parse().unwrap());
        assert_eq!(
            args(&["--listen", "0.0.0.0:9200"]).unwrap(),
            "0.0.0.0:9200".parse().unwrap()
        );
        assert!(args(&["--listen"]).is_err());
        assert!(args(&["--listen", "nine"]).is_err());
        assert!(args(&["--port", "1"]).is_err());
    }
}
