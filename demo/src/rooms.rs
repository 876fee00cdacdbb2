//! The rooms the demo server books, and how a free-text hint names them.
//!
//! The table is data (`data/rooms.json`): each room's id, display name, seats
//! and the phrases people use for it. Two rooms share "big room" on purpose:
//! that is the seed scenario's ambiguity.

use std::sync::LazyLock;

use serde::Deserialize;

#[derive(Debug, Deserialize, PartialEq)]
pub struct Room {
    pub id: String,
    pub name: String,
    pub seats: u32,
    /// Phrases that name this room in a hint, lower case.
    names: Vec<String>,
}

static ROOMS: LazyLock<Vec<Room>> = LazyLock::new(|| {
    // Embedded at compile time and checked by a unit test, so this cannot fail at run time.
    serde_json::from_str(include_str!("../data/rooms.json")).expect("data/rooms.json is valid")
});

/// Every room, in the table's order (the order the form offers them).
pub fn all() -> &'static [Room] {
    &ROOMS
}

pub fn by_id(id: &str) -> Option<&'static Room> {
    all().iter().find(|room| room.id == id)
}

/// The rooms a hint names: none, one, or several (ambiguous).
pub fn named_by(hint: &str) -> Vec<&'static Room> {
    all()
        .iter()
        .filter(|room| room.names.iter().any(|name| contains_words(hint, name)))
        .collect()
}

/// ASCII case-insensitive search for `phrase` on word boundaries, so that
/// "snooker" does not name the nook and "studio-bb" is not Studio B.
fn contains_words(haystack: &str, phrase: &str) -> bool {
    let (hay, phrase) = (haystack.as_bytes(), phrase.as_bytes());
    if phrase.is_empty() || hay.len() < phrase.len() {
        return false;
    }
    let is_word_byte = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    (0..=hay.len() - phrase.len()).any(|start| {
        let end = start + phrase.len();
        hay[start..end].eq_ignore_ascii_case(phrase)
            && !is_word_byte(start.checked_sub(1).and_then(|i| hay.get(i)))
            && !is_word_byte(hay.get(end))
    })
}

/// What the form says about the choice, e.g. "The Atrium seats 24, Studio B 12, The Nook 4."
pub fn seats_summary() -> String {
    let parts: Vec<String> = all()
        .iter()
        .enumerate()
        .map(|(i, room)| match i {
            0 => format!("{} seats {}", room.name, room.seats),
            _ => format!("{} {}", room.name, room.seats),
        })
        .collect();
    format!("{}.", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(hint: &str) -> Vec<&'static str> {
        named_by(hint).iter().map(|room| room.id.as_str()).collect()
    }

    #[test]
    fn the_table_loads_with_unique_ids() {
        let mut seen: Vec<&str> = all().iter().map(|room| room.id.as_str()).collect();
        assert_eq!(seen, ["atrium", "studio-b", "nook"]);
        seen.dedup();
        assert_eq!(seen.len(), 3);
        assert_eq!(by_id("nook").map(|room| room.seats), Some(4));
        assert_eq!(by_id("attic"), None);
    }

    #[test]
    fn hints_name_zero_one_or_several_rooms() {
        assert_eq!(ids("the big room"), ["atrium", "studio-b"]);
        assert_eq!(ids("The BIG ROOM please"), ["atrium", "studio-b"]);
        assert_eq!(ids("the Atrium"), ["atrium"]);
        assert_eq!(ids("STUDIO B"), ["studio-b"]);
        assert_eq!(ids("studio-b, 3pm"), ["studio-b"]);
        assert_eq!(ids("the nook's corner"), ["nook"]);
        assert_eq!(ids("atrium or nook"), ["atrium", "nook"]);
        assert!(ids("snooker table").is_empty());
        assert!(ids("studio-bb").is_empty());
        assert!(ids("").is_empty());
        assert!(ids("é").is_empty());
    }

    #[test]
    fn the_summary_is_the_seed_text() {
        assert_eq!(
            seats_summary(),
            "The Atrium seats 24, Studio B 12, The Nook 4."
        );
    }
}
