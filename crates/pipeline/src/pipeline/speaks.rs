//! Which generations an upstream speaks: configured
//! (`[[upstream]] generations`), or learnt from what it answered (the
//! bridge's `server/discover`). A discovered upstream that speaks
//! 2025-11-25 is remembered for [`REMEMBERED`], so its sessions cost no
//! extra request. A leaf: the route holds it, the bridge reads and teaches it.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::model::Generation;

/// How long what was seen of an upstream's generations is trusted.
const REMEMBERED: Duration = Duration::from_secs(300);

/// What the gateway knows of the generations one upstream speaks: read on
/// every request of a generation not yet known, so it is two atomics.
pub(crate) struct Speaks {
    configured: Option<Vec<Generation>>,
    /// Set once known by an upstream that speaks exactly one generation
    /// (a stdio program's face).
    only: Option<Arc<OnceLock<Generation>>>,
    sessions: Seen,
    stateless: Seen,
}

/// Whether one generation was seen spoken, and when (milliseconds since
/// the process's first look).
#[derive(Default)]
struct Seen {
    /// 0: not seen; 1: spoken; 2: not spoken.
    state: AtomicU8,
    at_ms: AtomicU64,
}

fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let ms = START.get_or_init(Instant::now).elapsed().as_millis();
    u64::try_from(ms).unwrap_or(u64::MAX)
}

impl Seen {
    fn get(&self) -> Option<bool> {
        let state = self.state.load(Ordering::Acquire);
        let fresh = now_ms().saturating_sub(self.at_ms.load(Ordering::Acquire))
            < REMEMBERED.as_millis() as u64;
        match state {
            1 if fresh => Some(true),
            2 if fresh => Some(false),
            _ => None,
        }
    }

    fn set(&self, spoken: bool) {
        self.at_ms.store(now_ms(), Ordering::Release);
        self.state
            .store(if spoken { 1 } else { 2 }, Ordering::Release);
    }
}

impl Speaks {
    pub(crate) fn new(
        configured: Option<Vec<Generation>>,
        only: Option<Arc<OnceLock<Generation>>>,
    ) -> Speaks {
        Speaks {
            configured,
            only,
            sessions: Seen::default(),
            stateless: Seen::default(),
        }
    }

    /// Whether it speaks `generation`, when known without asking.
    pub(crate) fn speaks(&self, generation: Generation) -> Option<bool> {
        if let Some(only) = self.only.as_ref().and_then(|o| o.get()) {
            return Some(*only == generation);
        }
        if let Some(c) = &self.configured {
            return Some(c.contains(&generation));
        }
        self.seen(generation).get()
    }

    /// Whether it speaks 2025-11-25 sessions, when known without asking.
    pub(crate) fn sessions(&self) -> Option<bool> {
        self.speaks(Generation::Sessions)
    }

    /// Remember whether it was seen speaking `generation`.
    pub(crate) fn learn_that(&self, generation: Generation, spoken: bool) {
        if self.configured.is_none() {
            self.seen(generation).set(spoken);
        }
    }

    /// Remember whether it speaks 2025-11-25 sessions.
    pub(crate) fn learn(&self, sessions: bool) {
        self.learn_that(Generation::Sessions, sessions);
    }

    fn seen(&self, generation: Generation) -> &Seen {
        match generation {
            Generation::Sessions => &self.sessions,
            Generation::Stateless => &self.stateless,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_generations_decide_and_discovery_is_remembered() {
        let only = Speaks::new(Some(vec![Generation::Stateless]), None);
        assert_eq!(only.sessions(), Some(false));
        assert_eq!(only.speaks(Generation::Stateless), Some(true));
        only.learn(true);
        assert_eq!(only.sessions(), Some(false));
        let auto = Speaks::new(None, None);
        assert_eq!(auto.sessions(), None);
        auto.learn(true);
        assert_eq!(auto.sessions(), Some(true));
        assert_eq!(auto.speaks(Generation::Stateless), None);
        auto.learn_that(Generation::Stateless, false);
        assert_eq!(auto.speaks(Generation::Stateless), Some(false));
        auto.learn_that(Generation::Stateless, true);
        assert_eq!(auto.speaks(Generation::Stateless), Some(true));
    }
}
