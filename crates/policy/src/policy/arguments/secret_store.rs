//! A listed tool whose job is to return secrets: a vault, a password
//! manager, a secrets manager, a key store (`data/secret-store/words.toml`).
//! Asked for one, it returns one; `[content] secret_stores` says whether
//! that result is redacted like any other (`results.rs`). Read from what
//! the server listed (name, title, description), once per definition, when
//! the gateway makes the tool's contract.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct WordsFile {
    store: Vec<String>,
    reads: Vec<String>,
    unless: Vec<String>,
}

struct Words {
    /// All three lists in one automaton; the list of each pattern.
    all: Option<AhoCorasick>,
    list: Vec<List>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    Store,
    Reads,
    Unless,
}

static WORDS: LazyLock<Words> = LazyLock::new(|| {
    let file: WordsFile =
        toml::from_str(data_file!("secret-store/words.toml")).unwrap_or(WordsFile {
            store: Vec::new(),
            reads: Vec::new(),
            unless: Vec::new(),
        });
    let mut patterns = Vec::new();
    let mut list = Vec::new();
    for (words, which) in [
        (file.store, List::Store),
        (file.reads, List::Reads),
        (file.unless, List::Unless),
    ] {
        for w in words {
            patterns.push(w);
            list.push(which);
        }
    }
    Words {
        all: AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(patterns)
            .ok(),
        list,
    }
});

/// The name's parts as words: `readSecret`, `read_secret`, `vault-read` →
/// "read secret", "vault read".
fn name_words(name: &str) -> String {
    crate::policy::detect::name_words(name).join(" ")
}

/// Whether a listed tool says it reads or returns secrets.
pub fn lists_a_secret_store(item: &Value) -> bool {
    let Some(words) = &WORDS.all else {
        return false;
    };
    let text = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
    let about = format!(
        "{} . {} . {}",
        name_words(text("name")),
        text("title").to_lowercase(),
        text("description").to_lowercase()
    );
    let (mut store, mut reads) = (false, false);
    for m in words.find_iter(&about) {
        let before = about[..m.start()].chars().next_back();
        let after = about[m.end()..].chars().next();
        if before.is_some_and(char::is_alphanumeric) || after.is_some_and(char::is_alphanumeric) {
            continue;
        }
        match WORDS.list[m.pattern().as_usize()] {
            List::Store => store = true,
            List::Reads => reads = true,
            List::Unless => return false,
        }
    }
    store && reads
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    LazyLock::force(&WORDS);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_store_that_reads_is_one() {
        for item in [
            json!({"name": "read_secret"}),
            json!({"name": "vault_read", "description": "Reads a value from the vault."}),
            json!({"name": "getPassword", "description": "Get an item from 1Password."}),
            json!({"name": "lookup", "title": "Key store", "description": "Looks up a key in the key store."}),
            json!({"name": "secreto", "description": "Devuelve un secreto de la bóveda."}),
            json!({"name": "tresor", "description": "Liest ein Passwort aus dem Tresor."}),
        ] {
            assert!(lists_a_secret_store(&item), "{item}");
        }
    }

    #[test]
    fn other_tools_are_not() {
        for item in [
            json!({"name": "read_file", "description": "Read a file."}),
            json!({"name": "fetch_url", "description": "Fetches a URL and returns its text."}),
            json!({"name": "scan_secrets", "description": "Scans a repository for leaked secrets and returns the findings."}),
            json!({"name": "generate_password", "description": "Generates a strong password and returns it."}),
            json!({"name": "list_tickets", "description": "List support tickets."}),
            json!({"name": "http_post"}),
        ] {
            assert!(!lists_a_secret_store(&item), "{item}");
        }
    }
}
