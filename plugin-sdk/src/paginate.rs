//! Cut list results into pages with stable, key-based tokens.

/// Page size used when a request asks for 0 (plugin's choice).
pub const DEFAULT_PAGE_SIZE: usize = 100;
/// Largest page served, whatever the request asks.
pub const MAX_PAGE_SIZE: usize = 1000;

/// Returns the page of `items` after `page_token`, and the next token.
///
/// Items are ordered by `key`; the token is the last key of the previous
/// page, so a resource created or deleted between pages never shifts the
/// others (offset tokens would skip or repeat one).
pub fn paginate<T>(
    mut items: Vec<T>,
    key: impl Fn(&T) -> &str,
    page_size: u32,
    page_token: Option<&str>,
) -> (Vec<T>, Option<String>) {
    let size = match page_size as usize {
        0 => DEFAULT_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    };
    items.sort_by(|a, b| key(a).cmp(key(b)));
    let start = match page_token {
        None => 0,
        Some(token) => items.partition_point(|i| key(i) <= token),
    };
    let mut page: Vec<T> = items.into_iter().skip(start).collect();
    let more = page.len() > size;
    page.truncate(size);
    let next = if more {
        page.last().map(|i| key(i).to_owned())
    } else {
        None
    };
    (page, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cover_every_item_once() {
        let items: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
        let mut token = None;
        let mut seen = Vec::new();
        loop {
            let (page, next) = paginate(items.clone(), |s| s, 10, token.as_deref());
            seen.extend(page);
            match next {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        assert_eq!(seen, items);
    }

    #[test]
    fn deleting_between_pages_skips_nothing() {
        let items: Vec<String> = (0..6).map(|i| format!("k{i}")).collect();
        let (first, next) = paginate(items.clone(), |s| s, 3, None);
        assert_eq!(first, ["k0", "k1", "k2"]);
        let without_k1: Vec<String> = items.into_iter().filter(|s| s != "k1").collect();
        let (second, next2) = paginate(without_k1, |s| s, 3, next.as_deref());
        assert_eq!(second, ["k3", "k4", "k5"]);
        assert_eq!(next2, None);
    }
}
