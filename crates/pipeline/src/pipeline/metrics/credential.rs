//! What obtaining the gateway's own upstream credential fails at, counted.

use prometheus::{IntCounterVec, Opts};

use portcullis_dataplane::described::Described;

/// `portcullis_upstream_credential_failures_total`.
pub(crate) struct CredentialMetrics {
    failures: IntCounterVec,
}

impl CredentialMetrics {
    pub(crate) fn new(registry: &Described) -> prometheus::Result<CredentialMetrics> {
        let failures = IntCounterVec::new(
            Opts::new(
                "portcullis_upstream_credential_failures_total",
                "Requests the gateway could not obtain its own credential for ([upstream.credential]), by upstream and kind (refused: the token endpoint said no; unreachable; bad_answer; no_subject_token: token exchange for a caller without an OAuth token)",
            ),
            &["upstream", "kind"],
        )?;
        registry.register(Box::new(failures.clone()))?;
        Ok(CredentialMetrics { failures })
    }

    pub(crate) fn failed(&self, upstream: &str, kind: &'static str) {
        self.failures.with_label_values(&[upstream, kind]).inc();
    }
}
