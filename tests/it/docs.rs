//! The book says what the code does: its table of refusal reasons is the
//! one the gateway answers with, its list of verdict rules and actions the
//! one the audit trail, the metrics and `explain` write.

/// The text of a book page (`docs/src/<page>`) between `<!-- {name}:start -->`
/// and `<!-- {name}:end -->`.
fn book_between(page: &str, name: &str) -> String {
    let path = format!("{}/docs/src/{page}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (open, close) = (
        format!("<!-- {name}:start -->"),
        format!("<!-- {name}:end -->"),
    );
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("{path} marks {open}"));
    let end = text
        .find(&close)
        .unwrap_or_else(|| panic!("{path} marks {close}"));
    text[start + open.len()..end].trim().to_owned()
}

/// The book's text between the markers equals `expected`; with
/// `PORTCULLIS_BLESS=1` it is written there first (then read the diff).
fn assert_book(page: &str, name: &str, expected: &str, source: &str) {
    if std::env::var_os("PORTCULLIS_BLESS").is_some() {
        let path = format!("{}/docs/src/{page}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let open = format!("<!-- {name}:start -->");
        let close = format!("<!-- {name}:end -->");
        if let (Some(start), Some(end)) = (text.find(&open), text.find(&close)) {
            let blessed = format!(
                "{}{open}\n{}\n{}",
                &text[..start],
                expected.trim(),
                &text[end..]
            );
            std::fs::write(&path, blessed).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
    }
    assert_eq!(
        book_between(page, name),
        expected.trim(),
        "docs/src/{page}'s {name} differ from {source}; paste this between the markers (or run with PORTCULLIS_BLESS=1):\n{expected}"
    );
}

#[test]
fn the_book_lists_every_verdict_rule_and_action_as_the_gateway_writes_them() {
    let expected = portcullis::policy::inspect::verdict_table();
    let source = "crates/policy/src/policy/inspect/verdict.rs";
    assert_book("reference/audit.md", "verdicts", &expected, source);
}

#[test]
fn the_book_lists_every_reason_as_the_gateway_answers_it() {
    let expected = portcullis::model::reason_table();
    let source = "crates/model/src/model/reason.rs";
    assert_book("reference/errors.md", "reasons", &expected, source);
}

/// What a value of this shape is, in words.
fn kind(shape: &portcullis::model::Shape) -> String {
    use portcullis::model::Shape;
    match shape {
        Shape::Bool => "`true` or `false`".into(),
        Shape::Integer => "integer".into(),
        Shape::Float => "number".into(),
        Shape::Text => "text".into(),
        Shape::List(inner) if matches!(**inner, Shape::Table(_)) => "tables (below)".into(),
        Shape::List(inner) => format!("list of {}", kind(inner)),
        Shape::Table(_) => "table (below)".into(),
        Shape::Map(inner) => format!("table: any name = {}", kind(inner)),
        Shape::Choice(names) => {
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("one of {}", names.join(", "))
        }
        Shape::Any => "text or list (see the section's page)".into(),
    }
}

/// One section of the key reference: its header, then a row per key, then
/// the sections of its tables.
fn key_section(header: &str, shape: &portcullis::model::Shape, out: &mut String) {
    use portcullis::model::Shape;
    let fields = shape.fields();
    out.push_str(&format!(
        "### `{header}`\n\n| key | value | required |\n|---|---|---|\n"
    ));
    for f in fields {
        let required = if f.required { "yes" } else { "" };
        out.push_str(&format!(
            "| `{}` | {} | {required} |\n",
            f.name,
            kind(&f.shape)
        ));
    }
    out.push('\n');
    let name = header.trim_matches(|c| c == '[' || c == ']');
    for f in fields {
        let path = if name.is_empty() {
            f.name.to_owned()
        } else {
            format!("{name}.{}", f.name)
        };
        match &f.shape {
            Shape::Table(_) => key_section(&format!("[{path}]"), &f.shape, out),
            Shape::List(inner) if matches!(**inner, Shape::Table(_)) => {
                key_section(&format!("[[{path}]]"), inner, out)
            }
            _ => {}
        }
    }
}

/// Every key of the config file, section by section, as the gateway's own
/// types declare them (`Shape::of::<RawConfig>()`).
fn key_reference() -> String {
    use portcullis::model::Shape;
    let shape = portcullis::config::file_shape();
    let mut out = String::new();
    let top: Vec<_> = shape
        .fields()
        .iter()
        .filter(|f| !matches!(f.shape, Shape::Table(_) | Shape::List(_)))
        .collect();
    assert!(top.is_empty(), "keys outside a section: {top:?}");
    for f in shape.fields() {
        match &f.shape {
            Shape::List(inner) => key_section(&format!("[[{}]]", f.name), inner, &mut out),
            s => key_section(&format!("[{}]", f.name), s, &mut out),
        }
    }
    out
}

#[test]
fn the_book_lists_every_config_key_as_the_gateway_reads_it() {
    let expected = key_reference();
    let source =
        "the config file's types (crates/config/src/config/raw.rs and the section types it names)";
    assert_book("reference/config.md", "keys", &expected, source);
}

/// The `event` names `AuditEvent::name` gives, read from its match arms (the
/// enum has no list of its variants, and a name is written only there).
fn audit_event_names() -> Vec<String> {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/audit/src/audit/event.rs"
    ))
    .expect("crates/audit/src/audit/event.rs (moved? point this test at AuditEvent::name)");
    let body = source
        .split("fn name(&self) -> &'static str {")
        .nth(1)
        .expect("AuditEvent::name");
    let body = &body[..body.find("\n    }\n").expect("the end of AuditEvent::name")];
    body.lines()
        .filter_map(|l| l.split("=> \"").nth(1)?.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_book_lists_every_audit_event() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/reference/audit.md"
    ))
    .unwrap();
    let start = page
        .find("| `event` | when |")
        .expect("docs/src/reference/audit.md has an event table");
    let listed: Vec<String> = page[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| Some(l.split('|').nth(1)?.trim().trim_matches('`').to_owned()))
        .collect();
    let mut names = audit_event_names();
    assert!(names.len() >= 8, "{names:?}");
    let mut listed = listed;
    listed.sort();
    names.sort();
    assert_eq!(
        listed, names,
        "docs/src/reference/audit.md's event table differs from AuditEvent::name (crates/audit/src/audit/event.rs)"
    );
}

/// policies/README.md says what each preset does with sampling and roots as
/// the preset's own file (compiled in) sets it.
#[test]
fn the_policies_readme_says_what_the_presets_do_with_sampling_and_roots() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("policies/README.md")).unwrap();
    for preset in ["untrusted", "trusted"] {
        let text =
            std::fs::read_to_string(root.join(format!("policies/presets/{preset}.toml"))).unwrap();
        let table: toml::Table = text.parse().unwrap();
        let deprecated = &table["deprecated"];
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{preset}`")))
            .unwrap_or_else(|| panic!("no row for {preset}"));
        for kind in ["sampling", "roots"] {
            let allowed = deprecated[kind].as_str() == Some("allow");
            let says = if allowed {
                "sampling/roots allowed"
            } else {
                "sampling/roots refused"
            };
            assert!(
                row.contains(says),
                "{preset} sets {kind} = {}, its row says otherwise: {row}",
                deprecated[kind]
            );
        }
    }
}
