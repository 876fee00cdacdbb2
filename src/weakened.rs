//! What the gateway says when a new config weakens a security control of
//! the running one (`config::weakened`): one warning per control, the
//! `portcullis_config_weakened_total` counter, a `config_weakened` audit
//! event; and, for `portcullis check --baseline`, the same list printed.

use crate::audit::{AuditEvent, AuditSink, GatewayAbout, Name, ReloadOutcome};
use crate::config::{weakened, GatewayConfig, SecurityControls, Weakened};
use crate::pipeline::record::Metrics;

/// The controls a refused reload would have weakened (its error's list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeakenedControls(pub Vec<Weakened>);

impl std::fmt::Display for WeakenedControls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.len();
        let s = if n == 1 { "" } else { "s" };
        write!(
            f,
            "the new config weakens {n} security control{s} and [reload] on_weakened = \"refuse\""
        )?;
        for w in &self.0 {
            write!(f, "; {w}")?;
        }
        Ok(())
    }
}

/// Log, count and audit each weakened control. `config`: the config that
/// names the scopes (the new one when applied, the running one when not).
pub fn report(
    weakened: &[Weakened],
    config: &GatewayConfig,
    metrics: &Metrics,
    audit: &AuditSink,
    outcome: ReloadOutcome,
) {
    let applied = match outcome {
        ReloadOutcome::Applied => "applied",
        ReloadOutcome::Refused => "refused",
    };
    for w in weakened {
        let upstream = w.scope.upstream_label(config);
        tracing::warn!(
            control = w.control,
            upstream = %upstream,
            route = w.scope.route().unwrap_or_default(),
            listener = w.scope.listener().unwrap_or_default(),
            from = %w.from,
            to = %w.to,
            reload = applied,
            "config reload weakens a security control"
        );
        metrics.config_weakened(&upstream, w.control);
        audit.emit_unbound(&about(w, config), event(w, outcome));
    }
}

fn about(w: &Weakened, config: &GatewayConfig) -> GatewayAbout {
    let Some(id) = w.scope.upstream() else {
        return GatewayAbout::default();
    };
    let known = config.upstreams.iter().find(|u| u.id == id);
    GatewayAbout {
        upstream_id: Some(id.to_owned()),
        upstream_name: known.map(|u| u.name.clone()).unwrap_or_default(),
        upstream_endpoint: known.map(|u| u.url.to_string()).unwrap_or_default(),
    }
}

fn event(w: &Weakened, outcome: ReloadOutcome) -> AuditEvent {
    AuditEvent::ConfigWeakened {
        control: Name::new(w.control),
        route: w.scope.route().map(Name::new),
        listener: w.scope.listener().map(Name::new),
        from: Name::new(&w.from),
        to: Name::new(&w.to),
        outcome,
    }
}

/// The controls `config` holds less strongly than `reviewed`.
pub fn against(reviewed: &GatewayConfig, config: &GatewayConfig) -> Vec<Weakened> {
    weakened(
        &SecurityControls::of(reviewed),
        &SecurityControls::of(config),
    )
}

/// `portcullis check --baseline`'s report: one line per weakened control
/// (`FILE: weakened: …` on stderr, or a JSON object each on stdout), then
/// the count.
pub fn print(found: &[Weakened], config: &GatewayConfig, baseline: &std::path::Path, json: bool) {
    let file = config.source.display();
    for w in found {
        match json {
            true => println!(
                "{}",
                serde_json::json!({
                    "level": "WARN",
                    "file": file.to_string(),
                    "baseline": baseline.display().to_string(),
                    "control": w.control,
                    "upstream": w.scope.upstream_label(config),
                    "route": w.scope.route(),
                    "listener": w.scope.listener(),
                    "from": w.from,
                    "to": w.to,
                    "message": "weakens a security control of the baseline",
                })
            ),
            false => eprintln!("{file}: weakened: {w}"),
        }
    }
    if !json {
        let n = found.len();
        match n {
            0 => println!("{file}: weakens nothing of {}", baseline.display()),
            _ => eprintln!(
                "{file}: {n} security control(s) weakened against {}",
                baseline.display()
            ),
        }
    }
}
