//! Shared text analysis for the policy's detectors (secret-asking fields,
//! prompt injection).
//!
//! Both detectors compare what a person or a model reads with word lists that
//! ship as data. An upstream that wants to slip past them spells the words
//! differently: `P4ssw0rd`, `pa$$word`, `ｐａｓｓｗｏｒｄ`, `pаsswоrd` (Cyrillic
//! letters), `pass\u{200B}word`, `userpassword`, `APIKey`, `パスワードを入力`.
//! [`normalize`] turns every such spelling into the same lowercase words;
//! [`lexicon`] holds the known words that decide how a joined word or a run of
//! CJK characters is split, and which look-alike reading of a word counts;
//! [`phrases`] finds word-list phrases among the words in one pass
//! (Aho-Corasick).
//!
//! The pipeline, in order:
//!
//! 1. **Unicode NFKC** (only for non-ASCII text): fullwidth and other
//!    compatibility forms become their plain letters and digits.
//! 2. **Invisible characters** (format characters such as zero-width space and
//!    soft hyphen, combining and enclosing marks, Hangul fillers) are dropped
//!    without splitting the word they sit in.
//! 3. **Word splitting** on anything that is not a letter or digit, on
//!    camelCase / PascalCase / acronym boundaries (`APIKey` → `api key`), and
//!    between CJK (Han, kana, Hangul) and other scripts. Sentence punctuation
//!    starts a new *clause*, a comma a new *phrase*.
//! 4. **Case folding** (lowercase, `ß` → `ss`) and **accent folding** of
//!    Latin, Greek and Cyrillic letters (`contraseña` → `contrasena`,
//!    `hasło` → `haslo`, `ё` → `е`); every decimal digit (Arabic-Indic,
//!    Devanagari, …) becomes its ASCII digit.
//! 5. **Readings checked against the lexicon** (only for words the lexicon
//!    does not know): the confusable skeleton of a word with non-ASCII letters
//!    (`pаsswоrd` → `password`), the letter reading of digits and symbols
//!    (`p4ssw0rd`, `pa$$word`, `@pi`), a dictionary split of a joined word
//!    (`userpassword` → `user password`, `newpin` → `new pin`), and a
//!    longest-match split of a CJK run (`请输入您的密码` → `请 输入 您的 密码`).
//!    A reading is taken only when it yields a known word, so ordinary words
//!    (`keyboard`, `spinner`, `2fa`) stay as they are.

pub(crate) mod cues;
pub(crate) mod lexicon;
pub(crate) mod normalize;
pub(crate) mod phrases;

pub(crate) use cues::CueSet;
pub(crate) use lexicon::{common_words, Lexicon, Splitting};
pub use normalize::fold_value;
pub(crate) use normalize::{is_cjk, name_words, Normalised};
pub(crate) use phrases::{parse_phrase, PhraseSet, DISGUISED};
