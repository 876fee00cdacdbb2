//! Globs that name principals in rules (`principals` of a permission rule,
//! `approvers` of an approval rule): `alice` names an `alice` of any auth
//! scheme; `keys:alice` names the `alice` of the scheme `keys` only.
//!
//! A pattern is read as scheme-qualified only when the part before its
//! first `:` is the name of a configured scheme; any other pattern is a
//! glob over the principal's name as it is. So a name that holds a colon
//! itself (a SPIFFE ID, an issuer's `sub` such as `user:bob`) is named as
//! written, and a principal of one scheme whose name happens to read
//! `keys:alice` is never the `alice` of the scheme `keys`.

use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::Principal;

/// A list of principal globs, each matched over the name, and those
/// qualified by a scheme only for principals of that scheme.
#[derive(Debug, Clone)]
pub struct PrincipalGlobs {
    set: GlobSet,
    /// Per glob of `set`, in order: the scheme it is qualified by.
    scheme_of: Vec<Option<Arc<str>>>,
    /// Some glob is qualified (else a match needs no per-glob look).
    qualified: bool,
}

impl PrincipalGlobs {
    /// `patterns` as written; `schemes`: the names of the config's auth
    /// schemes (what a `scheme:` prefix may name).
    pub fn new(patterns: &[&str], schemes: &[&str]) -> Result<Self, globset::Error> {
        let mut b = GlobSetBuilder::new();
        let mut scheme_of = Vec::with_capacity(patterns.len());
        for p in patterns {
            let (scheme, name) = match p.split_once(':') {
                Some((s, rest)) if schemes.contains(&s) => (Some(Arc::from(s)), rest),
                _ => (None, *p),
            };
            b.add(Glob::new(name)?);
            scheme_of.push(scheme);
        }
        Ok(PrincipalGlobs {
            set: b.build()?,
            qualified: scheme_of.iter().any(Option::is_some),
            scheme_of,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Whether one of the globs names `who`.
    pub fn names(&self, who: &Principal) -> bool {
        if !self.qualified {
            return self.set.is_match(&*who.name);
        }
        self.set
            .matches(&*who.name)
            .into_iter()
            .any(|i| match &self.scheme_of[i] {
                None => true,
                Some(scheme) => *scheme == who.scheme,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(scheme: &str, name: &str) -> Principal {
        Principal {
            name: Arc::from(name),
            groups: Arc::from(Vec::<String>::new()),
            method: super::super::AuthMethod::ApiKey,
            scheme: Arc::from(scheme),
            grant: None,
        }
    }

    #[test]
    fn a_bare_glob_names_any_scheme_and_a_qualified_one_its_own() {
        let g = PrincipalGlobs::new(&["alice", "keys:ops-*"], &["keys", "partner"]).unwrap();
        assert!(g.names(&of("keys", "alice")) && g.names(&of("partner", "alice")));
        assert!(g.names(&of("keys", "ops-1")));
        assert!(
            !g.names(&of("partner", "ops-1")),
            "qualified by another scheme"
        );
        assert!(!g.names(&of("keys", "bob")));
    }

    #[test]
    fn a_colon_in_a_name_is_not_a_scheme() {
        let g =
            PrincipalGlobs::new(&["keys:alice", "spiffe://corp/*"], &["keys", "partner"]).unwrap();
        // Another scheme's principal whose name reads like the qualified glob.
        assert!(!g.names(&of("partner", "keys:alice")));
        assert!(g.names(&of("keys", "alice")));
        // No scheme is called `spiffe`: the glob is over the name as written.
        assert!(g.names(&of("mtls", "spiffe://corp/agent")));
        // A glob over names never reaches into the scheme.
        let prefix = PrincipalGlobs::new(&["adm*"], &["admins"]).unwrap();
        assert!(!prefix.names(&of("admins", "eve")));
    }
}
