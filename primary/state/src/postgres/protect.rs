//! `protect: true` recorded with the resource (`resources.protected`).

use std::collections::BTreeSet;

use super::Cl;
use super::{execute, query, StoreError};

pub(super) async fn set(c: &Cl, stack: &str, marks: &[(String, bool)]) -> Result<(), StoreError> {
    let (labels, protected): (Vec<&str>, Vec<bool>) =
        marks.iter().map(|(l, p)| (l.as_str(), *p)).unzip();
    // One statement: a record not named keeps its mark; the version is not
    // bumped (nothing a plugin knows changed).
    execute(
        c,
        "UPDATE resources AS r SET protected = u.protected
         FROM unnest($2::text[], $3::bool[]) AS u(label, protected)
         WHERE r.stack = $1 AND r.label = u.label AND r.protected <> u.protected",
        &[&stack, &labels, &protected],
    )
    .await?;
    Ok(())
}

pub(super) async fn labels(c: &Cl, stack: &str) -> Result<BTreeSet<String>, StoreError> {
    let rows = query(
        c,
        "SELECT label FROM resources WHERE stack = $1 AND protected",
        &[&stack],
    )
    .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
