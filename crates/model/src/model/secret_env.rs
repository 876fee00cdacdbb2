//! Secrets the gateway reads from its own environment (state keys, HMAC
//! secrets, client secrets, a stdio program's `env_from`): read once, then
//! gone from the environment, so no program the gateway starts and nothing
//! that reads `/proc/<pid>/environ` later finds them there.
//!
//! `/proc/<pid>/environ` shows the block the process was started with, not
//! what `unsetenv` leaves: the value's bytes in that block are overwritten
//! as well as the variable removed. What was read is kept here, so a config
//! reload reads the same value again; a variable set anew (by an embedder
//! between two loads) is read anew.

use std::collections::HashMap;
use std::ffi::{c_char, CStr, OsString};
use std::sync::{Mutex, OnceLock};

extern "C" {
    static mut environ: *mut *mut c_char;
}

fn taken() -> &'static Mutex<HashMap<String, OsString>> {
    static TAKEN: OnceLock<Mutex<HashMap<String, OsString>>> = OnceLock::new();
    TAKEN.get_or_init(Mutex::default)
}

/// The value of the variable `name`, taken out of the environment.
pub fn take(name: &str) -> Option<OsString> {
    let mut taken = taken()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(value) = std::env::var_os(name) {
        scrub(name);
        taken.insert(name.to_owned(), value);
    }
    taken.get(name).cloned()
}

/// The value's bytes overwritten where the environment holds them, then
/// the variable removed.
fn scrub(name: &str) {
    if name.is_empty() || name.contains(['=', '\0']) {
        return;
    }
    let prefix_len = name.len() + 1;
    // SAFETY: `environ` is the C library's NULL-terminated array of
    // NUL-terminated strings; each matching entry's value is overwritten
    // within its own length. Done while the config is read, before the
    // variable is removed by the standard library (which takes its lock).
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = CStr::from_ptr(*entry).to_bytes();
            if text.len() >= prefix_len
                && &text[..name.len()] == name.as_bytes()
                && text[name.len()] == b'='
            {
                let value_len = text.len() - prefix_len;
                std::ptr::write_bytes((*entry).add(prefix_len), 0, value_len);
            }
            entry = entry.add(1);
        }
    }
    std::env::remove_var(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_variable_is_gone_and_read_again_from_memory() {
        let name = "PORTCULLIS_SECRET_ENV_TEST";
        std::env::set_var(name, "s3cret-value");
        assert_eq!(
            take(name).as_deref(),
            Some(std::ffi::OsStr::new("s3cret-value"))
        );
        assert_eq!(std::env::var_os(name), None);
        assert_eq!(
            take(name).as_deref(),
            Some(std::ffi::OsStr::new("s3cret-value"))
        );
        std::env::set_var(name, "rotated");
        assert_eq!(take(name).as_deref(), Some(std::ffi::OsStr::new("rotated")));
        assert_eq!(take("PORTCULLIS_SECRET_ENV_NEVER_SET"), None);
    }
}
