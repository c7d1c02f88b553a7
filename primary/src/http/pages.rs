//! Paged listings: `GET /v1/resources` page by page from the store (a
//! cursor and a limit, filters by type, target and drift), and the
//! operations of `GET /v1/commands/{id}` in pages.

use serde::Deserialize;

use super::error::ApiError;
use crate::state::{OperationPage, OperationRecord};

/// Largest `limit` of a page.
pub const MAX_LIMIT: u32 = 10_000;

/// `GET /v1/resources` query.
#[derive(Deserialize, Default)]
pub struct ResourcesQuery {
    #[serde(default)]
    pub stack: Option<String>,
    #[serde(default, rename = "type")]
    pub resource_type: Option<String>,
    #[serde(default)]
    pub target: Option<String>,
    /// `true`: only drifted resources; `false`: only the others.
    #[serde(default)]
    pub drift: Option<bool>,
    /// Page size; without it (and without `cursor`) every resource at once.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// The page size asked for, checked.
pub fn limit(limit: Option<u32>, cursor: bool) -> Result<Option<u32>, ApiError> {
    match limit {
        Some(0) => Err(ApiError::bad_request(format!(
            "`limit` must be between 1 and {MAX_LIMIT}"
        ))),
        Some(n) if n > MAX_LIMIT => Err(ApiError::bad_request(format!(
            "`limit` must be between 1 and {MAX_LIMIT}"
        ))),
        Some(n) => Ok(Some(n)),
        None if cursor => Ok(Some(1000)),
        None => Ok(None),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The cursor after a resource `(stack, label)` or an operation `(label,
/// operation)`.
pub fn pair_cursor(stack: &str, label: &str) -> String {
    format!("{}.{}", hex(stack.as_bytes()), hex(label.as_bytes()))
}

/// The pair a cursor names.
pub fn parse_pair_cursor(cursor: &str) -> Result<(String, String), ApiError> {
    let bad = || ApiError::bad_request("`cursor` is not one this server gave");
    if cursor.len() > 4096 {
        return Err(bad());
    }
    let (stack, label) = cursor.split_once('.').ok_or_else(bad)?;
    Ok((unhex(stack).ok_or_else(bad)?, unhex(label).ok_or_else(bad)?))
}

/// `GET /v1/commands/{id}` query: its operations in pages.
#[derive(Deserialize, Default)]
pub struct OperationsQuery {
    /// Operations per page; without it every operation.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    pub cursor: Option<String>,
    /// Only operations with this status.
    #[serde(default)]
    pub status: Option<String>,
}

impl OperationsQuery {
    /// The store's page for this query, checked: one operation more than
    /// the page holds, so that [`next_operations`] knows whether more
    /// follow. The store reads only that, not the whole command.
    pub fn page(&self) -> Result<OperationPage, ApiError> {
        Ok(OperationPage {
            status: self.status.clone(),
            after: self.cursor.as_deref().map(parse_pair_cursor).transpose()?,
            limit: limit(self.limit, self.cursor.is_some())?.map(|l| l + 1),
        })
    }
}

/// Cuts the operations read for `page` to the page, returning the
/// `next_cursor` when more follow.
pub fn next_operations(
    page: &OperationPage,
    operations: &mut Vec<OperationRecord>,
) -> Option<String> {
    let size = page.limit? as usize - 1;
    if operations.len() <= size {
        return None;
    }
    operations.truncate(size);
    operations
        .last()
        .map(|last| pair_cursor(&last.label, &last.operation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_cursors_round_trip_and_refuse_what_the_server_did_not_give() {
        let c = pair_cursor("st.ack", "lab/el é");
        assert_eq!(
            parse_pair_cursor(&c).unwrap(),
            ("st.ack".to_owned(), "lab/el é".to_owned())
        );
        for bad in ["", "zz.00", "0.00", "6162", "ff.ff", &"a".repeat(5000)] {
            assert!(parse_pair_cursor(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn operation_queries_become_store_pages_and_bad_ones_are_refused() {
        let q = OperationsQuery {
            limit: None,
            cursor: Some(pair_cursor("web", "create")),
            status: Some("failed".into()),
        };
        let page = q.page().unwrap();
        assert_eq!(page.after, Some(("web".into(), "create".into())));
        assert_eq!(
            (page.limit, page.status.as_deref()),
            (Some(1001), Some("failed"))
        );
        for (limit, cursor) in [
            (Some(0), None),
            (Some(MAX_LIMIT + 1), None),
            (None, Some("7")),
        ] {
            let q = OperationsQuery {
                limit,
                cursor: cursor.map(str::to_owned),
                status: None,
            };
            assert!(q.page().is_err());
        }
    }
}
