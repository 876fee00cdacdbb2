//! What a server asked the client for, reduced to what the gateway needs
//! to check the answer: sealed into the gateway's `requestState` (MRTR) or
//! into a pushed request's id (2025-11-25), read back on the answer.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TextFormat {
    Email,
    Uri,
    Date,
    DateTime,
}

/// The kind of one form field, with its constraints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum FieldKind {
    Text {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        min_len: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        max_len: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        format: Option<TextFormat>,
    },
    Number {
        integer: bool,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        min: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        max: Option<f64>,
    },
    Boolean,
    Choice {
        options: Vec<String>,
    },
    MultiChoice {
        options: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        min_items: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        max_items: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormField {
    pub name: String,
    pub required: bool,
    pub kind: FieldKind,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FormSchema {
    pub fields: Vec<FormField>,
}

/// What was asked under one input-request key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Asked {
    Form(FormSchema),
    Url { host: String },
    Sampling,
    Roots,
}

/// What kind of question an input request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// `elicitation/create`, form mode.
    Form,
    /// `elicitation/create`, URL mode.
    Url,
    /// `sampling/createMessage` (deprecated in 2026-07-28).
    Sampling,
    /// `roots/list` (deprecated in 2026-07-28).
    Roots,
    /// Any other method (the policy refuses it).
    Unknown,
}

/// One question as an upstream sent it, by names only: its key, its kind,
/// a form's field names, a URL's host. What the audit trail records of a
/// question before the policy touched it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestShape {
    pub key: String,
    pub kind: RequestKind,
    pub fields: Option<Vec<String>>,
    pub url_host: Option<String>,
}

impl RequestShape {
    /// From what the policy recorded as asked (after any stripping).
    pub fn of_asked(key: &str, asked: &Asked) -> RequestShape {
        let (kind, fields, url_host) = match asked {
            Asked::Form(form) => (
                RequestKind::Form,
                Some(form.fields.iter().map(|f| f.name.clone()).collect()),
                None,
            ),
            Asked::Url { host } => (RequestKind::Url, None, Some(host.clone())),
            Asked::Sampling => (RequestKind::Sampling, None, None),
            Asked::Roots => (RequestKind::Roots, None, None),
        };
        RequestShape {
            key: key.to_owned(),
            kind,
            fields,
            url_host,
        }
    }
}
