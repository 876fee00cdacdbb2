//! The example MCP server behind `portcullis demo`: a small room-booking
//! server speaking protocol 2026-07-28 over stateless Streamable HTTP at
//! `POST /mcp`, built on the rmcp SDK's server.
//!
//! Its `book_room` tool is the MRTR seed scenario (`data/seed_request.json`
//! is the seed's first request, verbatim); [`flow`] performs that exchange
//! through a gateway and prints each message.

mod booking;
pub mod flow;
mod rooms;
mod server;

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

pub use booking::KeyError;
pub use server::{report_streams_cancelled, RoomServer, SERVER_NAME};

/// The one path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// The seed's first request, verbatim: `book_room` for "the big room".
pub const SEED_REQUEST: &str = include_str!("../data/seed_request.json");

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("the demo MCP server stopped: {0}")]
    Io(#[from] std::io::Error),
}

/// Serve the demo MCP server at `/mcp` on `listener` (HTTP/1.1 and HTTP/2)
/// until `shutdown` resolves; then open event streams are ended and
/// in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let rooms = RoomServer::new()?;
    let config = transport_config();
    let streams = config.cancellation_token.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(rooms.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let app = axum::Router::new().route_service(MCP_PATH, mcp);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            streams.cancel();
        })
        .await?;
    Ok(())
}

/// The server on its own (`portcullis-demo`, `portcullis demo-upstream`): bind
/// `listen`, say on stderr where it answers (the bound port, for `:0`), serve
/// until `shutdown`. Errors are printed; the exit code says how it ended.
pub async fn listen_and_serve(
    listen: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> ExitCode {
    let listener = match TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let bound = listener.local_addr().unwrap_or(listen);
    eprintln!("demo MCP server on http://{bound}{MCP_PATH}");
    match serve(listener, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn transport_config() -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        // 2026-07-28 only: no sessions, every request stands alone.
        .with_legacy_session_mode(false)
        // A plain answer is `application/json`; an event stream only when the
        // tool sends something (progress) before its result.
        .with_json_response(true)
        .with_sse_keep_alive(None)
        // It is reached by other names than localhost: through the gateway,
        // nginx in the benchmark (`Host: mcp_upstream`), compose (`upstream`).
        // The gateway in front polices `Origin`.
        .disable_allowed_hosts()
}

/// At most `max_chars` characters of `text`, cut on a character boundary.
fn clip(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}
