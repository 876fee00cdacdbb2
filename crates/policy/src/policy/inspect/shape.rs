//! Rule: protocol validity of an `input_required` result's shape. Its
//! `requestState` is a string within the limit; `inputRequests` is an object
//! of `{method, params}` under printable keys; at least one of the two.

use serde_json::{Map, Value};

use super::Rule;
use super::{Checked, Run};
use crate::model::{McpMethod, RequestKind, RequestShape};

impl Run<'_> {
    pub(super) fn check_request_state(&mut self, obj: &Map<String, Value>) -> Checked<()> {
        match obj.get("requestState") {
            None => Ok(()),
            Some(Value::String(s)) => {
                if s.len() > self.policy.limits.max_request_state_bytes {
                    self.limit("max_request_state_bytes", None, None, "a requestState")?;
                } else {
                    self.pass(Rule::Limit, None, None, "max_request_state_bytes");
                }
                self.report.request_state = Some(s.clone());
                Ok(())
            }
            Some(_) => Err(self.malformed(None, "requestState must be a string")),
        }
    }

    /// `inputRequests` taken out of the result for checking (put back after).
    pub(super) fn check_shape(
        &mut self,
        obj: &mut Map<String, Value>,
    ) -> Checked<Option<Map<String, Value>>> {
        let requests = match obj.remove("inputRequests") {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => return Err(self.malformed(None, "inputRequests must be an object")),
        };
        if requests.is_none() && !obj.contains_key("requestState") {
            return Err(self.malformed(
                None,
                "an input_required result needs inputRequests or requestState",
            ));
        }
        let Some(requests) = requests else {
            return Ok(None);
        };
        if requests.len() > self.policy.limits.max_input_requests {
            self.limit("max_input_requests", None, None, "more input requests")?;
        } else {
            self.pass(Rule::Limit, None, None, "max_input_requests");
        }
        for (key, request) in &requests {
            if key.is_empty() || key.len() > 128 || key.chars().any(char::is_control) {
                return Err(self.malformed(
                    None,
                    "an inputRequests key must be 1 to 128 printable characters",
                ));
            }
            let ok = request.as_object().is_some_and(|r| {
                r.get("method").is_some_and(Value::is_string)
                    && r.get("params").is_none_or(Value::is_object)
                    && r.keys().all(|k| k == "method" || k == "params")
            });
            if !ok {
                return Err(self.malformed(
                    Some(key),
                    "every input request must be {\"method\", \"params\"}",
                ));
            }
            self.pass(Rule::Protocol, Some(key), None, "{method, params}");
        }
        Ok(Some(requests))
    }
}

/// The questions by names only, as received: methods, modes, the member
/// names of `requestedSchema.properties` and URL hosts.
pub(super) fn shapes(requests: &Map<String, Value>) -> Vec<RequestShape> {
    requests
        .iter()
        .map(|(key, request)| shape(key, request))
        .collect()
}

fn shape(key: &str, request: &Value) -> RequestShape {
    let method = request.get("method").and_then(Value::as_str);
    let params = request.get("params");
    let (kind, fields, url_host) = match method.map(McpMethod::parse) {
        Some(McpMethod::ElicitationCreate) => {
            match params.and_then(|p| p.get("mode")).and_then(Value::as_str) {
                Some("url") => {
                    let host = params
                        .and_then(|p| p.get("url"))
                        .and_then(Value::as_str)
                        .and_then(|u| url::Url::parse(u).ok())
                        .and_then(|u| u.host_str().map(str::to_owned));
                    (RequestKind::Url, None, host)
                }
                _ => {
                    let fields = params
                        .and_then(|p| p.get("requestedSchema"))
                        .and_then(|s| s.get("properties"))
                        .and_then(Value::as_object)
                        .map(|props| props.keys().cloned().collect())
                        .unwrap_or_default();
                    (RequestKind::Form, Some(fields), None)
                }
            }
        }
        Some(McpMethod::SamplingCreateMessage) => (RequestKind::Sampling, None, None),
        Some(McpMethod::RootsList) => (RequestKind::Roots, None, None),
        _ => (RequestKind::Unknown, None, None),
    };
    RequestShape {
        key: key.to_owned(),
        kind,
        fields,
        url_host,
    }
}
