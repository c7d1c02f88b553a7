//! What must hold at the end of every round: each desired thing exists
//! exactly once in the testbed's store and nothing else does, the
//! primary's inventory is the stack, and no command is left `running`.

use std::collections::{BTreeMap, BTreeSet};

use orrery_plugin_testbed::{store::census, ASYNC_THING};
use serde_json::Value;

use super::processes::RunDir;
use crate::common::server::Server;

/// The thing names of a round and the value each must have.
pub struct Desired {
    pub names: BTreeSet<String>,
    pub value: i64,
}

/// What a check found (all zero when the invariants hold).
#[derive(Debug, Default, Clone, Copy)]
pub struct Found {
    /// Desired things with no row.
    pub lost: u64,
    /// Rows beyond the first for one name.
    pub duplicates: u64,
    /// Rows of things the stack no longer has.
    pub leftover: u64,
}

/// Counts the store's rows against `desired`.
pub fn backend(run: &RunDir, target: &str, desired: &Desired) -> Found {
    let counted = census(&run.store()).unwrap();
    let mut found = Found::default();
    let mut rows: BTreeMap<&str, u64> = BTreeMap::new();
    for ((t, ty, name), n) in &counted.rows {
        if t == target && ty == ASYNC_THING {
            rows.insert(name, *n);
        }
    }
    for name in &desired.names {
        match rows.get(name.as_str()) {
            None => found.lost += 1,
            Some(n) => found.duplicates += n - 1,
        }
    }
    found.leftover = rows
        .keys()
        .filter(|name| !desired.names.contains(**name))
        .map(|name| rows[name])
        .sum();
    found
}

/// Every recorded resource of `stack`, following `next_cursor`.
fn inventory(primary: &Server, stack: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/resources?stack={stack}&limit=10000&cursor={c}"),
            None => format!("/v1/resources?stack={stack}&limit=10000"),
        };
        let (status, page) = primary.get(&path);
        assert_eq!(status, 200, "{page}");
        all.extend(page["resources"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return all,
        }
    }
}

/// Problems with the inventory of `stack` against `desired` (empty: equal).
pub fn inventory_problems(primary: &Server, stack: &str, desired: &Desired) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for r in inventory(primary, stack) {
        let name = r["properties"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if r["native_id"].as_str() != Some(&name) {
            problems.push(format!(
                "{}: native id {} for name {name}",
                r["label"], r["native_id"]
            ));
        }
        if r["properties"]["value"].as_i64() != Some(desired.value) {
            problems.push(format!(
                "{}: value {} (wanted {})",
                r["label"], r["properties"]["value"], desired.value
            ));
        }
        if !seen.insert(name.clone()) {
            problems.push(format!("{name} recorded twice"));
        }
    }
    for missing in desired.names.difference(&seen) {
        problems.push(format!("{missing} not in the inventory"));
    }
    for extra in seen.difference(&desired.names) {
        problems.push(format!("{extra} in the inventory but not in the stack"));
    }
    problems
}

/// The stack's commands (newest first, at most 200): (id, status,
/// operations by status).
pub fn commands(primary: &Server, stack: &str) -> Vec<(String, String, BTreeMap<String, u64>)> {
    let (status, list) = primary.get(&format!("/v1/commands?stack={stack}&limit=200"));
    assert_eq!(status, 200, "{list}");
    list["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let ops = c["operations"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default();
            (
                c["id"].as_str().unwrap_or_default().to_owned(),
                c["status"].as_str().unwrap_or_default().to_owned(),
                ops,
            )
        })
        .collect()
}
