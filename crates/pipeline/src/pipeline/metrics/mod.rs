//! The metric families each phase counts into, registered once with the
//! gateway's registry (`record::Metrics` holds them). A leaf: it names no
//! phase, so the phases and the record both depend on it and never on each
//! other through it.

pub(crate) mod backend;
pub(crate) mod bridge;
pub(crate) mod credential;
pub(crate) mod federation;
pub(crate) mod heavy;
