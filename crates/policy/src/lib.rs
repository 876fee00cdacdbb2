//! The elicitation policy (ARCHITECTURE.md, "Crates"): policy files and presets, form
//! schemas, inspection, text safety and detection, over the leaf types of `portcullis-model`.
//! The module keeps its path (`policy::…`); the model crate's modules are named at the root so
//! that `crate::model` and `crate::json` resolve as they did in the single crate.

/// A file of the repository's `data/` folder (word lists, rules, corpora), compiled in.
macro_rules! data_file {
    ($path:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/", $path))
    };
}

pub mod policy;

#[allow(unused_imports)]
pub(crate) use portcullis_model::{json, model};
