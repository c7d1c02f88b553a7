//! `moved:` — a resource re-addressed (a label renamed, moved into a
//! module or a `for_each` instance) keeps its record under the new
//! address, with no plugin call. Which of a document's moves apply to
//! what is recorded, and the records once they have.

use std::collections::{BTreeMap, BTreeSet};

use crate::record::StoredResource;
use orrery_stack::Stack;

/// One move to make in the store: the record at `from` goes to `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// The recorded address.
    pub from: String,
    /// The address it takes.
    pub to: String,
}

/// Why the document's moves cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("moved: `{from}` -> `{to}`: {why}")]
pub struct MoveError {
    /// The move's `from`.
    pub from: String,
    /// Its `to`.
    pub to: String,
    /// Its line in the document.
    pub line: Option<usize>,
    /// What is wrong.
    pub why: String,
}

/// The moves `stack` declares that apply to `stored` (the stack's records),
/// in order, so that chains (`a` → `b`, then `b` → `c`) work. A move whose
/// `from` is not recorded is skipped: it was made already, or the resource
/// was never applied. A `to` that is recorded already, or that the
/// document does not declare, is an error.
pub fn moves(stack: &Stack, stored: &[StoredResource]) -> Result<Vec<Move>, MoveError> {
    let mut recorded: BTreeSet<&str> = stored
        .iter()
        .filter(|s| s.managed)
        .map(|s| s.label.as_str())
        .collect();
    let mut out = Vec::new();
    for m in &stack.moved {
        let fail = |why: String| MoveError {
            from: m.from.clone(),
            to: m.to.clone(),
            line: m.line,
            why,
        };
        if m.from == m.to {
            return Err(fail("`from` and `to` are the same".into()));
        }
        if stack.resource(&m.to).is_none() && !stack.moved.iter().any(|n| n.from == m.to) {
            return Err(fail(format!(
                "`{}` is not a resource of the document",
                m.to
            )));
        }
        if !recorded.contains(m.from.as_str()) {
            continue;
        }
        if recorded.contains(m.to.as_str()) {
            return Err(fail(format!(
                "`{}` is recorded already: a move cannot overwrite a resource",
                m.to
            )));
        }
        recorded.remove(m.from.as_str());
        recorded.insert(&m.to);
        out.push(Move {
            from: m.from.clone(),
            to: m.to.clone(),
        });
    }
    Ok(out)
}

/// `stored` with `moves` made: each moved record under its new address,
/// and every dependency on it (kept for the order of deletes) renamed.
pub fn moved_records(stored: &[StoredResource], moves: &[Move]) -> Vec<StoredResource> {
    if moves.is_empty() {
        return stored.to_vec();
    }
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    for m in moves {
        // A chain's later step renames what an earlier one produced.
        for to in renamed.values_mut() {
            if *to == m.from {
                *to = m.to.clone();
            }
        }
        if !renamed.values().any(|to| *to == m.to) {
            renamed.insert(m.from.clone(), m.to.clone());
        }
    }
    let new_name = |label: &str| renamed.get(label).cloned();
    stored
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if s.managed {
                if let Some(to) = new_name(&s.label) {
                    s.label = to;
                }
                for d in &mut s.deps {
                    if let Some(to) = new_name(d) {
                        *d = to;
                    }
                }
            }
            s
        })
        .collect()
}

/// The records that change when `moves` are made, for the store to write
/// in one transaction: the labels whose records go, and the records to
/// put (under their new addresses, or with renamed dependencies).
pub fn move_writes(
    stored: &[StoredResource],
    moves: &[Move],
) -> (Vec<String>, Vec<StoredResource>) {
    let after = moved_records(stored, moves);
    let kept: BTreeSet<&str> = after.iter().map(|s| s.label.as_str()).collect();
    let removed = stored
        .iter()
        .filter(|s| s.managed && !kept.contains(s.label.as_str()))
        .map(|s| s.label.clone())
        .collect();
    let put = after
        .iter()
        .zip(stored)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.clone())
        .collect();
    (removed, put)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support as ts;
    use orrery_stack::MoveDecl;

    fn record(label: &str, deps: &[&str]) -> StoredResource {
        StoredResource {
            stack: "s".into(),
            label: label.into(),
            resource_type: "Dir".into(),
            target: "t".into(),
            plugin: "p".into(),
            native_id: format!("id-{label}"),
            properties: Default::default(),
            secret_hashes: Default::default(),
            deps: deps.iter().map(|d| (*d).to_owned()).collect(),
            managed: true,
            version: 1,
        }
    }

    fn stack(labels: &[&str], moved: &[(&str, &str)]) -> Stack {
        let mut b = ts::stack();
        for l in labels {
            b = b.resource_on(l, "Dir", "t", &[]);
        }
        let mut s = b.build();
        s.moved = moved.iter().map(|(f, t)| MoveDecl::new(f, t)).collect();
        s
    }

    #[test]
    fn a_rename_moves_the_record_and_what_depends_on_it() {
        let stored = [record("old", &[]), record("user", &["old"])];
        let s = stack(&["new", "user"], &[("old", "new")]);
        let m = moves(&s, &stored).unwrap();
        assert_eq!(
            m,
            [Move {
                from: "old".into(),
                to: "new".into()
            }]
        );
        let after = moved_records(&stored, &m);
        assert_eq!(after[0].label, "new");
        assert_eq!(after[0].native_id, "id-old", "the same resource");
        assert_eq!(after[1].deps, ["new"]);
        let (removed, put) = move_writes(&stored, &m);
        assert_eq!(removed, ["old"]);
        assert_eq!(put.len(), 2);
    }

    #[test]
    fn chains_work_and_a_made_move_is_skipped() {
        let stored = [record("a", &[])];
        let s = stack(&["c"], &[("a", "b"), ("b", "c")]);
        let m = moves(&s, &stored).unwrap();
        assert_eq!(m.len(), 2);
        let after = moved_records(&stored, &m);
        assert_eq!(after[0].label, "c");
        let (removed, put) = move_writes(&stored, &m);
        assert_eq!(
            (removed, put[0].label.as_str()),
            (vec!["a".to_owned()], "c")
        );
        // Once made, the same document moves nothing.
        assert!(moves(&s, &after).unwrap().is_empty());
    }

    #[test]
    fn a_taken_or_undeclared_to_is_an_error() {
        let stored = [record("a", &[]), record("b", &[])];
        let e = moves(&stack(&["b"], &[("a", "b")]), &stored).unwrap_err();
        assert_eq!(
            e.to_string(),
            "moved: `a` -> `b`: `b` is recorded already: a move cannot overwrite a resource"
        );
        let e = moves(&stack(&["b"], &[("a", "ghost")]), &stored).unwrap_err();
        assert_eq!(
            e.to_string(),
            "moved: `a` -> `ghost`: `ghost` is not a resource of the document"
        );
    }
}
