//! PLACEHOLDER until the intent detector lands (wt-detect): the interface only.

/// Where a listed string sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Name,
    Title,
    Description,
    PropertyName,
    SchemaText,
    SchemaValue,
    ArgumentName,
    ArgumentText,
    Instructions,
    ServerIdentity,
}

pub struct Listed<'a> {
    pub place: Place,
    pub text: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    ReadPrivateData,
    SendElsewhere,
    RedirectTools,
    HideFromUser,
    RunCommands,
    OverrideInstructions,
    SelfPromotion,
}

impl Intent {
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::ReadPrivateData => "read_private_data",
            Intent::SendElsewhere => "send_elsewhere",
            Intent::RedirectTools => "redirect_tools",
            Intent::HideFromUser => "hide_from_user",
            Intent::RunCommands => "run_commands",
            Intent::OverrideInstructions => "override_instructions",
            Intent::SelfPromotion => "self_promotion",
        }
    }
    pub fn works_against_user(self) -> bool {
        self != Intent::SelfPromotion
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub intent: Intent,
    pub cue: &'static str,
}

pub struct IntentDetector;

impl IntentDetector {
    pub fn builtin() -> &'static IntentDetector {
        static D: IntentDetector = IntentDetector;
        &D
    }
    pub fn judge_list(&self, items: &[Vec<Listed<'_>>], _own_names: &[&str]) -> Vec<Vec<Finding>> {
        items.iter().map(|_| Vec::new()).collect()
    }
}
