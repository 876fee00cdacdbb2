//! `[reload]`: what a reload does with a config that weakens a security
//! control of the running one (`controls`).

use serde::Deserialize;
use toml::Spanned;

use super::locate::Locator;
use crate::model::ConfigError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReload {
    pub(crate) on_weakened: Option<Spanned<String>>,
}

/// `[reload] on_weakened`: a reload whose config weakens a control of the
/// running one. Either way each weakened control is logged, counted and
/// written to the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnWeakened {
    /// The new config is swapped in.
    #[default]
    Apply,
    /// The running config stays; the reload fails with the list of
    /// weakened controls. A restart loads the file as it is.
    Refuse,
}

impl OnWeakened {
    const ALL: [OnWeakened; 2] = [OnWeakened::Apply, OnWeakened::Refuse];

    pub const fn as_str(self) -> &'static str {
        match self {
            OnWeakened::Apply => "apply",
            OnWeakened::Refuse => "refuse",
        }
    }
}

pub(super) fn on_weakened(raw: &RawReload, loc: &Locator<'_>) -> Result<OnWeakened, ConfigError> {
    let Some(written) = &raw.on_weakened else {
        return Ok(OnWeakened::default());
    };
    OnWeakened::ALL
        .into_iter()
        .find(|o| o.as_str() == written.get_ref())
        .ok_or_else(|| {
            loc.at(
                written.span(),
                "reload.on_weakened",
                format!(
                    "\"{}\" is not one of \"apply\", \"refuse\"",
                    written.get_ref()
                ),
            )
        })
}
