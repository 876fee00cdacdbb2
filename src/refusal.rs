//! Every way the gateway can refuse a message, with its stable reason string,
//! JSON-RPC error code and HTTP status. The reason strings are a public contract
//! (dashboards, alerts and client code match on them): add new ones, never rename.

use std::fmt;

use http::StatusCode;

/// Stable, documented refusal reasons. `as_str` is what goes into `data.reason`
/// and into the `outcome` label of the request metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    RouteNotFound,
    MethodNotAllowed,
    UnsupportedMediaType,
    OriginNotAllowed,
    BodyTooLarge,
    RequestTimeout,
    InvalidJson,
    BatchNotSupported,
    InvalidRequest,
    HeaderMissing,
    HeaderMismatch,
    UnsupportedProtocolVersion,
    UpstreamUnreachable,
    UpstreamTimeout,
    UpstreamBadResponse,
    UpstreamConnectionClosed,
    UpstreamResponseTooLarge,
    UpstreamProtocolViolation,
    ShuttingDown,
    InputRequiredNotAllowed,
    InvalidInputRequired,
    DuplicateMember,
    UnknownInputRequestMethod,
    SchemaNotAllowed,
    LimitExceeded,
    SecretFieldRequested,
    UnsafeOptionValue,
    UrlModeNotAllowed,
    UrlNotAllowed,
    DeprecatedRequestKind,
    SamplingContextNotAllowed,
    PromptInjection,
    MissingClientCapability,
    StateMissing,
    StateTooLarge,
    StateInvalid,
    StateUnknownKey,
    StateExpired,
    StatePrincipalMismatch,
    StateUpstreamMismatch,
    StateTargetMismatch,
    StateArgumentsMismatch,
    StateReplayed,
    StateStoreUnavailable,
    InvalidAnswer,
    SecretInAnswer,
    RoundLimitExceeded,
    OperationExpired,
    AnswerLimitExceeded,
    AuthenticationRequired,
    InvalidCredentials,
    RateLimited,
    RateLimiterUnavailable,
    ToolNotPermitted,
}

impl Reason {
    pub const ALL: [Reason; 54] = [
        Reason::RouteNotFound,
        Reason::MethodNotAllowed,
        Reason::UnsupportedMediaType,
        Reason::OriginNotAllowed,
        Reason::BodyTooLarge,
        Reason::RequestTimeout,
        Reason::InvalidJson,
        Reason::BatchNotSupported,
        Reason::InvalidRequest,
        Reason::HeaderMissing,
        Reason::HeaderMismatch,
        Reason::UnsupportedProtocolVersion,
        Reason::UpstreamUnreachable,
        Reason::UpstreamTimeout,
        Reason::UpstreamBadResponse,
        Reason::UpstreamConnectionClosed,
        Reason::UpstreamResponseTooLarge,
        Reason::UpstreamProtocolViolation,
        Reason::ShuttingDown,
        Reason::InputRequiredNotAllowed,
        Reason::InvalidInputRequired,
        Reason::DuplicateMember,
        Reason::UnknownInputRequestMethod,
        Reason::SchemaNotAllowed,
        Reason::LimitExceeded,
        Reason::SecretFieldRequested,
        Reason::UnsafeOptionValue,
        Reason::UrlModeNotAllowed,
        Reason::UrlNotAllowed,
        Reason::DeprecatedRequestKind,
        Reason::SamplingContextNotAllowed,
        Reason::PromptInjection,
        Reason::MissingClientCapability,
        Reason::StateMissing,
        Reason::StateTooLarge,
        Reason::StateInvalid,
        Reason::StateUnknownKey,
        Reason::StateExpired,
        Reason::StatePrincipalMismatch,
        Reason::StateUpstreamMismatch,
        Reason::StateTargetMismatch,
        Reason::StateArgumentsMismatch,
        Reason::StateReplayed,
        Reason::StateStoreUnavailable,
        Reason::InvalidAnswer,
        Reason::SecretInAnswer,
        Reason::RoundLimitExceeded,
        Reason::OperationExpired,
        Reason::AnswerLimitExceeded,
        Reason::AuthenticationRequired,
        Reason::InvalidCredentials,
        Reason::RateLimited,
        Reason::RateLimiterUnavailable,
        Reason::ToolNotPermitted,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::RouteNotFound => "route_not_found",
            Reason::MethodNotAllowed => "method_not_allowed",
            Reason::UnsupportedMediaType => "unsupported_media_type",
            Reason::OriginNotAllowed => "origin_not_allowed",
            Reason::BodyTooLarge => "body_too_large",
            Reason::RequestTimeout => "request_timeout",
            Reason::InvalidJson => "invalid_json",
            Reason::BatchNotSupported => "batch_not_supported",
            Reason::InvalidRequest => "invalid_request",
            Reason::HeaderMissing => "header_missing",
            Reason::HeaderMismatch => "header_mismatch",
            Reason::UnsupportedProtocolVersion => "unsupported_protocol_version",
            Reason::UpstreamUnreachable => "upstream_unreachable",
            Reason::UpstreamTimeout => "upstream_timeout",
            Reason::UpstreamBadResponse => "upstream_bad_response",
            Reason::UpstreamConnectionClosed => "upstream_connection_closed",
            Reason::UpstreamResponseTooLarge => "upstream_response_too_large",
            Reason::UpstreamProtocolViolation => "upstream_protocol_violation",
            Reason::ShuttingDown => "shutting_down",
            Reason::InputRequiredNotAllowed => "input_required_not_allowed",
            Reason::InvalidInputRequired => "invalid_input_required",
            Reason::DuplicateMember => "duplicate_member",
            Reason::UnknownInputRequestMethod => "unknown_input_request_method",
            Reason::SchemaNotAllowed => "schema_not_allowed",
            Reason::LimitExceeded => "limit_exceeded",
            Reason::SecretFieldRequested => "secret_field_requested",
            Reason::UnsafeOptionValue => "unsafe_option_value",
            Reason::UrlModeNotAllowed => "url_mode_not_allowed",
            Reason::UrlNotAllowed => "url_not_allowed",
            Reason::DeprecatedRequestKind => "deprecated_request_kind",
            Reason::SamplingContextNotAllowed => "sampling_context_not_allowed",
            Reason::PromptInjection => "prompt_injection",
            Reason::MissingClientCapability => "missing_client_capability",
            Reason::StateMissing => "state_missing",
            Reason::StateTooLarge => "state_too_large",
            Reason::StateInvalid => "state_invalid",
            Reason::StateUnknownKey => "state_unknown_key",
            Reason::StateExpired => "state_expired",
            Reason::StatePrincipalMismatch => "state_principal_mismatch",
            Reason::StateUpstreamMismatch => "state_upstream_mismatch",
            Reason::StateTargetMismatch => "state_target_mismatch",
            Reason::StateArgumentsMismatch => "state_arguments_mismatch",
            Reason::StateReplayed => "state_replayed",
            Reason::StateStoreUnavailable => "state_store_unavailable",
            Reason::InvalidAnswer => "invalid_answer",
            Reason::SecretInAnswer => "secret_in_answer",
            Reason::RoundLimitExceeded => "round_limit_exceeded",
            Reason::OperationExpired => "operation_expired",
            Reason::AnswerLimitExceeded => "answer_limit_exceeded",
            Reason::AuthenticationRequired => "authentication_required",
            Reason::InvalidCredentials => "invalid_credentials",
            Reason::RateLimited => "rate_limited",
            Reason::RateLimiterUnavailable => "rate_limiter_unavailable",
            Reason::ToolNotPermitted => "tool_not_permitted",
        }
    }

    /// JSON-RPC error code. Codes the MCP spec defines are used where they fit;
    /// the gateway's own refusals use -32000..-32019, which the spec leaves to
    /// implementations (it reserves -32020..-32099 for itself).
    pub const fn code(self) -> i64 {
        match self {
            Reason::InvalidJson => -32700,
            Reason::BatchNotSupported
            | Reason::InvalidRequest
            | Reason::MethodNotAllowed
            | Reason::UnsupportedMediaType => -32600,
            Reason::HeaderMissing | Reason::HeaderMismatch => -32020,
            Reason::UnsupportedProtocolVersion => -32022,
            Reason::UpstreamUnreachable
            | Reason::UpstreamTimeout
            | Reason::UpstreamBadResponse
            | Reason::UpstreamConnectionClosed
            | Reason::UpstreamResponseTooLarge
            | Reason::UpstreamProtocolViolation => -32001,
            Reason::RouteNotFound => -32002,
            Reason::OriginNotAllowed => -32003,
            Reason::BodyTooLarge => -32004,
            Reason::RequestTimeout => -32005,
            Reason::ShuttingDown => -32006,
            Reason::MissingClientCapability => -32021,
            Reason::StateMissing => -32602,
            Reason::StateTooLarge => -32602,
            Reason::StateInvalid => -32602,
            Reason::StateUnknownKey => -32602,
            Reason::StateExpired => -32602,
            Reason::StatePrincipalMismatch => -32602,
            Reason::StateUpstreamMismatch => -32602,
            Reason::StateTargetMismatch => -32602,
            Reason::StateArgumentsMismatch => -32602,
            Reason::StateReplayed => -32602,
            Reason::StateStoreUnavailable => -32007,
            Reason::InvalidAnswer => -32602,
            Reason::SecretInAnswer => -32602,
            Reason::RoundLimitExceeded => -32011,
            Reason::OperationExpired => -32011,
            Reason::AnswerLimitExceeded => -32011,
            Reason::AuthenticationRequired => -32008,
            Reason::InvalidCredentials => -32008,
            Reason::RateLimited => -32009,
            Reason::RateLimiterUnavailable => -32009,
            Reason::ToolNotPermitted => -32012,

            // Every elicitation-policy refusal shares one code; data.reason tells them apart.
            Reason::InputRequiredNotAllowed
            | Reason::InvalidInputRequired
            | Reason::DuplicateMember
            | Reason::UnknownInputRequestMethod
            | Reason::SchemaNotAllowed
            | Reason::LimitExceeded
            | Reason::SecretFieldRequested
            | Reason::UnsafeOptionValue
            | Reason::UrlModeNotAllowed
            | Reason::UrlNotAllowed
            | Reason::DeprecatedRequestKind
            | Reason::SamplingContextNotAllowed
            | Reason::PromptInjection => -32010,
        }
    }

    pub const fn status(self) -> StatusCode {
        match self {
            Reason::RouteNotFound => StatusCode::NOT_FOUND,
            Reason::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Reason::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Reason::OriginNotAllowed => StatusCode::FORBIDDEN,
            Reason::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Reason::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Reason::InvalidJson
            | Reason::BatchNotSupported
            | Reason::InvalidRequest
            | Reason::HeaderMissing
            | Reason::HeaderMismatch
            | Reason::UnsupportedProtocolVersion => StatusCode::BAD_REQUEST,
            Reason::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Reason::UpstreamUnreachable
            | Reason::UpstreamBadResponse
            | Reason::UpstreamConnectionClosed
            | Reason::UpstreamResponseTooLarge
            | Reason::UpstreamProtocolViolation => StatusCode::BAD_GATEWAY,
            Reason::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            // The spec: -32021 is answered with 400.
            Reason::MissingClientCapability => StatusCode::BAD_REQUEST,
            Reason::StateMissing => StatusCode::BAD_REQUEST,
            Reason::StateTooLarge => StatusCode::BAD_REQUEST,
            Reason::StateInvalid => StatusCode::BAD_REQUEST,
            Reason::StateUnknownKey => StatusCode::BAD_REQUEST,
            Reason::StateExpired => StatusCode::BAD_REQUEST,
            Reason::StatePrincipalMismatch => StatusCode::BAD_REQUEST,
            Reason::StateUpstreamMismatch => StatusCode::BAD_REQUEST,
            Reason::StateTargetMismatch => StatusCode::BAD_REQUEST,
            Reason::StateArgumentsMismatch => StatusCode::BAD_REQUEST,
            Reason::StateReplayed => StatusCode::BAD_REQUEST,
            Reason::StateStoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Reason::InvalidAnswer => StatusCode::BAD_REQUEST,
            Reason::SecretInAnswer => StatusCode::BAD_REQUEST,
            Reason::RoundLimitExceeded => StatusCode::OK,
            Reason::OperationExpired => StatusCode::OK,
            Reason::AnswerLimitExceeded => StatusCode::OK,
            Reason::AuthenticationRequired => StatusCode::UNAUTHORIZED,
            Reason::InvalidCredentials => StatusCode::UNAUTHORIZED,
            Reason::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Reason::RateLimiterUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Reason::ToolNotPermitted => StatusCode::FORBIDDEN,

            // A policy refusal answers a request the upstream did handle; it
            // travels as a JSON-RPC error at 200 so that every client shows
            // its message (SDKs turn 5xx into bare transport errors).
            Reason::InputRequiredNotAllowed
            | Reason::InvalidInputRequired
            | Reason::DuplicateMember
            | Reason::UnknownInputRequestMethod
            | Reason::SchemaNotAllowed
            | Reason::LimitExceeded
            | Reason::SecretFieldRequested
            | Reason::UnsafeOptionValue
            | Reason::UrlModeNotAllowed
            | Reason::UrlNotAllowed
            | Reason::DeprecatedRequestKind
            | Reason::SamplingContextNotAllowed
            | Reason::PromptInjection => StatusCode::OK,
        }
    }
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
}

impl Refusal {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Refusal {
            reason,
            message: message.into(),
            extra: None,
        }
    }

    pub fn with_data(mut self, key: &str, value: serde_json::Value) -> Self {
        self.extra
            .get_or_insert_with(Default::default)
            .insert(key.to_owned(), value);
        self
    }
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
            let code = r.code();
            let spec_defined = matches!(code, -32700 | -32600 | -32602 | -32020 | -32021 | -32022);
            assert!(
                spec_defined || (-32019..=-32000).contains(&code),
                "{s} uses {code}"
            );
        }
    }
}
