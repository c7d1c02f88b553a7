//! Paged listings: `GET /v1/resources` page by page from the store (a
//! cursor and a limit, filters by type, target and drift), the operations
//! of `GET /v1/commands/{id}` and the commands of `GET /v1/commands` in
//! pages. Every list is paged by default; `all=true` asks for everything,
//! refused (400, `too_many_items`) past the server's `--max-list-items`.

use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use crate::state::{OperationPage, OperationRecord};

/// The page size when a request names none.
pub const DEFAULT_LIMIT: u32 = 1000;
/// Largest `limit` of a page.
pub const MAX_LIMIT: u32 = 10_000;
/// The default hard limit of an unpaged list (`all=true`): more items than
/// this are refused with [`too_many`] (`--max-list-items`).
pub const DEFAULT_MAX_LIST_ITEMS: usize = 20_000;

/// What a list request asks for: one page, or everything (`all=true`), the
/// latter up to the server's hard limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// At most this many, and a `next_cursor` when more follow.
    Page(u32),
    /// Every item (after the cursor, if any), refused beyond the cap.
    All,
}

/// A 400 with a typed `code`: `bad_limit`, `bad_cursor`, `bad_all`.
fn refused(code: &str, message: String) -> ApiError {
    ApiError::bad_request(message).with("code", json!(code))
}

/// The 400 of an unpaged list longer than `cap`: `code` `too_many_items`,
/// with the cap and how to page instead.
pub fn too_many(cap: usize) -> ApiError {
    refused(
        "too_many_items",
        format!(
            "the list has more than {cap} items, the most `all=true` returns; page through it with `limit` and `cursor`"
        ),
    )
    .with("max_items", json!(cap))
}

/// The span asked for by the query parameters `limit` and `all` (as text,
/// so that a malformed one gets the same typed error), checked: pages of
/// [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`].
pub fn span(limit: Option<&str>, all: Option<&str>) -> Result<Span, ApiError> {
    span_within(limit, all, DEFAULT_LIMIT, MAX_LIMIT)
}

/// [`span`] with pages of `default`, at most `max`.
pub fn span_within(
    limit: Option<&str>,
    all: Option<&str>,
    default: u32,
    max: u32,
) -> Result<Span, ApiError> {
    let all = match all {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(refused(
                "bad_all",
                format!("`all` must be `true` or `false`, not `{}`", clip(other)),
            ))
        }
    };
    let limit = match limit {
        None => None,
        Some(text) => match text.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Some(n),
            _ => {
                return Err(refused(
                    "bad_limit",
                    format!("`limit` must be between 1 and {max}, not `{}`", clip(text)),
                )
                .with("max_limit", json!(max)))
            }
        },
    };
    match (all, limit) {
        (true, Some(_)) => Err(refused(
            "bad_limit",
            "`limit` and `all=true` exclude each other".to_owned(),
        )),
        (true, None) => Ok(Span::All),
        (false, l) => Ok(Span::Page(l.unwrap_or(default))),
    }
}

/// At most 64 characters of what a client sent, for an error message.
fn clip(text: &str) -> String {
    text.chars().take(64).collect()
}

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
    /// Page size ([`DEFAULT_LIMIT`] without it).
    #[serde(default)]
    pub limit: Option<String>,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    pub cursor: Option<String>,
    /// `true`: every resource at once (after `cursor`), up to the cap.
    #[serde(default)]
    pub all: Option<String>,
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

/// The cursor after command `id` in a newest-first listing.
pub fn id_cursor(id: &str) -> String {
    hex(id.as_bytes())
}

/// The command id a cursor of [`id_cursor`] names.
pub fn parse_id_cursor(cursor: &str) -> Result<String, ApiError> {
    match cursor.len() <= 512 {
        true => unhex(cursor).filter(|id| !id.is_empty()),
        false => None,
    }
    .ok_or_else(|| {
        refused(
            "bad_cursor",
            "`cursor` is not one this server gave".to_owned(),
        )
    })
}

/// The number (a record id) a cursor of [`id_cursor`] names.
pub fn parse_number_cursor(cursor: &str) -> Result<i64, ApiError> {
    parse_id_cursor(cursor)?.parse().map_err(|_| {
        refused(
            "bad_cursor",
            "`cursor` is not one this server gave".to_owned(),
        )
    })
}

/// The pair a cursor names.
pub fn parse_pair_cursor(cursor: &str) -> Result<(String, String), ApiError> {
    let bad = || {
        refused(
            "bad_cursor",
            "`cursor` is not one this server gave".to_owned(),
        )
    };
    if cursor.len() > 4096 {
        return Err(bad());
    }
    let (stack, label) = cursor.split_once('.').ok_or_else(bad)?;
    Ok((unhex(stack).ok_or_else(bad)?, unhex(label).ok_or_else(bad)?))
}

/// `GET /v1/commands/{id}` query: its operations in pages.
#[derive(Deserialize, Default)]
pub struct OperationsQuery {
    /// Operations per page ([`DEFAULT_LIMIT`] without it).
    #[serde(default)]
    pub limit: Option<String>,
    /// `true`: every operation at once (after `cursor`), up to the cap.
    #[serde(default)]
    pub all: Option<String>,
    /// Where the previous page ended (its `next_cursor`).
    #[serde(default)]
    pub cursor: Option<String>,
    /// Only operations with this status.
    #[serde(default)]
    pub status: Option<String>,
}

impl OperationsQuery {
    /// The store's page for this query, checked: one operation more than
    /// the page holds (or than `cap`, the most `all=true` returns), so
    /// that [`next_operations`] knows whether more follow. The store reads
    /// only that, not the whole command.
    pub fn page(&self, cap: usize) -> Result<(Span, OperationPage), ApiError> {
        let span = span(self.limit.as_deref(), self.all.as_deref())?;
        let size = match span {
            Span::Page(n) => n,
            Span::All => u32::try_from(cap).unwrap_or(u32::MAX - 1),
        };
        Ok((
            span,
            OperationPage {
                status: self.status.clone(),
                after: self.cursor.as_deref().map(parse_pair_cursor).transpose()?,
                limit: Some(size.saturating_add(1)),
            },
        ))
    }

    /// After `cursor`, one page of the largest size (how the dashboard
    /// reads every operation, page after page).
    pub fn largest_after(cursor: Option<String>) -> Self {
        OperationsQuery {
            limit: Some(MAX_LIMIT.to_string()),
            cursor,
            ..Default::default()
        }
    }
}

/// Cuts the operations read for `page` to the page, returning the
/// `next_cursor` when more follow; for `all=true`, refuses more than `cap`.
pub fn next_operations(
    span: Span,
    page: &OperationPage,
    operations: &mut Vec<OperationRecord>,
    cap: usize,
) -> Result<Option<String>, ApiError> {
    let Some(size) = page.limit.map(|l| l as usize - 1) else {
        return Ok(None);
    };
    if operations.len() <= size {
        return Ok(None);
    }
    if span == Span::All {
        return Err(too_many(cap));
    }
    operations.truncate(size);
    Ok(operations
        .last()
        .map(|last| pair_cursor(&last.label, &last.operation)))
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
            cursor: Some(pair_cursor("web", "create")),
            status: Some("failed".into()),
            ..Default::default()
        };
        let (span, page) = q.page(50).unwrap();
        assert_eq!(span, Span::Page(DEFAULT_LIMIT));
        assert_eq!(page.after, Some(("web".into(), "create".into())));
        assert_eq!(
            (page.limit, page.status.as_deref()),
            (Some(1001), Some("failed"))
        );
        let all = OperationsQuery {
            all: Some("true".into()),
            ..Default::default()
        };
        let (span, page) = all.page(50).unwrap();
        assert_eq!((span, page.limit), (Span::All, Some(51)));
        for (limit, cursor, all, code) in [
            (Some("0"), None, None, "bad_limit"),
            (Some("10001"), None, None, "bad_limit"),
            (Some("-1"), None, None, "bad_limit"),
            (Some("ten"), None, None, "bad_limit"),
            (Some("10"), None, Some("true"), "bad_limit"),
            (None, None, Some("yes"), "bad_all"),
            (None, Some("7"), None, "bad_cursor"),
        ] {
            let q = OperationsQuery {
                limit: limit.map(str::to_owned),
                cursor: cursor.map(str::to_owned),
                all: all.map(str::to_owned),
                status: None,
            };
            let e = q.page(50).expect_err("refused");
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
            assert_eq!(e.extra["code"], code, "{limit:?} {cursor:?} {all:?}");
        }
    }

    #[test]
    fn an_unpaged_list_past_the_cap_is_refused_and_a_page_past_it_is_cut() {
        let op = |label: &str| OperationRecord {
            label: label.to_owned(),
            operation: "create".to_owned(),
            ..Default::default()
        };
        let all = OperationsQuery {
            all: Some("true".into()),
            ..Default::default()
        };
        let (span, page) = all.page(2).unwrap();
        let mut ops = vec![op("a"), op("b")];
        assert_eq!(next_operations(span, &page, &mut ops, 2).unwrap(), None);
        let mut ops = vec![op("a"), op("b"), op("c")];
        let e = next_operations(span, &page, &mut ops, 2).unwrap_err();
        assert_eq!(
            (e.extra["code"].clone(), e.extra["max_items"].clone()),
            (json!("too_many_items"), json!(2))
        );
        let q = OperationsQuery {
            limit: Some("2".into()),
            ..Default::default()
        };
        let (span, page) = q.page(2).unwrap();
        let mut ops = vec![op("a"), op("b"), op("c")];
        let next = next_operations(span, &page, &mut ops, 2).unwrap();
        assert_eq!(next, Some(pair_cursor("b", "create")));
        assert_eq!(ops.len(), 2);
    }
}
