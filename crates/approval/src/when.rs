//! `when`: a condition written in CEL (the Common Expression Language) over
//! what the gateway knows of a call — who calls, on which route and
//! upstream, which tool, with which arguments, what the upstream listed
//! about the tool and what the request-side checks found. Compiled once per
//! config generation; evaluated only when a rule's other criteria match.
//!
//! A condition names only the variables of [`Variable`] (checked when it is
//! compiled, with the position of the first unknown one) and must yield a
//! boolean. One that cannot be evaluated for a call (a missing argument
//! read without `has(...)`, a type mismatch) is a [`WhenFailed`]: the rule
//! that holds it decides which way is safe (an approval rule asks, a deny
//! rule refuses, an allow rule does not allow).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr};
use cel::{Context, Env, IdedExpr, Program, Value};
use serde_json::Value as Json;

portcullis_model::name_table! {
    /// The variables a `when` condition reads.
    Variable {
        Caller => "caller", "who is calling: `caller.principal`, `caller.method` (api_key, jwt, oauth, mtls, anonymous), `caller.groups`, `caller.scopes`, `caller.client` (an OAuth client id, or \"\"), `caller.claims` (a JWT's or OAuth token's claims, else {})";
        Route => "route", "the path of the route the call came in on";
        Upstream => "upstream", "the id of the upstream the call goes to";
        Tool => "tool", "the name of the tool as the client called it (with its prefix on a federated route)";
        UpstreamTool => "upstream_tool", "the name of the tool at its upstream";
        Arguments => "arguments", "the call's arguments, as sent";
        Annotations => "annotations", "the annotations the upstream listed for the tool (`destructiveHint`, `readOnlyHint`, `openWorldHint`, `idempotentHint`), only those it listed";
        Verdicts => "verdicts", "the names of the request-side checks that found something in the arguments (a private path, a secret, a forbidden host, data from another upstream, shell syntax)";
        ListingChanged => "listing_changed", "true when the tool's listed definition changed since the gateway pinned it and is held";
    }
}

/// The variables an allow or deny rule's `when` may read: what is known
/// when permissions are judged, before the request-side checks run.
pub const PERMIT_VARIABLES: &[Variable] = &[
    Variable::Caller,
    Variable::Route,
    Variable::Upstream,
    Variable::Tool,
    Variable::UpstreamTool,
    Variable::Arguments,
];

/// The longest condition accepted: a policy line, not a program.
pub const MAX_SOURCE_BYTES: usize = 4096;

/// The standard CEL environment, built once.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A compiled condition.
pub struct When {
    program: Program,
    /// The variables it reads, so an evaluation builds only those.
    reads: Vec<Variable>,
    source: Arc<str>,
}

impl std::fmt::Debug for When {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("When").field(&self.source).finish()
    }
}

/// Why a condition does not compile, and where in its own text (1-based
/// line and column, counted in characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct WhenError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// A condition that could not be evaluated for one call: what kind of
/// failure, and the name the condition itself wrote where there is one (a
/// missing key's) — never a value of the call, which CEL's own messages
/// may quote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the condition could not be evaluated: {0}")]
pub struct WhenFailed(pub String);

impl WhenFailed {
    fn of(e: &cel::ExecutionError) -> WhenFailed {
        use cel::ExecutionError as E;
        WhenFailed(match e {
            E::NoSuchKey(k) => format!("no key `{k}` (test for it with has(...) first)"),
            E::UndeclaredReference(name) => format!("`{name}` is not declared"),
            E::NoSuchOverload(o) => format!(
                "`{}` does not take ({})",
                o.function(),
                o.argument_types().join(", ")
            ),
            E::UnexpectedType { got, want } => format!("a {got} where a {want} is needed"),
            E::FunctionError { function, .. } => format!("`{function}` failed"),
            E::InvalidArgumentCount { expected, actual } => {
                format!("{actual} arguments where {expected} are taken")
            }
            E::DivisionByZero(_) | E::RemainderByZero(_) => "a division by zero".to_owned(),
            E::Overflow(op, _, _) => format!("`{op}` overflowed"),
            E::IndexOutOfBounds(_) => "an index out of bounds".to_owned(),
            E::ValuesNotComparable(_, _) => "values that cannot be compared".to_owned(),
            _ => "an operation its values do not support".to_owned(),
        })
    }
}

impl When {
    /// Compiles `source`, which may read only `allowed`.
    pub fn compile(source: &str, allowed: &[Variable]) -> Result<When, WhenError> {
        if source.trim().is_empty() {
            return Err(WhenError::at(
                1,
                1,
                "an empty condition; write one (`tool == \"x\"`) or leave `when` out",
            ));
        }
        if source.len() > MAX_SOURCE_BYTES {
            return Err(WhenError::at(
                1,
                1,
                format!("a condition of at most {MAX_SOURCE_BYTES} bytes"),
            ));
        }
        let program = ENV.compile(source).map_err(|errors| {
            let first = errors.errors.first();
            let (line, column) = first.map_or((1, 1), |e| {
                // CEL counts lines from 1 and columns from 0.
                (
                    usize::try_from(e.pos.0).unwrap_or(1).max(1),
                    usize::try_from(e.pos.1).unwrap_or(0) + 1,
                )
            });
            let message =
                first.map_or_else(|| "not a CEL expression".to_owned(), |e| e.msg.clone());
            WhenError::at(
                line,
                column,
                format!("not a valid CEL expression: {message}"),
            )
        })?;
        let mut free = Vec::new();
        free_identifiers(program.expression(), &mut Vec::new(), &mut free);
        let mut reads = Vec::new();
        for (name, id) in free {
            match Variable::ALL.iter().find(|v| v.as_str() == name) {
                Some(v) if allowed.contains(v) => {
                    if !reads.contains(v) {
                        reads.push(*v);
                    }
                }
                found => {
                    let (line, column) = position(&program, source, id);
                    let known: Vec<&str> = allowed.iter().map(|v| v.as_str()).collect();
                    let message = match found {
                        Some(_) => format!(
                            "`{name}` is not known here (this condition is judged before it is; known: {})",
                            known.join(", ")
                        ),
                        None => format!("unknown variable `{name}` (known: {})", known.join(", ")),
                    };
                    return Err(WhenError::at(line, column, message));
                }
            }
        }
        Ok(When {
            program,
            reads,
            source: Arc::from(source),
        })
    }

    /// Whether the condition reads `v` (what it does not read need not be
    /// gathered).
    pub fn reads(&self, v: Variable) -> bool {
        self.reads.contains(&v)
    }

    /// The condition as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the condition holds for `facts`.
    pub fn holds(&self, facts: &Facts<'_>) -> Result<bool, WhenFailed> {
        let mut context = Context::with_env(ENV.clone());
        for v in &self.reads {
            context.add_variable_from_value(v.as_str(), facts.value(*v));
        }
        match self.program.execute(&context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(WhenFailed(format!(
                "it yields a {}, not true or false",
                other.type_of()
            ))),
            Err(e) => Err(WhenFailed::of(&e)),
        }
    }
}

impl WhenError {
    fn at(line: usize, column: usize, message: impl Into<String>) -> WhenError {
        WhenError {
            line,
            column,
            message: message.into(),
        }
    }
}

/// Line and column (1-based, in characters) of node `id` in `source`.
fn position(program: &Program, source: &str, id: u64) -> (usize, usize) {
    let Some((start, _)) = program.source_info().offset_for(id) else {
        return (1, 1);
    };
    let before: String = source.chars().take(start as usize).collect();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The identifiers `expr` reads that no comprehension (`all`, `exists`,
/// `map`, `filter`) binds, with the node that names each.
fn free_identifiers<'a>(
    expr: &'a IdedExpr,
    bound: &mut Vec<&'a str>,
    out: &mut Vec<(&'a str, u64)>,
) {
    match &expr.expr {
        Expr::Ident(name) => {
            if !bound.contains(&name.as_str()) {
                out.push((name, expr.id));
            }
        }
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                free_identifiers(t, bound, out);
            }
            for a in &call.args {
                free_identifiers(a, bound, out);
            }
        }
        Expr::Select(s) => free_identifiers(&s.operand, bound, out),
        Expr::List(l) => {
            for e in &l.elements {
                free_identifiers(e, bound, out);
            }
        }
        Expr::Map(m) => entries(&m.entries, bound, out),
        Expr::Struct(s) => entries(&s.entries, bound, out),
        Expr::Comprehension(c) => {
            free_identifiers(&c.iter_range, bound, out);
            free_identifiers(&c.accu_init, bound, out);
            let depth = bound.len();
            bound.push(&c.iter_var);
            if let Some(v) = &c.iter_var2 {
                bound.push(v);
            }
            bound.push(&c.accu_var);
            free_identifiers(&c.loop_cond, bound, out);
            free_identifiers(&c.loop_step, bound, out);
            free_identifiers(&c.result, bound, out);
            bound.truncate(depth);
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entries<'a>(
    entries: &'a [cel::common::ast::IdedEntryExpr],
    bound: &mut Vec<&'a str>,
    out: &mut Vec<(&'a str, u64)>,
) {
    for e in entries {
        match &e.expr {
            EntryExpr::MapEntry(m) => {
                free_identifiers(&m.key, bound, out);
                free_identifiers(&m.value, bound, out);
            }
            EntryExpr::StructField(f) => free_identifiers(&f.value, bound, out),
        }
    }
}

/// Who is calling, as a condition sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallerFacts<'a> {
    pub principal: &'a str,
    pub method: &'a str,
    pub groups: &'a [String],
    pub scopes: &'a [String],
    pub client: Option<&'a str>,
    pub claims: Option<&'a serde_json::Map<String, Json>>,
}

/// The hints an upstream listed for a tool; `None`: not listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    pub destructive: Option<bool>,
    pub read_only: Option<bool>,
    pub open_world: Option<bool>,
    pub idempotent: Option<bool>,
}

impl Annotations {
    /// The hints of a listed tool's `annotations` object (anything else in
    /// it, or a hint that is not a boolean, is not a hint).
    pub fn of_listed(annotations: Option<&Json>) -> Annotations {
        let hint = |name: &str| {
            annotations
                .and_then(|a| a.get(name))
                .and_then(Json::as_bool)
        };
        Annotations {
            destructive: hint(Hint::Destructive.as_str()),
            read_only: hint(Hint::ReadOnly.as_str()),
            open_world: hint(Hint::OpenWorld.as_str()),
            idempotent: hint(Hint::Idempotent.as_str()),
        }
    }

    pub fn get(&self, hint: Hint) -> Option<bool> {
        match hint {
            Hint::Destructive => self.destructive,
            Hint::ReadOnly => self.read_only,
            Hint::OpenWorld => self.open_world,
            Hint::Idempotent => self.idempotent,
        }
    }
}

portcullis_model::name_table! {
    /// The behaviour hints of a listed tool (MCP `ToolAnnotations`).
    Hint {
        Destructive => "destructiveHint", "the tool may delete or overwrite data";
        ReadOnly => "readOnlyHint", "the tool changes nothing";
        OpenWorld => "openWorldHint", "the tool reaches beyond the server (the web, other systems)";
        Idempotent => "idempotentHint", "calling the tool again with the same arguments changes nothing more";
    }
}

/// Everything a condition may read about one call. Built by the caller of
/// [`When::holds`] from what the phases already hold; nothing is parsed
/// again.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    pub caller: CallerFacts<'a>,
    pub route: &'a str,
    pub upstream: &'a str,
    pub tool: &'a str,
    pub upstream_tool: &'a str,
    pub arguments: Option<&'a Json>,
    /// `None`: the gateway has no listing of the tool.
    pub annotations: Option<Annotations>,
    pub verdicts: &'a [&'a str],
    pub listing_changed: bool,
}

impl Facts<'_> {
    fn value(&self, v: Variable) -> Value {
        match v {
            Variable::Caller => self.caller_value(),
            Variable::Route => text(self.route),
            Variable::Upstream => text(self.upstream),
            Variable::Tool => text(self.tool),
            Variable::UpstreamTool => text(self.upstream_tool),
            Variable::Arguments => self.arguments.map_or_else(|| map(HashMap::new()), json),
            Variable::Annotations => {
                let listed = self.annotations.unwrap_or_default();
                let mut m = HashMap::new();
                for h in Hint::ALL {
                    if let Some(b) = listed.get(*h) {
                        m.insert(key(h.as_str()), Value::Bool(b));
                    }
                }
                map(m)
            }
            Variable::Verdicts => {
                Value::List(Arc::new(self.verdicts.iter().map(|v| text(v)).collect()))
            }
            Variable::ListingChanged => Value::Bool(self.listing_changed),
        }
    }

    fn caller_value(&self) -> Value {
        let c = &self.caller;
        let list =
            |items: &[String]| Value::List(Arc::new(items.iter().map(|s| text(s)).collect()));
        let claims = c.claims.map_or_else(
            || map(HashMap::new()),
            |m| map(m.iter().map(|(k, v)| (key(k), json(v))).collect()),
        );
        map(HashMap::from([
            (key("principal"), text(c.principal)),
            (key("method"), text(c.method)),
            (key("groups"), list(c.groups)),
            (key("scopes"), list(c.scopes)),
            (key("client"), text(c.client.unwrap_or(""))),
            (key("claims"), claims),
        ]))
    }
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

fn key(s: &str) -> cel::objects::Key {
    cel::objects::Key::String(Arc::new(s.to_owned()))
}

fn map(m: HashMap<cel::objects::Key, Value>) -> Value {
    Value::Map(cel::objects::Map { map: Arc::new(m) })
}

/// A JSON value as CEL sees it (whole numbers as `int` where they fit, so
/// `arguments.count > 5` reads as written).
fn json(v: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::Int(i),
            (None, Some(u), _) => Value::UInt(u),
            (_, _, Some(f)) => Value::Float(f),
            _ => Value::Null,
        },
        Json::String(s) => text(s),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(json).collect())),
        Json::Object(m) => map(m.iter().map(|(k, v)| (key(k), json(v))).collect()),
    }
}

#[cfg(test)]
mod tests;
