//! Shared helpers of the sanitizer's unit tests.

use super::*;

pub(super) const STRIP: TextPolicy = TextPolicy {
    html: HtmlMode::Strip,
    max_chars: 10_000,
};
pub(super) const SAFE: TextPolicy = TextPolicy {
    html: HtmlMode::SafeSubset,
    max_chars: 10_000,
};

pub(super) fn strip(s: &str) -> String {
    STRIP.sanitize(s).text.into_owned()
}
pub(super) fn safe(s: &str) -> String {
    SAFE.sanitize(s).text.into_owned()
}
pub(super) fn findings(p: TextPolicy, s: &str) -> Vec<TextFinding> {
    p.sanitize(s).findings
}
pub(super) fn assert_stable(p: TextPolicy, s: &str) {
    let once = p.sanitize(s).text.into_owned();
    let twice = p.sanitize(&once);
    assert!(
        !twice.is_changed(),
        "not idempotent for {s:?}: {once:?} -> {:?}",
        twice.text
    );
}
