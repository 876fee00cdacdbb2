//! Criterion benchmarks of the policy's reading of what a server hands back:
//! a small tool result's content check (the byte scan, and the parse and
//! rules when the scan asks for them), and the first inspection of a big
//! list (every item's evidence gathered: nothing cached).
//!
//! The big list is the recording of a real server when one is present
//! (`PORTCULLIS_BIG_LIST`, else ms-365's list as `scripts/realworld
//! --record-only --only softeria+ms-365-mcp-server` records it: 344 tools,
//! 3.6 MB), and a generated list of the same shape always.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use portcullis_model::model::{ClientCaps, McpMethod};
use portcullis_policy::policy::config::{Policy, PolicySet};
use portcullis_policy::policy::inspect::{
    inspect_content, inspect_whole_result, may_need_content, scan_raw, Subject,
};
use portcullis_policy::policy::secret_values::SecretValueScanner;
use serde_json::{json, Value};

fn policy(name: &str) -> Arc<Policy> {
    PolicySet::load(None).unwrap().get(name).unwrap()
}

fn subject(method: McpMethod) -> Subject<'static> {
    Subject {
        method,
        client: ClientCaps {
            elicitation_form: true,
            elicitation_url: true,
            sampling: true,
            sampling_context: true,
            roots: true,
            tasks: true,
        },
        upstream_name: "Bench",
        upstream_host: "bench.example:443",
        catalogue: None,
    }
}

/// Small `tools/call` results as servers send them: plain ASCII prose with a
/// link (the byte scan alone), text with accents and a markdown link (parsed
/// and read), and one whose text names a role (read by the intent detector
/// under `untrusted`).
const SMALL: [(&str, &str); 3] = [
    (
        "ascii",
        r#"{"content":[{"type":"text","text":"Found 3 rooms free on 2026-09-17: Atrium (12 seats, projector), Nook (4 seats), Loft (8 seats). Booking rules: https://rooms.example/help"}],"isError":false}"#,
    ),
    (
        "unicode_markdown",
        r#"{"content":[{"type":"text","text":"Réservation confirmée pour le café du 17 septembre — salle Atrium, 12 places. Voir [les règles](https://rooms.example/règles) ou écrire à l’accueil."}],"isError":false}"#,
    ),
    (
        "role_word",
        r#"{"content":[{"type":"text","text":"Log level set. system: 3 warnings in the last hour, the newest from the booking sync job at 10:42; run list_warnings for details."}],"isError":false}"#,
    ),
];

/// The content check of one result as the gateway runs it: the scan, then
/// the parse and the rules when the scan asks for them.
fn check_content(policy: &Policy, subject: &Subject<'_>, raw: &str) -> bool {
    static SCANNER: LazyLock<SecretValueScanner> = LazyLock::new(SecretValueScanner::builtin);
    if !may_need_content(policy, &scan_raw(policy, &SCANNER, raw)) {
        return false;
    }
    let Ok(mut value) = serde_json::from_str::<Value>(raw) else {
        return false;
    };
    let (outcome, report) = inspect_content(policy, subject, McpMethod::ToolsCall, &mut value);
    black_box(report);
    matches!(outcome, Ok(true))
}

fn content(c: &mut Criterion) {
    let subject = subject(McpMethod::ToolsCall);
    let mut g = c.benchmark_group("content_check");
    for preset in ["untrusted", "trusted"] {
        let p = policy(preset);
        for (name, raw) in SMALL {
            g.bench_function(format!("{name}/{preset}"), |b| {
                b.iter(|| check_content(&p, &subject, black_box(raw)))
            });
        }
    }
    g.finish();
}

/// A generated list shaped like a big vendor's: 344 tools, each a
/// sentence of description and a dozen described parameters.
fn generated_list() -> Value {
    let verbs = ["List", "Get", "Create", "Update", "Delete", "Search"];
    let things = [
        "messages",
        "calendar events",
        "drive items",
        "contacts",
        "planner tasks",
        "team channels",
        "site pages",
        "mail folders",
    ];
    let tools: Vec<Value> = (0..344)
        .map(|i| {
            let verb = verbs[i % verbs.len()];
            let thing = things[i % things.len()];
            let props: serde_json::Map<String, Value> = (0..12)
                .map(|k| {
                    (
                        format!("param_{k}"),
                        json!({"type": "string", "description": format!(
                            "The {thing} filter {k}: an OData expression such as startswith(displayName,'A'); see https://learn.example/odata#{k} for the syntax. Leave empty to read every item the signed-in user can see.")}),
                    )
                })
                .collect();
            json!({
                "name": format!("{}-{}-{i}", verb.to_lowercase(), thing.replace(' ', "-")),
                "description": format!("{verb} {thing} of the signed-in user. Returns at most 100 items per page; use the nextLink to read more. Requires the {thing} read scope."),
                "inputSchema": {"type": "object", "properties": props, "additionalProperties": false},
            })
        })
        .collect();
    json!({ "tools": tools })
}

/// The recorded big list, when present.
fn recorded_list() -> Option<Value> {
    let path = std::env::var_os("PORTCULLIS_BIG_LIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/realworld/softeria+ms-365-mcp-server/tools.json")
        });
    let text = std::fs::read_to_string(&path).ok()?;
    serde_json::from_str(&text).ok()
}

/// A copy of `list` whose first tool has a name not seen before, so the
/// list's and its items' cached evidence do not apply: a first inspection.
fn fresh(list: &Value, n: &mut u64) -> Value {
    *n += 1;
    let mut v = list.clone();
    if let Some(name) = v.pointer_mut("/tools/0/name") {
        *name = Value::String(format!("first_seen_{n}"));
    }
    v
}

fn big_list(c: &mut Criterion) {
    let p = policy("untrusted");
    let subject = subject(McpMethod::ToolsList);
    let mut g = c.benchmark_group("listing_first_inspection");
    g.sample_size(10);
    let mut lists = vec![("generated_344", generated_list())];
    match recorded_list() {
        Some(l) => lists.push(("ms_365", l)),
        None => eprintln!("listing_first_inspection/ms_365: no recording (scripts/realworld --record-only --only softeria+ms-365-mcp-server)"),
    }
    for (name, list) in lists {
        let mut n = 0;
        g.bench_function(name, |b| {
            b.iter_batched(
                || fresh(&list, &mut n),
                |mut v| black_box(inspect_whole_result(&p, &subject, &mut v).0.is_ok()),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, content, big_list);
criterion_main!(benches);
