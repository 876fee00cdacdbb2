//! What the gateway says to OAuth authorization servers, on either side:
//! their metadata (RFC 8414 / OpenID Connect discovery), and form posts to
//! their token and introspection endpoints with client authentication.
//! `identify` uses it to verify callers' tokens, `credential` to obtain the
//! gateway's own tokens for upstreams.

mod http;
mod metadata;

pub use self::http::{check_endpoint, shown, ClientSecret, Endpoint, OAuthHttp, OAuthHttpError};
pub use metadata::{discover, IssuerMetadata};
