//! Who may call, how often, and what (ARCHITECTURE.md, "Crates"): `identify` (API keys, JWT
//! with JWKS refresh, mTLS), `throttle` (GCRA limits, local or Redis), `permit` (allow/deny
//! rules) and `tls` (rustls configs from PEM files), over `portcullis-model`.

pub mod credential;
pub mod identify;
pub mod oauth;
pub mod permit;
pub mod pins;
pub mod throttle;
pub mod tls;

pub(crate) use portcullis_model::model;
