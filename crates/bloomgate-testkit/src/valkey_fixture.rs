//! valkey-bloom's RDB fixture (`tests/fixtures/valkey-bloom-rdb`: an RDB file and each key's
//! `DUMP` payload, made by Valkey 8.0.1 + valkey-bloom 0.1.0, with its answers recorded in
//! `expected.json`) read once for the dialect's and the module's tests: what each key must
//! answer.

use std::path::Path;

/// The fixture directory.
pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/valkey-bloom-rdb"
);

/// The fixture directory as a path.
pub fn dir() -> &'static Path {
    Path::new(FIXTURE)
}

/// `expected.json`: every key's answers as valkey-bloom gave them.
pub fn fixture() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("expected.json")).expect("fixture");
    serde_json::from_str(&text).expect("json")
}

/// What one key must answer.
pub struct KeyAnswers {
    /// The items valkey-bloom added (and did not refuse): each must answer 1.
    pub present: Vec<String>,
    /// The absent probes, in order (`absent:0` …).
    pub probes: Vec<String>,
    /// The indexes of the probes that answered 1 in valkey-bloom (its false positives).
    pub false_positives: Vec<u64>,
}

fn numbers(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|n| n.as_u64().expect("a number"))
        .collect()
}

/// `key`'s answers from the whole fixture's `made_by` and the key's own entry.
pub fn key_answers(fixture: &serde_json::Value, key: &str) -> KeyAnswers {
    let expected = &fixture["keys"][key];
    let refused = numbers(&expected["items_refused"]);
    let present = (0..expected["items_added"].as_u64().expect("items_added"))
        .filter(|i| !refused.contains(i))
        .map(|i| format!("{key}:item:{i}"))
        .collect();
    let probes = (0..fixture["made_by"]["probes"].as_u64().expect("probes"))
        .map(|i| format!("absent:{i}"))
        .collect();
    KeyAnswers {
        present,
        probes,
        false_positives: numbers(&expected["answers"]["absent_answering_1"]),
    }
}

/// The indexes of the `true`s in `answers` (to compare with [`KeyAnswers::false_positives`]).
pub fn hits(answers: impl IntoIterator<Item = bool>) -> Vec<u64> {
    answers
        .into_iter()
        .enumerate()
        .filter(|(_, hit)| *hit)
        .map(|(i, _)| i as u64)
        .collect()
}
