//! Local MCP servers spoken to over stdio (`[[upstream]] command = [...]`).
//!
//! The rest of the gateway sees such a program as an HTTP upstream like any
//! other: the forward phase's connection pool dials [`connector`], which
//! serves the program's HTTP face ([`face`]) in this process over an
//! in-memory pipe, so every message of the program goes through the same
//! phases and policy as an HTTP server's. Behind the face, the programs
//! ([`process`]) are started ([`spawn`]) on first use or at start, leased
//! one request (2026-07-28) or one session (2025-11-25 and older) at a
//! time, restarted with backoff, stopped when idle and on drain.
//!
//! Who may share a process: a program that speaks 2026-07-28 keeps no
//! session, so its processes are pooled for every caller of the same
//! route roots. An older program keeps what a client did (its
//! subscriptions, its level, whatever its tools hold), so its process is
//! initialized with one client's capabilities and serves only callers with
//! the same principal, capabilities and roots, one session at a time.

mod cgroup;
mod connector;
mod face;
mod frame;
mod metrics;
mod pool;
mod process;
mod sandbox;
mod spawn;
pub mod supervise;

pub(crate) use connector::StdioConnector;
pub use metrics::StdioMetrics;
pub(crate) use pool::{StdioUpstream, Unavailable};
pub use spawn::{keep_gateway_private, use_supervisor};

use crate::model::{Reason, Refusal};

/// The refusal of a request to a program that could not be had.
pub fn unavailable(e: &Unavailable) -> Refusal {
    Refusal::new(
        Reason::UpstreamUnreachable,
        format!("the upstream program is unavailable: {e}"),
    )
}

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::identify::Principal;

/// Set by the gateway on each request to a stdio upstream (any value a
/// client sent is replaced): who is calling, as a digest.
pub(crate) static OWNER: HeaderName = HeaderName::from_static("portcullis-stdio-owner");
/// Set by the gateway: the route's roots, as a JSON array of URIs.
pub(crate) static ROOTS: HeaderName = HeaderName::from_static("portcullis-stdio-roots");
/// Set by the forward phase on each request to a stdio upstream: the
/// upstream's `response_timeout` in milliseconds, which the face counts
/// from the moment a process has the request (see [`answer_within`]).
pub(crate) static ANSWER_WITHIN: HeaderName =
    HeaderName::from_static("portcullis-stdio-answer-within");
/// Set by the face on a request the program could not answer: why, as a
/// [`Unanswered`] name the forward phase turns into the refusal.
pub(crate) static UNANSWERED: HeaderName = HeaderName::from_static("portcullis-stdio-unanswered");

/// Why the face could not get an answer from a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unanswered {
    /// It exited (or was killed) before answering.
    Exited,
    /// It wrote something that is not a message, and was restarted.
    OutOfStep,
    /// It could not be started, or keeps exiting (backoff), or every
    /// process it may have is busy.
    Unavailable,
    /// It did not answer within the upstream's `response_timeout` (a
    /// process's first request: plus its `connect_timeout`).
    Timeout,
}

impl Unanswered {
    const ALL: [Unanswered; 4] = [
        Unanswered::Exited,
        Unanswered::OutOfStep,
        Unanswered::Unavailable,
        Unanswered::Timeout,
    ];

    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Unanswered::Exited => "exited",
            Unanswered::OutOfStep => "out_of_step",
            Unanswered::Unavailable => "unavailable",
            Unanswered::Timeout => "timeout",
        }
    }

    pub(crate) fn parse(s: &[u8]) -> Option<Unanswered> {
        Self::ALL.into_iter().find(|u| u.as_str().as_bytes() == s)
    }
}

/// How long a process has to answer a request, from the moment it has it:
/// the upstream's `response_timeout` (the forward phase's header), and for
/// a process that has never answered also its `connect_timeout`, since its
/// start (an interpreter loading, a package fetched) is still under way
/// and no start report can see its end. Starting and leasing a process
/// are bounded by `connect_timeout` on their own.
pub(crate) fn answer_within(
    headers: &HeaderMap,
    first_answer: bool,
    start: Duration,
) -> Option<Duration> {
    let millis: u64 = headers.get(&ANSWER_WITHIN)?.to_str().ok()?.parse().ok()?;
    let within = Duration::from_millis(millis);
    Some(if first_answer { within + start } else { within })
}

/// The longest the forward phase waits for a stdio upstream's response
/// head: a lease (its start, at most `connect_timeout`), a first answer
/// (`connect_timeout` more) and the response timeout; the face ends the
/// call sooner with [`Unanswered::Timeout`] where it can.
pub(crate) fn longest_wait(response: Duration, start: Duration) -> Duration {
    response + start * 2
}

/// Tell the face whom a request is for: the caller (as a digest of the
/// auth scheme that accepted it and its name) and the route's roots. Replaces whatever a
/// client sent under these names.
pub fn stamp(headers: &mut HeaderMap, principal: &Principal, roots: &[String]) {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    digest.update(principal.scheme.as_bytes());
    digest.update(b"\0");
    digest.update(principal.name.as_bytes());
    let hex: String = digest.finish().as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if let Ok(v) = HeaderValue::from_str(&hex) {
        headers.insert(OWNER.clone(), v);
    }
    let roots = serde_json::to_string(roots).unwrap_or_else(|_| "[]".into());
    match HeaderValue::from_str(&roots) {
        Ok(v) => headers.insert(ROOTS.clone(), v),
        Err(_) => headers.insert(ROOTS.clone(), HeaderValue::from_static("[]")),
    };
}
