//! `portcullis approval-token --config FILE`: a token the operator pastes
//! into the approval page's sign-in form to sign in as the operator (who
//! may decide any approval), made with the `[state]` keys of the config —
//! as `portcullis listings` signs with them — and good for five minutes.
//! The keys never leave this host; the token opens nothing else.

use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn run(config: &Path) -> ExitCode {
    let keys = match crate::listings_command::keys_of(config) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    match crate::admin::operator_sign_in_token(&keys, now_ms) {
        Some(token) => {
            println!("{token}");
            eprintln!(
                "paste it into the approval page's sign-in form within {} s",
                crate::admin::OPERATOR_TOKEN_LIFETIME.as_secs()
            );
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("error: the [state] keys cannot seal a token");
            ExitCode::FAILURE
        }
    }
}
