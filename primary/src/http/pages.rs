//! Paged listings: `GET /v1/resources` page by page from the store (a
//! cursor and a limit, filters by type, target and drift), and the
//! operations of `GET /v1/commands/{id}` in pages.

use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;

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

/// The cursor after the resource `(stack, label)`.
pub fn resource_cursor(stack: &str, label: &str) -> String {
    format!("{}.{}", hex(stack.as_bytes()), hex(label.as_bytes()))
}

/// The `(stack, label)` a cursor names.
pub fn parse_resource_cursor(cursor: &str) -> Result<(String, String), ApiError> {
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

/// Cuts `command["operations"]` to the page `q` asks for, adding
/// `next_cursor` when more follow.
pub fn operations_page(command: &mut Value, q: &OperationsQuery) -> Result<(), ApiError> {
    let limit = limit(q.limit, q.cursor.is_some())?;
    let start = match &q.cursor {
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request("`cursor` is not one this server gave"))?,
        None => 0,
    };
    let Some(all) = command.get_mut("operations").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let matching: Vec<(usize, Value)> = all
        .drain(..)
        .enumerate()
        .skip(start)
        .filter(|(_, o)| q.status.as_ref().is_none_or(|s| o["status"] == s.as_str()))
        .collect();
    let take = limit.map_or(usize::MAX, |l| l as usize);
    let more = matching.len() > take;
    let page: Vec<(usize, Value)> = matching.into_iter().take(take).collect();
    let next = page.last().map(|(i, _)| i + 1);
    *all = page.into_iter().map(|(_, o)| o).collect();
    if let (true, Some(next)) = (more, next) {
        command["next_cursor"] = json!(next.to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_cursors_round_trip_and_refuse_what_the_server_did_not_give() {
        let c = resource_cursor("st.ack", "lab/el é");
        assert_eq!(
            parse_resource_cursor(&c).unwrap(),
            ("st.ack".to_owned(), "lab/el é".to_owned())
        );
        for bad in ["", "zz.00", "0.00", "6162", "ff.ff", &"a".repeat(5000)] {
            assert!(parse_resource_cursor(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn operations_come_in_pages_with_a_status_filter() {
        let ops: Vec<Value> = (0..5)
            .map(|i| json!({"label": format!("r{i}"), "status": if i % 2 == 0 { "succeeded" } else { "failed" }}))
            .collect();
        let mut command = json!({ "operations": ops.clone() });
        let q = OperationsQuery {
            limit: Some(2),
            ..Default::default()
        };
        operations_page(&mut command, &q).unwrap();
        assert_eq!(command["operations"].as_array().unwrap().len(), 2);
        assert_eq!(command["next_cursor"], "2");
        let mut command = json!({ "operations": ops });
        let q = OperationsQuery {
            limit: Some(2),
            cursor: Some("1".into()),
            status: Some("succeeded".into()),
        };
        operations_page(&mut command, &q).unwrap();
        let labels: Vec<&str> = command["operations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["label"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["r2", "r4"]);
        assert!(command.get("next_cursor").is_none());
        assert!(limit(Some(0), false).is_err() && limit(Some(MAX_LIMIT + 1), false).is_err());
    }
}
