//! A Prometheus registry that remembers every family registered in it, those without a
//! series yet included (which a scrape does not show): README's metrics table lists each.

use std::sync::{Mutex, PoisonError};

use prometheus::core::Collector;
use prometheus::Registry;

/// One metric family as registered: the book's table (`docs/src/reference/metrics.md`) lists each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub labels: Vec<String>,
}

/// The registry, and every family registered in it, those without a series
/// yet included (which a scrape does not show).
pub struct Described {
    registry: Registry,
    families: Mutex<Vec<Family>>,
}

impl Default for Described {
    fn default() -> Described {
        Described::new()
    }
}

impl Described {
    pub fn new() -> Described {
        Described {
            registry: Registry::new(),
            families: Mutex::new(Vec::new()),
        }
    }

    pub fn register(&self, c: Box<dyn Collector>) -> Result<(), prometheus::Error> {
        let families: Vec<Family> = c
            .desc()
            .iter()
            .map(|d| Family {
                name: d.fq_name.clone(),
                help: d.help.clone(),
                labels: d.variable_labels.clone(),
            })
            .collect();
        self.registry.register(c)?;
        self.families
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(families);
        Ok(())
    }
}

impl Described {
    /// The registry itself, for a scrape.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Every family registered, in the order they were.
    pub fn families(&self) -> Vec<Family> {
        self.families
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
