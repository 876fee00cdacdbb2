//! JSON the gateway reads and writes: strict parsing (no member twice, no
//! lone surrogate, bounded depth, errors as types that never quote the
//! input), the JSON-RPC envelope, and error bodies.

mod depth;
mod error;
mod error_body;
mod message;
mod reading;
pub mod strict;

pub use error::JsonError;
pub use error_body::{error_answer, error_body, null_id};
pub use message::{same_id, span_in, Message, MessageError, MessageKind};
pub use reading::Read;
pub use strict::{parse_value, validate};

/// The deepest nesting accepted anywhere (serde_json's own limit is one more).
pub(crate) const MAX_DEPTH: usize = 127;
