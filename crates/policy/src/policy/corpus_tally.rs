//! Tallies for the detection corpus tests (secret fields, injection):
//! caught / total per group, and the reports they print.

use std::collections::BTreeMap;

/// caught / total per group.
#[derive(Debug, Default)]
pub(crate) struct Tally(pub(crate) BTreeMap<String, (usize, usize)>);

impl Tally {
    pub(crate) fn add(&mut self, group: &str, hit: bool) {
        let e = self.0.entry(group.to_owned()).or_default();
        e.0 += usize::from(hit);
        e.1 += 1;
    }

    pub(crate) fn report(&self, title: &str) -> String {
        let mut out = format!("{title}\n");
        for (group, (hit, total)) in &self.0 {
            out += &format!("  {group:<30} {hit:>4} / {total:<4}\n");
        }
        out
    }

    /// The caught share of each group.
    pub(crate) fn shares(&self) -> impl Iterator<Item = f64> + '_ {
        self.0.values().map(|&(h, t)| h as f64 / t as f64)
    }

    pub(crate) fn worst_share(&self) -> f64 {
        self.shares().fold(1.0, f64::min)
    }

    pub(crate) fn highest_share(&self) -> f64 {
        self.shares().fold(0.0, f64::max)
    }
}
