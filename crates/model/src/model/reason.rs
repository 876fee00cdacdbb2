//! Every way the gateway can refuse a message: one table, from which the
//! stable reason string, the JSON-RPC error code and the HTTP status are
//! generated. The reason strings are a public contract (dashboards, alerts and
//! client code match on them): add new ones, never rename.

use std::fmt;

use http::StatusCode;

use super::Invisible;

/// A set of reasons some part of the gateway treats alike: a column of the
/// table below (each row lists the sets it belongs to), so no phase keeps a
/// list of its own that could drift from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasonSet {
    /// The upstream failed or refused (`portcullis_upstream_errors_total`).
    Upstream,
    /// The client's `requestState`, or its answers on a retry, refused.
    State,
    /// An MRTR operation ended by it failed rather than was refused (the
    /// audit trail's `operation_end` `outcome: "error"`).
    Fails,
    /// An operation ended by it expired (`outcome: "expired"`).
    Expires,
    /// An operation ended by it asked too many rounds (`outcome: "round_limit"`).
    Rounds,
}

/// Writes the [`Reason`] enum and its lookups from one table of
/// `Variant => "reason", code, STATUS, [sets], "when";` rows.
macro_rules! reason_table {
    ($( $variant:ident => $name:literal, $code:expr, $status:ident, [$($set:ident),*], $when:literal; )*) => {
        /// Stable, documented refusal reasons. `as_str` is what goes into
        /// `data.reason` and into the `outcome` label of the request metrics.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $( #[doc = $when] $variant, )*
        }

        impl Reason {
            pub const ALL: &'static [Reason] = &[$( Reason::$variant, )*];

            pub const fn as_str(self) -> &'static str {
                match self { $( Reason::$variant => $name, )* }
            }

            /// JSON-RPC error code. Codes the MCP spec defines are used where
            /// they fit; the gateway's own are in -32000..-32019, which the
            /// spec leaves to implementations (it reserves -32020..-32099).
            pub const fn code(self) -> i64 {
                match self { $( Reason::$variant => $code, )* }
            }

            pub(crate) const fn status(self) -> StatusCode {
                match self { $( Reason::$variant => StatusCode::$status, )* }
            }

            /// The sets this reason belongs to (its row's column).
            pub(crate) const fn sets(self) -> &'static [ReasonSet] {
                match self { $( Reason::$variant => &[$( ReasonSet::$set, )*], )* }
            }

            /// When the gateway answers with this reason (the book's table of reasons).
            pub(crate) const fn when(self) -> &'static str {
                match self { $( Reason::$variant => $when, )* }
            }

            pub fn parse(s: &str) -> Option<Reason> {
                match s { $( $name => Some(Reason::$variant), )* _ => None }
            }
        }
    };
}

// A policy refusal answers a request the upstream did handle: it travels as a
// JSON-RPC error at 200 so every client shows its message (SDKs turn 5xx into
// bare transport errors). Every elicitation-policy refusal shares -32010;
// data.reason tells them apart.
reason_table! {
    RouteNotFound => "route_not_found", -32002, NOT_FOUND, [], "no route for the path";
    MethodNotAllowed => "method_not_allowed", -32600, METHOD_NOT_ALLOWED, [], "an HTTP method the endpoint does not serve (`Allow` lists those it does)";
    UnsupportedMediaType => "unsupported_media_type", -32600, UNSUPPORTED_MEDIA_TYPE, [], "body not `application/json`";
    HostNotAllowed => "host_not_allowed", -32013, MISDIRECTED_REQUEST, [], "`Host` / `:authority` is not one of the listener's `server_names` (DNS rebinding)";
    OriginNotAllowed => "origin_not_allowed", -32003, FORBIDDEN, [], "`Origin` is neither in `allowed_origins` nor the gateway's own origin";
    BodyTooLarge => "body_too_large", -32004, PAYLOAD_TOO_LARGE, [], "request body over `max_request_body_bytes`";
    RequestTimeout => "request_timeout", -32005, REQUEST_TIMEOUT, [Fails], "request body slower than `request_body_timeout`";
    InvalidJson => "invalid_json", -32700, BAD_REQUEST, [], "not JSON, a member given twice anywhere, a lone surrogate, nesting deeper than 128";
    BatchNotSupported => "batch_not_supported", -32600, BAD_REQUEST, [], "a JSON array";
    InvalidRequest => "invalid_request", -32600, BAD_REQUEST, [], "not a JSON-RPC 2.0 request or notification";
    HeaderMissing => "header_missing", -32020, BAD_REQUEST, [], "`Mcp-Method`, `Mcp-Name` (on tools/call, prompts/get, resources/read) or `MCP-Protocol-Version` missing";
    HeaderMismatch => "header_mismatch", -32020, BAD_REQUEST, [], "one of those differs from the body, is given twice, or is badly encoded";
    UnsupportedProtocolVersion => "unsupported_protocol_version", -32022, BAD_REQUEST, [], "`data.requested`, `data.supported`";
    Overloaded => "overloaded", -32014, SERVICE_UNAVAILABLE, [], "more requests in flight than `max_in_flight_requests` (`Retry-After`)";
    InspectionBusy => "inspection_busy", -32014, SERVICE_UNAVAILABLE, [], "an upstream message over `inline_inspection_bytes` while that upstream already has `heavy_inspections_per_upstream` large messages in inspection and `heavy_inspection_queue` waiting (`Retry-After`)";
    GatewayTimeout => "gateway_timeout", -32015, GATEWAY_TIMEOUT, [], "no response head within `request_timeout`";
    InternalError => "internal_error", -32603, INTERNAL_SERVER_ERROR, [], "a bug in the gateway (a panic while handling the request); counted, the gateway keeps serving";
    UpstreamUnreachable => "upstream_unreachable", -32001, BAD_GATEWAY, [Upstream, Fails], "connect failed (refused, DNS, TLS)";
    UpstreamIdentityMismatch => "upstream_identity_mismatch", -32001, BAD_GATEWAY, [Upstream, Fails], "the https upstream's certificate key is not one of its `tls_pins` (SHA-256 of the SubjectPublicKeyInfo): the handshake is refused before anything is sent, and the gateway logs and counts it like any upstream failure";
    UpstreamTimeout => "upstream_timeout", -32001, GATEWAY_TIMEOUT, [Upstream, Fails], "no response head / JSON body within `response_timeout`, or a stream silent past `stream_idle_timeout`";
    UpstreamBadResponse => "upstream_bad_response", -32001, BAD_GATEWAY, [Upstream, Fails], "not a JSON-RPC message (HTML error page: `data.upstreamStatus`), compressed, wrong content type, an event-stream line that is no field, stream ended without a response";
    UpstreamConnectionClosed => "upstream_connection_closed", -32001, BAD_GATEWAY, [Upstream, Fails], "the upstream closed the connection mid-answer";
    UpstreamResponseTooLarge => "upstream_response_too_large", -32001, BAD_GATEWAY, [Upstream, Fails], "one message over `max_response_body_bytes`";
    UpstreamProtocolViolation => "upstream_protocol_violation", -32001, BAD_GATEWAY, [Upstream, Fails], "a message the protocol does not let the upstream send there: a server-to-client request, a notification or batch instead of the response, an answer for another id, a list result whose items are not objects, a 2025-11-25 `{\"task\": …}` result replayed on a resumed stream, a `notifications/elicitation/complete` on a 2026-07-28 stream or naming no URL-mode elicitation this gateway delivered in the session";
    ShuttingDown => "shutting_down", -32006, SERVICE_UNAVAILABLE, [Fails], "refused or cut during drain";
    InputRequiredNotAllowed => "input_required_not_allowed", -32010, OK, [], "`input_required` on a method that cannot have it";
    ReplayedQuestion => "replayed_question", -32010, OK, [], "an `input_required` result replayed on a resumed 2025-11-25 stream: the request it answers is unknown, so no state can be sealed for it (a question that breaks a rule gets that rule's reason)";
    InvalidInputRequired => "invalid_input_required", -32010, OK, [], "malformed `input_required` (shape, nesting)";
    DuplicateMember => "duplicate_member", -32010, OK, [], "a member given twice in an upstream message (parser differential)";
    UnknownInputRequestMethod => "unknown_input_request_method", -32010, OK, [], "not elicitation/create, sampling/createMessage, roots/list";
    SchemaNotAllowed => "schema_not_allowed", -32010, OK, [], "a form schema outside the spec's subset (`data.field`)";
    LimitExceeded => "limit_exceeded", -32010, OK, [], "`data.limit` names the policy limit";
    SecretFieldRequested => "secret_field_requested", -32010, OK, [], "a form asks for a secret (`data.key`, `data.field`)";
    UnsafeOptionValue => "unsafe_option_value", -32010, OK, [], "an option value with markup or invisible characters";
    UrlModeNotAllowed => "url_mode_not_allowed", -32010, OK, [], "URL mode blocked by policy";
    UrlNotAllowed => "url_not_allowed", -32010, OK, [], "`data.urlReason`: scheme_not_allowed, user_info, ip_literal, punycode, mixed_script, host_denied, host_not_allowed, …";
    DeprecatedRequestKind => "deprecated_request_kind", -32010, OK, [], "sampling or roots blocked by policy";
    SamplingContextNotAllowed => "sampling_context_not_allowed", -32010, OK, [], "`includeContext` other than none";
    PromptInjection => "prompt_injection", -32010, OK, [], "`data.injectionRule`";
    InvalidTask => "invalid_task", -32010, OK, [], "a task (Tasks extension) whose shape is wrong: no `taskId`, an unknown `status`, `inputRequests` outside `input_required` or on the task-creating result, a task answering a method other than tools/call, a completed task whose `result` asks again (`input_required`, another task), a `tasks/update` or `tasks/cancel` acknowledgement that asks, a `tasks/get` answered with another task";
    TasksRefused => "tasks_refused", -32018, OK, [], "the route refuses the Tasks extension (`tasks = \"refuse\"`): a `tasks/*` request, or an upstream that answered with a task";
    InvalidName => "invalid_name", -32010, OK, [], "a server name (`serverInfo.name`) with markup, controls or invisible characters, or over 256 bytes: it cannot be cleaned without changing whom it names";
    MissingClientCapability => "missing_client_capability", -32021, BAD_REQUEST, [], "`data.requiredCapabilities`";
    StateMissing => "state_missing", -32602, BAD_REQUEST, [State], "`inputResponses`, or a 2026-07-28 `tasks/*` request, without the gateway's `requestState`";
    StateTooLarge => "state_too_large", -32602, BAD_REQUEST, [State], "a client state larger than the gateway issues";
    StateInvalid => "state_invalid", -32602, BAD_REQUEST, [State], "not issued by this gateway, altered or truncated";
    StateUnknownKey => "state_unknown_key", -32602, BAD_REQUEST, [State], "sealed with a key this instance does not hold";
    StateExpired => "state_expired", -32602, BAD_REQUEST, [State, Expires], "past `round_timeout`";
    StatePrincipalMismatch => "state_principal_mismatch", -32602, BAD_REQUEST, [State], "issued to another caller";
    StateUpstreamMismatch => "state_upstream_mismatch", -32602, BAD_REQUEST, [State], "issued for another upstream";
    StateTargetMismatch => "state_target_mismatch", -32602, BAD_REQUEST, [State], "issued for another tool, prompt or resource";
    StateArgumentsMismatch => "state_arguments_mismatch", -32602, BAD_REQUEST, [State], "the retry changed the arguments";
    StateReplayed => "state_replayed", -32602, BAD_REQUEST, [State], "a single-use state used again after its answer was delivered";
    StateStoreUnavailable => "state_store_unavailable", -32007, SERVICE_UNAVAILABLE, [State, Fails], "single-use store (Redis) unreachable";
    InvalidAnswer => "invalid_answer", -32602, BAD_REQUEST, [State], "an answer that does not fit what was asked (`data.key`, `data.field`)";
    SecretInAnswer => "secret_in_answer", -32602, BAD_REQUEST, [State], "a value that looks like a secret in an ordinary field (never echoed)";
    RoundLimitExceeded => "round_limit_exceeded", -32011, OK, [Rounds], "more rounds than `max_rounds`";
    OperationExpired => "operation_expired", -32011, OK, [Expires], "longer than `max_operation_time`";
    AnswerLimitExceeded => "answer_limit_exceeded", -32011, OK, [], "more answer bytes than `max_answer_bytes`";
    AuthenticationRequired => "authentication_required", -32008, UNAUTHORIZED, [], "no credential where the route needs one (`WWW-Authenticate`)";
    InvalidCredentials => "invalid_credentials", -32008, UNAUTHORIZED, [], "a credential that does not verify; on an OAuth route also a token issued for another resource (`aud`), expired or not yet valid, or one the issuer's introspection calls inactive";
    InsufficientScope => "insufficient_scope", -32008, FORBIDDEN, [], "an OAuth access token without a scope the route (`required_scopes`) or an allow rule (`scopes`) needs for this request: `WWW-Authenticate: Bearer error=\"insufficient_scope\", scope=…` names what to ask for (step-up), `data.requiredScopes`";
    AuthorizationServerUnavailable => "authorization_server_unavailable", -32008, SERVICE_UNAVAILABLE, [Fails], "an opaque access token could not be checked: the issuer's metadata is not loaded or its introspection endpoint did not answer";
    RateLimited => "rate_limited", -32009, TOO_MANY_REQUESTS, [], "over a limit: `data.scope`, `data.retryAfterSeconds`, `Retry-After`";
    RateLimiterUnavailable => "rate_limiter_unavailable", -32009, SERVICE_UNAVAILABLE, [], "Redis down with `redis_failure = \"refuse\"`";
    ToolNotPermitted => "tool_not_permitted", -32012, FORBIDDEN, [], "the caller may not use that tool, prompt or resource";
    ApprovalDeclined => "approval_declined", -32019, OK, [], "the person asked by an `[[approval]]` rule declined the call (declined or cancelled the gateway's question, or accepted it without ticking `approve`; or the approver declined it on the approval page); `data.rule`; nothing was forwarded";
    ApprovalExpired => "approval_expired", -32019, OK, [Expires], "the gateway's approval question was not answered (nor decided on the approval page) within the rule's `timeout`; `data.rule`; nothing was forwarded";
    ApprovalUnavailable => "approval_unavailable", -32019, OK, [], "an `[[approval]]` rule asks about the call, but the client declared no elicitation (form mode; URL mode for `approver = \"approvers\"`) and the rule names no `fallback`, or no `[admin]` listener serves the approval page, or too many calls already wait for an approver (32 of the caller's, 10,000 in all); `data.rule`";
    ListingChanged => "listing_changed", -32010, OK, [], "a `tools/call`, `prompts/get` or `resources/read` naming an item whose listed definition changed since the gateway pinned it, held under `[listing] on_change = \"remove\"` until an operator accepts it (`portcullis listings accept`; `data.kind`)";
    ListingStoreUnavailable => "listing_store_unavailable", -32007, SERVICE_UNAVAILABLE, [], "the store of pinned listings (Redis) unreachable under `on_change = \"remove\"`: a list, or a call naming a listed item, is refused rather than delivered unchecked";
    NotListed => "not_listed", -32602, OK, [], "a `tools/call` or `prompts/get` (or a completion's reference) naming an item the gateway never listed to this caller on this upstream, once it fetched the list itself (`data.kind`; `[arguments] schema`)";
    ArgumentsInvalid => "arguments_invalid", -32602, OK, [], "arguments outside the definition the gateway listed: the tool's `inputSchema` (a missing required property, a wrong type, a value outside `enum`, `const`, bounds, `pattern` or `format`) or a prompt's arguments (`data.path`, `data.keyword`; never the value)";
    UndeclaredArgument => "undeclared_argument", -32602, OK, [], "an argument property the listed schema does not declare (`data.path`; `[arguments] undeclared`)";
    ExcessiveScope => "excessive_scope", -32008, FORBIDDEN, [], "the upstream answered 401 or 403 asking, for a tool that only reads (`readOnlyHint`, or a reading verb first in its name), for OAuth scopes that write, delete, send or administer (`[authorization] excessive_scopes`): its `WWW-Authenticate` challenge is not passed on, so the client does not ask the person for them (`data.scopes`: how many were asked, `data.excessive`: how many of them grant more than reading; never the token)";
    SecretInArguments => "secret_in_arguments", -32602, OK, [], "an argument value that is a credential: a token with a known prefix, a private key, a JWT, a card number, a password where the property says so, a high-entropy value in a credential-named property (`data.path`, `data.kind`; never the value)";
    PrivatePathInArguments => "private_path_in_arguments", -32602, OK, [], "an argument naming a private file in any spelling (`~/.ssh`, cloud and kube credentials, `.env`, browser profiles, keychains, `/etc/shadow`, …: `data.path`, `data.pathClass`)";
    AddressNotAllowed => "address_not_allowed", -32602, OK, [], "an argument URL or host that is loopback, private, link-local, cloud metadata, reserved, a local name, an IP literal or a denied host, in any spelling (`data.path`, `data.addressClass`)";
    ShellInArguments => "shell_in_arguments", -32602, OK, [], "shell syntax aimed at execution in an argument (`data.path`, `data.construct`)";
    CrossUpstreamFlow => "cross_upstream_flow", -32602, OK, [], "an argument carrying a secret or private value the gateway delivered to this caller from another upstream's result (`data.path`, `data.origin`: that upstream's id; never the value)";
    SessionInvalid => "session_invalid", -32017, NOT_FOUND, [], "`Mcp-Session-Id` not issued by this gateway, altered, or issued to another caller or for another upstream (2025-11-25; the client initializes again)";
    SessionExpired => "session_expired", -32017, NOT_FOUND, [], "a 2025-11-25 session older than `session_lifetime`, or ended with DELETE (on every instance sharing the single-use store; the client initializes again); also the gateway's answer to a request an upstream pushes in a session that has ended";
    AnswerNotRequested => "answer_not_requested", -32602, BAD_REQUEST, [], "a client's JSON-RPC response to a request this gateway did not deliver in this session";
    UnknownName => "unknown_name", -32602, BAD_REQUEST, [], "on a federated route: a tool or prompt name, resource URI or completion reference that starts with no upstream's prefix (the message lists the prefixes), or an answer, task or session part naming an upstream the route does not have";
    CursorInvalid => "cursor_invalid", -32602, BAD_REQUEST, [], "on a federated route: a list `cursor` this gateway did not issue for this route, caller and list, or one altered";
    CallNotWaiting => "call_not_waiting", -32602, CONFLICT, [], "an answer to a call that no longer waits: a 2025-11-25 client's answer to a question the gateway pushed (a bridged 2026-07-28 upstream's, or its own approval), or a 2026-07-28 client's retry of a call carried in a 2025-11-25 upstream session, after the call ended or was answered (on the replica that holds it, when the answer reached another: the book's Several replicas page)";
    CallHolderGone => "call_holder_gone", -32602, CONFLICT, [], "an answer or retry for a call held by another replica that cannot take it: that replica stopped or lost its Redis connection (nobody listens on its relay channel), or did not reply within the wait's limit; the call is lost and the client starts it again (the book's Several replicas page)";
    UpstreamCredentialUnavailable => "upstream_credential_unavailable", -32016, BAD_GATEWAY, [Upstream, Fails], "the gateway could not obtain its own credential for the upstream (`[upstream.credential]`: the token endpoint refused or did not answer); the message names the upstream, never a secret";
    UpstreamRefused => "upstream_refused", -32016, BAD_GATEWAY, [Upstream], "the upstream itself refused with HTTP 4xx: the client gets the same status (401, 403, 404, 421, 429, …) and `data.upstreamStatus`; a 401 or 403 is answered 502 where the upstream was shown the gateway's own credential (`[upstream.credential]`, or an OAuth route): it refused the gateway, not the client";
}

impl Reason {
    /// Whether the reason is in `set` (its row says so).
    pub const fn is_in(self, set: ReasonSet) -> bool {
        let sets = self.sets();
        let mut i = 0;
        while i < sets.len() {
            if sets[i] as u8 == set as u8 {
                return true;
            }
            i += 1;
        }
        false
    }

    /// A refusal the upstream caused, its own 4xx included (counted as an
    /// upstream error).
    pub const fn is_upstream_failure(self) -> bool {
        self.is_in(ReasonSet::Upstream)
    }

    /// A refusal of the client's `requestState` or answers on a retry.
    #[cfg(test)]
    pub(crate) const fn is_state_refusal(self) -> bool {
        self.is_in(ReasonSet::State)
    }
}

/// The book's table of reasons (`docs/src/reference/errors.md`), generated from
/// the one table above (a test keeps the page equal to it).
pub fn markdown_table() -> String {
    let mut out = String::from("| `data.reason` | HTTP | code | when |\n|---|---|---|---|\n");
    for r in Reason::ALL {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            r.as_str(),
            r.status().as_u16(),
            r.code(),
            r.when()
        ));
    }
    out
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal ready to be written as a JSON-RPC error. `message` is for a person;
/// it must never contain a value the user typed, a secret, or upstream state.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Refusal {
    pub reason: Reason,
    pub message: String,
    /// Extra members of `error.data` (beside `reason` and `upstream`), e.g.
    /// `supported` for -32022.
    pub extra: Option<Box<serde_json::Map<String, serde_json::Value>>>,
    /// The HTTP status when it is not the reason's own (an upstream's 4xx
    /// passed on as `upstream_refused`).
    pub(crate) status: Option<StatusCode>,
    /// The upstream's own `WWW-Authenticate` challenge, answered with its
    /// 401 or 403 where the route forwards the client's `Authorization`
    /// (the client signs in, or steps up, at the upstream's server).
    /// (One pointer: rare, and every `Result<_, Refusal>` carries its size.)
    pub(crate) challenge: Option<Box<Challenges>>,
}

/// The `WWW-Authenticate` challenges a refusal answers with, in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Challenges(Vec<http::HeaderValue>);

impl Refusal {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Refusal {
            reason,
            message: message.into(),
            extra: None,
            status: None,
            challenge: None,
        }
    }

    /// One more `WWW-Authenticate` challenge to answer with (an upstream
    /// may send several: `Basic`, then `Bearer`).
    pub fn with_challenge(mut self, challenge: http::HeaderValue) -> Self {
        self.challenge
            .get_or_insert_with(Default::default)
            .0
            .push(challenge);
        self
    }

    /// The `WWW-Authenticate` challenges this refusal is answered with.
    pub fn challenges(&self) -> &[http::HeaderValue] {
        self.challenge.as_deref().map_or(&[], |c| c.0.as_slice())
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = Some(status);
        self
    }

    /// The HTTP status this refusal is answered with.
    pub fn status(&self) -> StatusCode {
        self.status.unwrap_or(self.reason.status())
    }

    pub fn with_data(mut self, key: &str, value: serde_json::Value) -> Self {
        self.extra
            .get_or_insert_with(Default::default)
            .insert(key.to_owned(), value);
        self
    }

    /// An extra `data` member, when set.
    pub fn data(&self, key: &str) -> Option<&serde_json::Value> {
        self.extra.as_ref().and_then(|m| m.get(key))
    }
}

/// A name taken from a message (a key, a field, a method, a tool), fit for
/// a refusal's words and the logs: control and invisible characters (the
/// one table, [`Invisible`]) dropped, at most 64 characters.
pub fn printable_name(s: &str) -> String {
    s.chars()
        .filter(|&c| !c.is_control() && Invisible::of(c).is_none())
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn reasons_are_unique_snake_case_and_codes_avoid_the_spec_reserved_range() {
        let mut seen = HashSet::new();
        for r in Reason::ALL {
            let s = r.as_str();
            assert!(seen.insert(s), "duplicate reason {s}");
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            assert_eq!(Reason::parse(s), Some(*r));
            let code = r.code();
            let spec_defined = matches!(
                code,
                -32700 | -32600 | -32602 | -32603 | -32020 | -32021 | -32022
            );
            assert!(
                spec_defined || (-32019..=-32000).contains(&code),
                "{s} uses {code}"
            );
        }
    }

    #[test]
    fn the_sets_follow_the_names() {
        for r in Reason::ALL {
            let s = r.as_str();
            // Every upstream_* reason is the upstream's failure (its own 4xx
            // included: `upstream_refused` once drifted out of a copy).
            assert_eq!(s.starts_with("upstream_"), r.is_upstream_failure(), "{s}");
            if s.starts_with("state_") {
                assert!(r.is_state_refusal(), "{s}");
            }
            let mut sets = r.sets().to_vec();
            sets.dedup();
            assert_eq!(sets.len(), r.sets().len(), "{s} lists a set twice");
        }
        assert!(Reason::UpstreamRefused.is_upstream_failure());
        assert!(!Reason::RateLimited.is_upstream_failure());
        assert!(Reason::SecretInAnswer.is_state_refusal());
        assert!(!Reason::InvalidRequest.is_state_refusal());
    }
}
