//! The pins of one instance, in memory: per upstream, field → pinned
//! digest, field → held digest and field → held text (bounded), at most
//! [`MAX_ITEMS_PER_UPSTREAM`](super::MAX_ITEMS_PER_UPSTREAM) pins each.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{
    Change, Digests, Seen, Selector, MAX_HELD_TEXTS_BYTES, MAX_HELD_TEXT_BYTES,
    MAX_ITEMS_PER_UPSTREAM,
};

#[derive(Default)]
struct Pins {
    pinned: HashMap<String, String>,
    held: HashMap<String, String>,
    texts: HashMap<String, String>,
    text_bytes: usize,
}

#[derive(Default)]
pub(crate) struct Memory {
    upstreams: Mutex<HashMap<String, Pins>>,
}

impl Memory {
    fn with<T>(&self, upstream: &str, f: impl FnOnce(&mut Pins) -> T) -> T {
        // A panic while holding the lock leaves plain maps behind: usable.
        let mut map = self
            .upstreams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !map.contains_key(upstream) {
            map.insert(upstream.to_owned(), Pins::default());
        }
        match map.get_mut(upstream) {
            Some(pins) => f(pins),
            None => f(&mut Pins::default()),
        }
    }

    pub(crate) fn observe(&self, upstream: &str, items: &[Seen], hold: bool) -> Vec<Change> {
        self.with(upstream, |pins| {
            items.iter().map(|seen| pins.observe(seen, hold)).collect()
        })
    }

    pub(crate) fn is_held(&self, upstream: &str, field: &str) -> bool {
        self.with(upstream, |pins| pins.held.contains_key(field))
    }

    pub(crate) fn entries(&self, upstream: &str) -> (Digests, Digests) {
        self.with(upstream, |pins| {
            let copy = |m: &HashMap<String, String>| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Vec<_>>()
            };
            (copy(&pins.pinned), copy(&pins.held))
        })
    }

    /// Pinned, held and the held texts.
    pub(crate) fn held(&self, upstream: &str) -> (Digests, Digests, Digests) {
        self.with(upstream, |pins| {
            let copy = |m: &HashMap<String, String>| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Vec<_>>()
            };
            (copy(&pins.pinned), copy(&pins.held), copy(&pins.texts))
        })
    }

    pub(crate) fn accept(&self, upstream: &str, which: &Selector) -> Vec<String> {
        self.with(upstream, |pins| {
            let chosen: Vec<String> = pins
                .held
                .iter()
                .filter(|(f, d)| which.matches(f, d))
                .map(|(f, _)| f.clone())
                .collect();
            for field in &chosen {
                if let Some(d) = pins.held.remove(field) {
                    pins.pinned.insert(field.clone(), d);
                }
                pins.forget_text(field);
            }
            chosen
        })
    }
}

impl Pins {
    fn forget_text(&mut self, field: &str) {
        if let Some(old) = self.texts.remove(field) {
            self.text_bytes -= old.len();
        }
    }

    /// Keep `text` as the held definition of `field`, within the bounds.
    fn keep_text(&mut self, field: &str, text: &str) {
        self.forget_text(field);
        if text.len() <= MAX_HELD_TEXT_BYTES && self.text_bytes + text.len() <= MAX_HELD_TEXTS_BYTES
        {
            self.text_bytes += text.len();
            self.texts.insert(field.to_owned(), text.to_owned());
        }
    }

    fn observe(&mut self, seen: &Seen, hold: bool) -> Change {
        let Some(pin) = self.pinned.get(&seen.field) else {
            if self.pinned.len() >= MAX_ITEMS_PER_UPSTREAM {
                return Change::Unpinned;
            }
            self.pinned.insert(seen.field.clone(), seen.digest.clone());
            return Change::Pinned;
        };
        if *pin == seen.digest {
            self.held.remove(&seen.field);
            self.forget_text(&seen.field);
            return Change::Same;
        }
        if !hold {
            self.pinned.insert(seen.field.clone(), seen.digest.clone());
            self.held.remove(&seen.field);
            self.forget_text(&seen.field);
            return Change::Repinned;
        }
        match self.held.insert(seen.field.clone(), seen.digest.clone()) {
            Some(before) if before == seen.digest => Change::Held { first: false },
            _ => {
                self.keep_text(&seen.field, &seen.text);
                Change::Held { first: true }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(field: &str, digest: &str) -> Seen {
        Seen {
            field: field.into(),
            digest: digest.into(),
            text: format!("{{\"v\":\"{digest}\"}}"),
        }
    }

    fn all(m: &Memory, upstream: &str) -> Selector {
        Selector::Digests(m.entries(upstream).1.into_iter().collect())
    }

    #[test]
    fn first_seen_is_pinned_then_a_change_is_held_until_accepted() {
        let m = Memory::default();
        assert_eq!(
            m.observe("a", &[seen("tool:add", "1")], true),
            [Change::Pinned]
        );
        assert_eq!(
            m.observe("a", &[seen("tool:add", "1")], true),
            [Change::Same]
        );
        let changed = [seen("tool:add", "2")];
        assert_eq!(
            m.observe("a", &changed, true),
            [Change::Held { first: true }]
        );
        assert_eq!(
            m.observe("a", &changed, true),
            [Change::Held { first: false }]
        );
        assert!(m.is_held("a", "tool:add"));
        // Another upstream's pins are its own.
        assert!(!m.is_held("b", "tool:add"));
        assert_eq!(m.observe("b", &changed, true), [Change::Pinned]);
        let other = Selector::Item {
            name: "sub".into(),
            kind: None,
            digest: "2".into(),
        };
        assert!(m.accept("a", &other).is_empty());
        assert_eq!(
            m.held("a").2,
            [("tool:add".to_owned(), "{\"v\":\"2\"}".to_owned())]
        );
        // An acceptance of a definition no longer held pins nothing.
        let stale = Selector::Item {
            name: "add".into(),
            kind: None,
            digest: "1".into(),
        };
        assert!(m.accept("a", &stale).is_empty());
        assert_eq!(m.accept("a", &all(&m, "a")), ["tool:add"]);
        assert!(m.held("a").2.is_empty(), "an accepted text is forgotten");
        assert!(!m.is_held("a", "tool:add"));
        assert_eq!(m.observe("a", &changed, true), [Change::Same]);
    }

    #[test]
    fn allow_repins_and_a_return_to_the_pin_releases_the_hold() {
        let m = Memory::default();
        m.observe("a", &[seen("prompt:p", "1")], true);
        assert_eq!(
            m.observe("a", &[seen("prompt:p", "2")], false),
            [Change::Repinned]
        );
        assert_eq!(
            m.observe("a", &[seen("prompt:p", "2")], true),
            [Change::Same]
        );
        assert_eq!(
            m.observe("a", &[seen("prompt:p", "3")], true),
            [Change::Held { first: true }]
        );
        assert_eq!(
            m.observe("a", &[seen("prompt:p", "2")], true),
            [Change::Same]
        );
        assert!(!m.is_held("a", "prompt:p"));
    }

    #[test]
    fn the_pins_are_bounded_per_upstream_and_never_evicted() {
        let m = Memory::default();
        let many: Vec<Seen> = (0..MAX_ITEMS_PER_UPSTREAM)
            .map(|i| seen(&format!("tool:t{i}"), "d"))
            .collect();
        assert!(m
            .observe("a", &many, true)
            .iter()
            .all(|c| *c == Change::Pinned));
        assert_eq!(
            m.observe("a", &[seen("tool:new", "d")], true),
            [Change::Unpinned]
        );
        assert_eq!(
            m.observe("a", &[seen("tool:t0", "x")], true),
            [Change::Held { first: true }]
        );
        assert_eq!(
            m.observe("b", &[seen("tool:new", "d")], true),
            [Change::Pinned]
        );
    }
}
