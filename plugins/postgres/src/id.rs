//! Composite native ids: the identifying fields joined by `/`, each with
//! `%`, `/` and `,` percent-encoded, lists joined by `,`. So
//! `Postgres::Schema` `app`/`billing` is `app/billing`, and a table grant is
//! `reader/app/table/public/orders,items`. `orrery import` takes these.

use orrery_plugin_sdk::PluginError;

fn escape(part: &str) -> String {
    part.replace('%', "%25")
        .replace('/', "%2F")
        .replace(',', "%2C")
}

fn unescape(part: &str) -> Option<String> {
    let mut out = Vec::with_capacity(part.len());
    let bytes = part.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(part.get(i + 1..i + 3)?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The id of `parts`.
pub fn encode(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| escape(p))
        .collect::<Vec<_>>()
        .join("/")
}

/// A list as one part (its items escaped, so the part stays decodable).
pub fn encode_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| escape(i))
        .collect::<Vec<_>>()
        .join(",")
}

/// The raw parts of `id` (still escaped), which must number `n`.
fn raw<'a>(id: &'a str, n: usize, ty: &str) -> Result<Vec<&'a str>, PluginError> {
    let parts: Vec<&str> = id.split('/').collect();
    if parts.len() != n {
        return Err(PluginError::invalid(format!(
            "`{id}` is not a {ty} id: expected {n} parts separated by `/` (see plugins/postgres/README.md)"
        )));
    }
    Ok(parts)
}

/// The `n` parts of `id`, decoded.
pub fn decode(id: &str, n: usize, ty: &str) -> Result<Vec<String>, PluginError> {
    raw(id, n, ty)?
        .into_iter()
        .map(|p| unescape(p).ok_or_else(|| bad_escape(id, ty)))
        .collect()
}

/// The `N` parts of `id`, decoded, to destructure.
pub fn parts<const N: usize>(id: &str, ty: &str) -> Result<[String; N], PluginError> {
    decode(id, N, ty)?
        .try_into()
        .map_err(|_| PluginError::invalid(format!("`{id}` is not a {ty} id")))
}

/// A part of an id holding a list (possibly empty).
pub fn decode_list(part: &str, id: &str, ty: &str) -> Result<Vec<String>, PluginError> {
    if part.is_empty() {
        return Ok(Vec::new());
    }
    part.split(',')
        .map(|p| unescape(p).ok_or_else(|| bad_escape(id, ty)))
        .collect()
}

/// The `n` parts of `id`, not decoded (for a part that is a list).
pub fn split<'a>(id: &'a str, n: usize, ty: &str) -> Result<Vec<&'a str>, PluginError> {
    raw(id, n, ty)
}

fn bad_escape(id: &str, ty: &str) -> PluginError {
    PluginError::invalid(format!("`{id}` is not a {ty} id: bad %-escape"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_whatever_the_names_hold() {
        let id = encode(&["a/b", "c,d%", ""]);
        assert_eq!(id, "a%2Fb/c%2Cd%25/");
        assert_eq!(decode(&id, 3, "T").unwrap(), ["a/b", "c,d%", ""]);
        let list = encode_list(&["x,y".into(), "z".into()]);
        assert_eq!(decode_list(&list, &list, "T").unwrap(), ["x,y", "z"]);
        assert!(decode("a/b", 3, "T").is_err());
        let [a, b] = parts("x%2Fy/z", "T").unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("x/y", "z"));
        assert!(parts::<2>("x/y/z", "T").is_err());
        assert!(decode("%zz", 1, "T").is_err());
    }
}
