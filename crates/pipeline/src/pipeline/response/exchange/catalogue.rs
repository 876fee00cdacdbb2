//! What the policy's result rules ask of the definitions the gateway
//! delivered to this caller from this upstream (`listings::delivered`):
//! whether a tool a result names was listed (`policy::inspect::redirect`),
//! and whether the tool called was listed as a secret store
//! (`policy::arguments::secret_store`). Answered from the catalogue as it
//! is: nothing is fetched while a response is read.

use super::Exchange;
use crate::listings::delivered::Found;
use crate::listings::ItemKind;
use crate::model::McpMethod;
use crate::policy::inspect::Catalogue;

impl Exchange {
    fn delivered_tool(&self, name: &str) -> Found {
        let Some(kind) = ItemKind::of_kind("tool") else {
            return Found::Unknown { fetch: false };
        };
        let upstream = self.ctx.route.upstream.settings.id.as_str();
        let caller = self.ctx.binding().principal_key();
        self.ctx
            .gateway
            .listings
            .delivered
            .find(upstream, &caller, kind, name)
    }
}

impl Catalogue for Exchange {
    fn lists_tool(&self, tool: &str) -> Option<bool> {
        match self.delivered_tool(tool) {
            Found::Listed(_) => Some(true),
            Found::NotListed => Some(false),
            Found::Unknown { .. } => None,
        }
    }

    fn answers_from_secret_store(&self) -> bool {
        if self.ctx.request.method != McpMethod::ToolsCall {
            return false;
        }
        let Some(tool) = self.ctx.request.target.as_deref() else {
            return false;
        };
        matches!(self.delivered_tool(tool), Found::Listed(c) if c.returns_secrets())
    }
}
