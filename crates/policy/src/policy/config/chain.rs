//! Loading the policy files and following `extends`: the chain of sources a
//! policy is compiled from, and reading one setting down that chain.

use super::*;

/// A parsed policy file with what is needed to point at its lines.
pub(super) struct Source {
    pub(super) name: String,
    pub(super) file: String,
    pub(super) text: String,
    pub(super) raw: RawPolicy,
}

impl Source {
    pub(super) fn err(
        &self,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        let start = span.start.min(self.text.len());
        let before = &self.text[..start];
        ConfigError {
            file: self.file.clone(),
            line: before.matches('\n').count() + 1,
            column: before.rfind('\n').map_or(start, |nl| start - nl - 1) + 1,
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub(super) fn parse(name: &str, file: &str, text: String) -> Result<Source, ConfigError> {
        let raw: RawPolicy = match toml::from_str(&text) {
            Ok(r) => r,
            Err(e) => {
                let s = Source {
                    name: name.to_owned(),
                    file: file.to_owned(),
                    text,
                    raw: RawPolicy::default(),
                };
                return Err(s.err(
                    e.span().unwrap_or(0..0),
                    "(syntax)",
                    crate::model::toml_syntax_message(e.message()),
                ));
            }
        };
        Ok(Source {
            name: name.to_owned(),
            file: file.to_owned(),
            text,
            raw,
        })
    }
}

/// The policy names available: the presets plus every `*.toml` directly in
/// the policies directory (file stem = policy name).
pub struct PolicySet {
    compiled: HashMap<String, Arc<Policy>>,
}

impl PolicySet {
    /// Load the presets and, when given, every policy file in `dir`.
    pub fn load(dir: Option<&Path>) -> Result<PolicySet, ConfigError> {
        let mut sources = presets()?;
        if let Some(dir) = dir {
            for path in policy_files(dir)? {
                let name = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_owned();
                let file = path.display().to_string();
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| file_error(&file, format!("cannot read: {e}")))?;
                add_user_policy(&mut sources, name, file, text)?;
            }
        }
        compile_all(&sources)
    }

    /// The presets plus `(name, text)` policies, each read as the file
    /// `NAME.toml` of a policies directory would be: what `load` does,
    /// without the file system (the fuzz target of the policy loader).
    pub fn from_texts(policies: &[(&str, &str)]) -> Result<PolicySet, ConfigError> {
        let mut sources = presets()?;
        for (name, text) in policies {
            let file = format!("{name}.toml");
            add_user_policy(&mut sources, (*name).to_owned(), file, (*text).to_owned())?;
        }
        compile_all(&sources)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Policy>> {
        self.compiled.get(name).cloned()
    }

    pub fn names(&self) -> Vec<&str> {
        let mut n: Vec<&str> = self.compiled.keys().map(String::as_str).collect();
        n.sort_unstable();
        n
    }
}

fn presets() -> Result<HashMap<String, Source>, ConfigError> {
    let mut sources = HashMap::new();
    for (name, text) in PRESETS {
        let file = format!("(built-in preset {name})");
        sources.insert(
            (*name).to_owned(),
            Source::parse(name, &file, (*text).to_owned())?,
        );
    }
    Ok(sources)
}

fn file_error(file: &str, message: String) -> ConfigError {
    ConfigError {
        file: file.to_owned(),
        line: 0,
        column: 0,
        field: "(file)".into(),
        message,
    }
}

/// A policy file named `name` (its file stem): not a preset's name, a valid name.
fn add_user_policy(
    sources: &mut HashMap<String, Source>,
    name: String,
    file: String,
    text: String,
) -> Result<(), ConfigError> {
    if PRESETS.iter().any(|(p, _)| *p == name) {
        return Err(file_error(&file, format!("\"{name}\" is a built-in preset name; name the file differently and use extends = \"{name}\"")));
    }
    if !valid_name(&name) {
        return Err(file_error(
            &file,
            format!("policy name \"{name}\" (the file name): use a-z, 0-9, '-' and '_'"),
        ));
    }
    let source = Source::parse(&name, &file, text)?;
    sources.insert(name, source);
    Ok(())
}

fn compile_all(sources: &HashMap<String, Source>) -> Result<PolicySet, ConfigError> {
    let mut compiled = HashMap::new();
    let mut names: Vec<&String> = sources.keys().collect();
    names.sort();
    for name in names {
        let chain = inheritance_chain(name, sources)?;
        compiled.insert(name.clone(), Arc::new(compile(&chain)?));
    }
    Ok(PolicySet { compiled })
}

pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

pub(super) fn policy_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries = std::fs::read_dir(dir).map_err(|e| ConfigError {
        file: dir.display().to_string(),
        line: 0,
        column: 0,
        field: "policies.dir".into(),
        message: format!("cannot read the policies directory: {e}"),
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// The chain from the preset root down to `name`, refusing unknown parents and cycles.
pub(super) fn inheritance_chain<'a>(
    name: &str,
    sources: &'a HashMap<String, Source>,
) -> Result<Vec<&'a Source>, ConfigError> {
    let mut chain: Vec<&Source> = Vec::new();
    let mut current = sources.get(name);
    while let Some(src) = current {
        if chain.iter().any(|s| s.name == src.name) {
            let path: Vec<&str> = chain.iter().map(|s| s.name.as_str()).collect();
            let span = src.raw.extends.as_ref().map(|e| e.span()).unwrap_or(0..0);
            return Err(src.err(
                span,
                "extends",
                format!(
                    "policies extend each other in a cycle: {} → {}",
                    path.join(" → "),
                    src.name
                ),
            ));
        }
        chain.push(src);
        let is_preset = PRESETS.iter().any(|(p, _)| *p == src.name);
        let parent = match &src.raw.extends {
            Some(p) => Some(p),
            None if is_preset => None,
            // A user policy without `extends` builds on the default preset.
            None => {
                current = sources.get("untrusted");
                continue;
            }
        };
        current = match parent {
            None => None,
            Some(p) => Some(sources.get(p.get_ref().as_str()).ok_or_else(|| {
                let mut known: Vec<&str> = sources.keys().map(String::as_str).collect();
                known.sort_unstable();
                src.err(
                    p.span(),
                    "extends",
                    format!(
                        "no policy named \"{}\" (known: {})",
                        p.get_ref(),
                        known.join(", ")
                    ),
                )
            })?),
        };
    }
    chain.reverse();
    Ok(chain)
}

/// The last value set along the chain (root first), with the source that set it.
pub(super) fn pick<'a, T>(
    chain: &[&'a Source],
    get: impl Fn(&'a RawPolicy) -> Option<&'a T>,
) -> Option<(&'a T, &'a Source)> {
    chain
        .iter()
        .rev()
        .find_map(|s| get(&s.raw).map(|v| (v, *s)))
}

/// A yes/no setting: the nearest file that sets it, else no.
pub(super) fn flag(chain: &[&Source], get: fn(&RawPolicy) -> Option<bool>) -> bool {
    chain
        .iter()
        .rev()
        .find_map(|s| get(&s.raw))
        .unwrap_or(false)
}

pub(super) fn choice<'a, T: Copy>(
    chain: &[&'a Source],
    field: &str,
    get: impl Fn(&'a RawPolicy) -> Option<&'a Spanned<String>>,
    options: &[(&str, T)],
) -> Result<T, ConfigError> {
    let (raw, src) = pick(chain, get).ok_or_else(|| missing(chain, field))?;
    options
        .iter()
        .find(|(n, _)| *n == raw.get_ref())
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            src.err(
                raw.span(),
                field,
                format!("\"{}\" is not one of {}", raw.get_ref(), names.join(", ")),
            )
        })
}

pub(super) fn missing(chain: &[&Source], field: &str) -> ConfigError {
    let last = chain.last().map(|s| s.file.clone()).unwrap_or_default();
    ConfigError {
        file: last,
        line: 0,
        column: 0,
        field: field.to_owned(),
        message: "no value set (the presets set every field)".into(),
    }
}

pub(super) fn number<'a>(
    chain: &[&'a Source],
    field: &str,
    get: impl Fn(&'a RawPolicy) -> Option<&'a Spanned<i64>>,
) -> Result<u64, ConfigError> {
    let (raw, src) = pick(chain, get).ok_or_else(|| missing(chain, field))?;
    u64::try_from(*raw.get_ref())
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| src.err(raw.span(), field, "must be a positive whole number"))
}

pub(super) fn size(
    chain: &[&Source],
    field: &str,
    get: impl for<'b> Fn(&'b RawPolicy) -> Option<&'b Spanned<i64>>,
) -> Result<usize, ConfigError> {
    number(chain, field, get).map(|v| usize::try_from(v).unwrap_or(usize::MAX))
}
