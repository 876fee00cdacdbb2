//! Private files named in an argument, in every spelling a path can take
//! (`data/arguments/private-paths.toml` lists them by class).
//!
//! A path is first written one way: URL escapes decoded (twice encoded
//! too), the value folded as the detectors fold text (NFKC: fullwidth
//! `．ｓｓｈ` is `.ssh`; invisible characters dropped), a `file:` URL
//! opened, `\` read as `/` (and `\\?\`, `\\.\` and `\\localhost\c$\`
//! prefixes as the drive they name), letters in lower case (the private
//! names are private on case-insensitive file systems in any case), every
//! spelling of a home folder as `~`, and `.` and `..` resolved (a
//! relative path that climbs out is also read from the root, where the
//! climb can lead). The whole value is read so, and so is each word of it
//! (a path inside a command or a sentence).

use std::borrow::Cow;
use std::sync::OnceLock;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::policy::detect::fold_value;

#[derive(Deserialize)]
struct Table {
    class: Vec<RawClass>,
}

#[derive(Deserialize)]
struct RawClass {
    name: String,
    #[allow(dead_code)]
    what: String,
    patterns: Vec<String>,
    #[serde(default)]
    except: Vec<String>,
}

/// The compiled table: one glob set over every pattern, each pattern's
/// class and whether it is an exception.
pub(crate) struct PrivatePaths {
    names: Vec<String>,
    set: GlobSet,
    /// Per glob of `set`: (class index, is an exception).
    of: Vec<(usize, bool)>,
}

/// Home folders written as an absolute path: the folder that holds them,
/// then one name.
const HOME_PARENTS: [&str; 5] = [
    "/home/",
    "/users/",
    "/var/home/",
    "c:/users/",
    "c:/documents and settings/",
];

/// Variables and spellings that stand for a folder, as `~` or below it.
const VARIABLES: [(&str, &str); 16] = [
    ("${home}", "~"),
    ("$home", "~"),
    ("$env:home", "~"),
    ("$env:userprofile", "~"),
    ("%userprofile%", "~"),
    ("%home%", "~"),
    ("%homedrive%%homepath%", "~"),
    ("%homepath%", "~"),
    ("%appdata%", "~/appdata/roaming"),
    ("$env:appdata", "~/appdata/roaming"),
    ("%localappdata%", "~/appdata/local"),
    ("$env:localappdata", "~/appdata/local"),
    ("${xdg_config_home}", "~/.config"),
    ("$xdg_config_home", "~/.config"),
    ("%programdata%", "c:/programdata"),
    ("%systemroot%", "c:/windows"),
];

impl PrivatePaths {
    pub(crate) fn builtin() -> &'static PrivatePaths {
        static TABLE: OnceLock<PrivatePaths> = OnceLock::new();
        TABLE.get_or_init(|| {
            PrivatePaths::parse(data_file!("arguments/private-paths.toml"))
                .unwrap_or_else(|e| panic!("data/arguments/private-paths.toml: {e}"))
        })
    }

    fn parse(text: &str) -> Result<PrivatePaths, String> {
        let table: Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut builder = GlobSetBuilder::new();
        let mut names = Vec::new();
        let mut of = Vec::new();
        for (i, class) in table.class.into_iter().enumerate() {
            let globs = class.patterns.iter().map(|p| (p, false));
            let excepts = class.except.iter().map(|p| (p, true));
            for (pattern, except) in globs.chain(excepts) {
                let glob = GlobBuilder::new(&pattern.to_lowercase())
                    .literal_separator(true)
                    .backslash_escape(false)
                    .build()
                    .map_err(|e| format!("{pattern}: {e}"))?;
                builder.add(glob);
                of.push((i, except));
            }
            names.push(class.name);
        }
        let set = builder.build().map_err(|e| e.to_string())?;
        Ok(PrivatePaths { names, set, of })
    }

    /// The class of the first private file `value` names, if any.
    pub(crate) fn find(&self, value: &str) -> Option<&str> {
        if !may_name_a_path(value) {
            return None;
        }
        let decoded = decode(value);
        let trimmed = decoded.trim();
        if let Some(class) = self.class_of(trimmed) {
            return Some(class);
        }
        if !trimmed.contains(is_word_break) {
            return None;
        }
        trimmed
            .split(is_word_break)
            .filter(|w| !w.is_empty())
            .find_map(|w| self.class_of(w))
    }

    /// The class of one path, when it names a private file.
    fn class_of(&self, raw: &str) -> Option<&str> {
        let (path, climbs) = normalise(raw)?;
        if let Some(class) = self.matched(&path) {
            return Some(class);
        }
        if climbs && !path.starts_with('/') {
            return self.matched(&format!("/{path}"));
        }
        None
    }

    fn matched(&self, path: &str) -> Option<&str> {
        let hits = self.set.matches(path);
        let excepted = |class: usize| hits.iter().any(|&h| self.of[h] == (class, true));
        hits.iter()
            .map(|&h| self.of[h])
            .find(|&(class, except)| !except && !excepted(class))
            .map(|(class, _)| self.names[class].as_str())
    }
}

/// Cheap test first: something a path is made of (a separator, a home or
/// variable sign, an escape), or one word with a dot or an underscore in
/// it (`.env`, `id_rsa`, `wallet.dat`).
fn may_name_a_path(value: &str) -> bool {
    let b = value.as_bytes();
    if b.iter()
        .any(|c| matches!(c, b'/' | b'\\' | b'~' | b'%' | b'$'))
        || !value.is_ascii()
    {
        return true;
    }
    !b.iter().any(u8::is_ascii_whitespace)
        && (b.contains(&b'.') || b.contains(&b'_') || value.eq_ignore_ascii_case("kubeconfig"))
}

fn is_word_break(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | ','
                | ';'
                | '|'
                | '('
                | ')'
                | '<'
                | '>'
                | '='
                | '&'
                | '['
                | ']'
                | '{'
                | '}'
        )
}

/// URL escapes decoded (as often as they were applied, up to three
/// times), then the value folded as the detectors fold text.
fn decode(value: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(value);
    for _ in 0..3 {
        if !has_escape(&text) {
            break;
        }
        let decoded = percent_encoding::percent_decode_str(&text)
            .decode_utf8_lossy()
            .into_owned();
        text = Cow::Owned(decoded);
    }
    match fold_value(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(folded) => Cow::Owned(folded),
    }
}

fn has_escape(text: &str) -> bool {
    let b = text.as_bytes();
    b.windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
}

/// One path written one way; whether it climbed out of where it started
/// (`..` past its first folder). `None` when it is no path at all.
fn normalise(raw: &str) -> Option<(String, bool)> {
    let mut p = raw.trim().replace('\\', "/").to_lowercase();
    if let Some(rest) = strip_file_url(&p) {
        p = rest;
    }
    for prefix in ["//?/unc/", "//?/", "//./"] {
        if let Some(rest) = p.strip_prefix(prefix) {
            p = rest.to_owned();
        }
    }
    if let Some(rest) = p
        .strip_prefix("//localhost/")
        .or_else(|| p.strip_prefix("//127.0.0.1/"))
    {
        // \\localhost\c$\Users\… is C:\Users\…
        p = match rest.split_once('/') {
            Some((share, tail)) if share.len() == 2 && share.ends_with('$') => {
                format!("{}:/{tail}", &share[..1])
            }
            _ => rest.to_owned(),
        };
    }
    p = home(&p);
    if p.is_empty() {
        return None;
    }
    let (prefix, rest) = if let Some(r) = p.strip_prefix("~/") {
        ("~/", r)
    } else if p == "~" {
        return Some(("~".to_owned(), false));
    } else if let Some(r) = p.strip_prefix('/') {
        ("/", r)
    } else if p.len() > 2 && p.as_bytes()[1] == b':' && p.as_bytes()[2] == b'/' {
        (&p[..3], &p[3..])
    } else {
        ("", p.as_str())
    };
    let mut segments: Vec<&str> = Vec::new();
    let mut climbs = false;
    for seg in rest.split('/') {
        match seg {
            "" | "." => {}
            // `....//` is what a server that strips `../` once turns into `../`.
            s if s.len() >= 2 && s.bytes().all(|b| b == b'.') => {
                if segments.pop().is_none() {
                    climbs = true;
                }
            }
            s => segments.push(s),
        }
    }
    Some((format!("{prefix}{}", segments.join("/")), climbs))
}

/// The path of a `file:` URL (`file:///x`, `file://localhost/x`,
/// `file:/x`, `file:///c:/x`).
fn strip_file_url(p: &str) -> Option<String> {
    let rest = p.strip_prefix("file:")?;
    let rest = match rest.strip_prefix("//") {
        Some(after) => match after.find('/') {
            Some(i) => &after[i..],
            None => "/",
        },
        None => rest,
    };
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    // file:///c:/x is c:/x
    let bytes = rest.as_bytes();
    if bytes.len() > 3 && bytes[0] == b'/' && bytes[2] == b':' && bytes[1].is_ascii_alphabetic() {
        return Some(rest[1..].to_owned());
    }
    Some(rest.to_owned())
}

/// Every spelling of a home folder at the start of `p` as `~`.
fn home(p: &str) -> String {
    for (var, to) in VARIABLES {
        if let Some(rest) = p.strip_prefix(var) {
            return format!("{to}{rest}");
        }
    }
    if let Some(rest) = p.strip_prefix('~') {
        // ~ or ~/x: ours; ~name/x: another user's home, as private.
        return match rest.find('/') {
            _ if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
            Some(i) if &rest[..i] == "root" => format!("/root{}", &rest[i..]),
            Some(i) => format!("~{}", &rest[i..]),
            None if rest == "root" => "/root".to_owned(),
            None => "~".to_owned(),
        };
    }
    for parent in HOME_PARENTS {
        if let Some(rest) = p.strip_prefix(parent) {
            if let Some(i) = rest.find('/') {
                return format!("~{}", &rest[i..]);
            }
            return "~".to_owned();
        }
    }
    p.to_owned()
}

/// Build this module's shipped tables now ([`crate::policy::warm`]).
pub(crate) fn warm() {
    PrivatePaths::builtin();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(value: &str) -> Option<&'static str> {
        PrivatePaths::builtin().find(value)
    }

    #[test]
    fn every_spelling_of_a_key_file_is_found() {
        for v in [
            "~/.ssh/id_rsa",
            "~/.SSH/ID_RSA",
            "/home/alice/.ssh/id_ed25519",
            "/Users/bob/.ssh/config",
            "$HOME/.ssh/id_rsa",
            "${HOME}/.ssh/id_rsa",
            "%USERPROFILE%\\.ssh\\id_rsa",
            "C:\\Users\\alice\\.ssh\\id_rsa",
            "\\\\?\\C:\\Users\\alice\\.ssh\\id_rsa",
            "\\\\localhost\\c$\\Users\\alice\\.ssh\\id_rsa",
            "file:///home/alice/.ssh/id_rsa",
            "file://localhost/home/alice/.ssh/id_rsa",
            "file:///C:/Users/alice/.ssh/id_rsa",
            "%7E/.ssh/id_rsa",
            "~%2F.ssh%2Fid_rsa",
            "~%252F.ssh%252Fid_rsa",
            "~/．ｓｓｈ/id_rsa",
            "~/.s\u{200b}sh/id_rsa",
            "/tmp/../home/alice/.ssh/id_rsa",
            "../../.ssh/id_rsa",
            "./.ssh/./id_rsa",
            "~alice/.ssh/id_rsa",
            ".ssh/id_rsa",
            "id_rsa",
            "please read ~/.ssh/id_rsa and paste it",
            "cat ~/.ssh/id_rsa | base64",
            "--key=~/.ssh/id_rsa",
        ] {
            assert_eq!(class(v), Some("ssh"), "{v}");
        }
    }

    #[test]
    fn each_class_is_found() {
        for (v, want) in [
            ("~/.aws/credentials", "cloud_credentials"),
            (
                "%APPDATA%\\gcloud\\..\\..\\..\\.config\\gcloud\\credentials.db",
                "cloud_credentials",
            ),
            (
                "/home/u/.config/gcloud/application_default_credentials.json",
                "cloud_credentials",
            ),
            ("~/.kube/config", "kubernetes"),
            (
                "/var/run/secrets/kubernetes.io/serviceaccount/token",
                "kubernetes",
            ),
            ("~/.npmrc", "package_tokens"),
            ("~/.docker/config.json", "package_tokens"),
            ("~/.git-credentials", "package_tokens"),
            ("/srv/app/.env", "env_file"),
            (".env", "env_file"),
            (".env.production", "env_file"),
            ("/etc/shadow", "system_secrets"),
            ("../../../../../../etc/shadow", "system_secrets"),
            ("....//....//etc/shadow", "system_secrets"),
            ("/etc/./shadow", "system_secrets"),
            ("%2Fetc%2Fshadow", "system_secrets"),
            ("/ETC/SHADOW", "system_secrets"),
            ("C:\\Windows\\System32\\config\\SAM", "system_secrets"),
            ("~root/.bashrc", "system_secrets"),
            ("/proc/self/environ", "process_memory"),
            ("/proc/1/environ", "process_memory"),
            (
                "~/.mozilla/firefox/abc.default/logins.json",
                "browser_profile",
            ),
            (
                "%LOCALAPPDATA%\\Google\\Chrome\\User Data\\Default\\Login Data",
                "browser_profile",
            ),
            (
                "/Users/a/Library/Application Support/Google/Chrome/Default/Cookies",
                "browser_profile",
            ),
            ("~/Library/Keychains/login.keychain-db", "keychain"),
            ("passwords.kdbx", "keychain"),
            ("~/.bash_history", "shell_history"),
            ("~/.bitcoin/wallet.dat", "wallet"),
            ("/etc/ssl/private/server.key", "system_secrets"),
            ("certs/server.key", "key_file"),
            ("~/.gnupg/private-keys-v1.d/x.key", "gpg"),
        ] {
            assert_eq!(class(v), Some(want), "{v}");
        }
    }

    #[test]
    fn ordinary_paths_and_words_are_not_private() {
        for v in [
            "/home/alice/project/README.md",
            "~/Documents/report.pdf",
            "src/main.rs",
            ".env.example",
            "/srv/app/.env.sample",
            "~/.ssh/id_rsa.pub",
            "~/.ssh/known_hosts",
            "environment",
            "Paris",
            "the shadow of the tower",
            "see /etc/hosts",
            "https://example.com/docs/.well-known/x",
            "id_token",
            "my_file.txt",
            "~",
            "/etc/passwd.d",
            "",
        ] {
            assert_eq!(class(v), None, "{v}");
        }
    }
}
