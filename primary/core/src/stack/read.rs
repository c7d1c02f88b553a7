//! Reading a document's text into its serde shape: the one path every
//! stack document, module file and list or map parameter takes.
//!
//! A document is YAML, held to [`Limits`] before anything is built
//! ([`limits::check`]), then deserialized by `serde_norway`. JSON is YAML
//! too, but a generated document of 100,000 resources is usually JSON, and
//! the YAML path reads it at about 15 MB/s in two passes; so a document
//! that is plainly JSON ([`json::plain`]) is read by `serde_json` instead, in
//! one pass, four to five times faster at that size; other YAML is read
//! in one pass ([`super::one_pass`]) over the events of a line scanner for
//! plain block YAML ([`super::block_scan`]; a fifth of the time at that
//! size) or, where it steps aside, over saphyr's (about half). Each fast path gives the same value the YAML path would, or
//! steps aside: any doubt (a token the readers read otherwise, a limit
//! possibly passed, an error) sends the text down the YAML path, which
//! then gives the answer and the error exactly as before.

use serde::de::DeserializeOwned;

use super::error::{Position, Problem};
use super::limits::{self, Limits, Refusal};

/// Why a document could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// A limit was passed, or the text is not YAML (from the limits' scan).
    Refused(Refusal),
    /// The YAML does not have the expected shape.
    Shape(serde_norway::Error),
}

impl ReadError {
    /// The line, the place on it where known, and the problem, as a
    /// [`StackError`](super::StackError) reports them.
    pub(super) fn located(self) -> (Option<usize>, Option<Box<Position>>, Problem) {
        match self {
            ReadError::Refused(Refusal::Limit { line, limit }) => {
                (line, None, Problem::TooLarge(limit))
            }
            ReadError::Refused(Refusal::Syntax { line, message }) => {
                (Some(line), None, Problem::Syntax(message))
            }
            ReadError::Shape(e) => (
                e.location().map(|l| l.line()),
                e.location().map(|l| {
                    Box::new(Position {
                        column: l.column(),
                        span: l.index()..l.index(),
                    })
                }),
                Problem::Syntax(e.to_string()),
            ),
        }
    }
}

/// `text` as a `T`: through `serde_json` when it is plainly JSON within
/// `limits`, else through the limits' scan and `serde_norway`.
pub(super) fn read<T: DeserializeOwned>(text: &str, limits: &Limits) -> Result<T, ReadError> {
    if let Some(value) = read_json(text, limits) {
        return Ok(value);
    }
    match super::one_pass::read(text, limits) {
        Some(value) => Ok(value),
        None => read_yaml(text, limits),
    }
}

/// The fast path alone: `None` where it steps aside.
fn read_json<T: DeserializeOwned>(text: &str, limits: &Limits) -> Option<T> {
    json::plain(text.as_bytes(), limits)
        .then(|| serde_json::from_str(text).ok())
        .flatten()
}

/// The YAML path alone.
pub(super) fn read_yaml<T: DeserializeOwned>(text: &str, limits: &Limits) -> Result<T, ReadError> {
    limits::check(text, limits).map_err(ReadError::Refused)?;
    serde_norway::from_str(text).map_err(ReadError::Shape)
}

/// Whether the character starting `rest` is one YAML refuses in a document
/// (C1 controls, U+FEFF, U+FFFE, U+FFFF) or that YAML 1.1 folds as a line
/// break and 1.2 does not (NEL, U+2028, U+2029): the fast paths step aside
/// for them.
pub(super) fn odd_char(rest: &[u8]) -> bool {
    matches!(
        rest,
        [0xc2, 0x80..=0x9f, ..]
            | [0xe2, 0x80, 0xa8 | 0xa9, ..]
            | [0xef, 0xbb, 0xbf, ..]
            | [0xef, 0xbf, 0xbe | 0xbf, ..]
    )
}

/// Whether `escape` (what follows a backslash in a double-quoted string)
/// names half of a UTF-16 surrogate pair (`\uD800`–`\uDFFF`,
/// `\U0000D800`–`\U0000DFFF`), which the YAML path refuses.
pub(super) fn surrogate_escape(escape: &[u8]) -> bool {
    let digits = match escape {
        [b'u', rest @ ..] => rest,
        [b'U', b'0', b'0', b'0', b'0', rest @ ..] => rest,
        _ => return false,
    };
    matches!(
        digits,
        [b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F', ..]
    )
}

pub(super) mod json {
    //! Whether a text is JSON that `serde_json` and the YAML path read alike.

    use super::Limits;

    /// Whether `bytes` look like a JSON object or array that passes none
    /// of `limits` and holds nothing YAML reads differently from JSON.
    ///
    /// One linear pass, no allocation. It does not check that the text is
    /// valid JSON (`serde_json` does); it only has to be right when it is.
    /// Counts are upper bounds (a string's escapes count as their raw
    /// bytes), so `true` means the YAML limits' scan would pass too. Steps
    /// aside (`false`) for what the two read differently:
    ///
    /// - an integer that does not fit 64 bits, or `-0` (YAML: an error, the
    ///   integer 0; JSON: a float);
    /// - a surrogate pair escape (`\ud83d\ude00`: YAML refuses it);
    /// - characters YAML does not allow in a document (DEL, C1 controls,
    ///   U+FEFF, U+FFFE, U+FFFF), those it reads as line breaks (NEL,
    ///   U+2028, U+2029), and tabs;
    /// - a key longer than YAML's 1,024-character implicit keys, or one
    ///   whose `:` is on another line.
    pub(crate) fn plain(bytes: &[u8], limits: &Limits) -> bool {
        if bytes.len() > limits.max_document_bytes {
            return false;
        }
        let first = bytes
            .iter()
            .find(|b| !matches!(b, b' ' | b'\n' | b'\r'))
            .copied();
        if !matches!(first, Some(b'{' | b'[')) {
            return false;
        }
        let mut depth = 0usize;
        let mut nodes = 0u64;
        let mut scalar_bytes = 0u64;
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'{' | b'[' => {
                    depth += 1;
                    nodes += 1;
                    if depth > limits.max_depth {
                        return false;
                    }
                    i += 1;
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    i += 1;
                }
                b' ' | b'\n' | b'\r' | b',' | b':' => i += 1,
                b'"' => {
                    let Some(end) = string_end(bytes, i + 1) else {
                        return false;
                    };
                    let len = end - i - 1;
                    nodes += 1;
                    scalar_bytes += len as u64;
                    i = end + 1;
                    // A key: YAML reads it as an implicit key.
                    let gap = bytes[i..]
                        .iter()
                        .position(|b| !matches!(b, b' ' | b'\n' | b'\r'))
                        .unwrap_or(bytes.len() - i);
                    if bytes.get(i + gap) == Some(&b':')
                        && (len + gap > 1000 || bytes[i..i + gap].contains(&b'\n'))
                    {
                        return false;
                    }
                }
                _ => {
                    let start = i;
                    while bytes
                        .get(i)
                        .is_some_and(|b| !matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\r'))
                    {
                        i += 1;
                    }
                    let token = &bytes[start..i];
                    if !plain_scalar(token) {
                        return false;
                    }
                    nodes += 1;
                    scalar_bytes += token.len() as u64;
                }
            }
        }
        nodes <= limits.max_nodes && scalar_bytes <= limits.max_scalar_bytes
    }

    /// The index of the quote closing the string whose text starts at
    /// `from`, or `None` where it holds something YAML reads otherwise.
    fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
        let mut i = from;
        loop {
            match *bytes.get(i)? {
                b'"' => return Some(i),
                b'\\' => {
                    if super::surrogate_escape(&bytes[i + 1..]) {
                        return None;
                    }
                    i += 2;
                }
                b'\t' | 0x7f => return None,
                _ if super::odd_char(&bytes[i..]) => return None,
                _ => i += 1,
            }
        }
    }

    /// Whether a bare token (a number, `true`, `false`, `null`) reads the
    /// same in YAML as in JSON.
    fn plain_scalar(token: &[u8]) -> bool {
        match token {
            b"true" | b"false" | b"null" => true,
            [b'-' | b'0'..=b'9', ..] => {
                let integer = !token.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
                let digits = token.iter().filter(|b| b.is_ascii_digit()).count();
                !integer || (token != b"-0" && digits <= 18)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_schema::Value;
    use proptest::prelude::*;

    fn both(text: &str) -> (Option<Value>, Result<Value, String>) {
        let limits = Limits::default();
        let yaml = read_yaml::<Value>(text, &limits).map_err(|e| format!("{e:?}"));
        (read_json(text, &limits), yaml)
    }

    /// Where the fast path reads a value, the YAML path reads the same one.
    fn agrees(text: &str) {
        if let (Some(fast), yaml) = both(text) {
            assert_eq!(Ok(fast), yaml, "{text}");
        }
    }

    #[test]
    fn a_generated_document_takes_the_fast_path_and_reads_as_yaml_does() {
        let text = r#"{"stack": "s", "resources": [{"label": "a", "properties": {"n": 1, "f": -1.5e-7, "s": "x\ny\u00e9\"", "b": true, "z": null, "l": []}}]}"#;
        let (fast, yaml) = both(text);
        assert!(fast.is_some(), "the fast path stepped aside");
        assert_eq!(fast.ok_or(()), yaml.map_err(|_| ()));
    }

    #[test]
    fn what_yaml_reads_otherwise_goes_down_the_yaml_path() {
        for text in [
            "[-0]",
            "[12345678901234567890123]",
            "[18446744073709551616]",
            "[-9223372036854775809]",
            "[1234567890123456789]",
            r#"["\ud83d\ude00"]"#,
            r#"["\uD83D\uDE00"]"#,
            "[\"a\tb\"]",
            "[\t1]",
            "[\"\u{7f}\"]",
            "[\"\u{85}x\u{80}\"]",
            "[\"\u{85}\"]",
            "[\"a\u{2028}b\u{2029}\"]",
            "[\"\u{feff}\"]",
            "[\"\u{ffff}\"]",
            "{\"a\"\n: 1}",
            "a: 1",
            "# a comment\n{\"a\": 1}",
            "{\"a\": 1} # a comment",
            "{a: 1}",
        ] {
            let fast = read_json::<Value>(text, &Limits::default());
            assert_eq!(fast, None, "{text:?} took the fast path");
        }
        let key = format!("{{\"{}\": 1}}", "k".repeat(1001));
        assert!(!json::plain(key.as_bytes(), &Limits::default()));
        let spaced = format!("{{\"k\"{}: 1}}", " ".repeat(1001));
        assert!(!json::plain(spaced.as_bytes(), &Limits::default()));
        let value = format!("{{\"k\": \"{}\"}}", "v".repeat(100_000));
        assert!(json::plain(value.as_bytes(), &Limits::default()));
        agrees(&value);
    }

    #[test]
    fn a_document_past_a_limit_is_refused_by_the_yaml_path_as_before() {
        let limits = Limits {
            max_depth: 8,
            max_nodes: 50,
            ..Limits::default()
        };
        let deep = format!("{}{}", "[".repeat(9), "]".repeat(9));
        let wide = format!("[{}0]", "0,".repeat(50));
        for text in [deep, wide] {
            assert!(!json::plain(text.as_bytes(), &limits), "{text}");
            match read::<Value>(&text, &limits) {
                Err(ReadError::Refused(Refusal::Limit { .. })) => {}
                other => panic!("{text}: {other:?}"),
            }
        }
        let long = "[0]".to_owned();
        let tight = Limits {
            max_document_bytes: 2,
            ..Limits::default()
        };
        assert!(!json::plain(long.as_bytes(), &tight));
    }

    fn value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            "\\PC{0,12}".prop_map(serde_json::Value::String),
            any::<String>().prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::btree_map("\\PC{0,8}", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any text at all: the scan ends without panicking, and what it
        /// lets through reads as YAML reads it.
        #[test]
        fn any_text_is_scanned_safely(
            body in prop::collection::vec(
                prop_oneof![
                    Just(b'"'), Just(b'\\'), Just(b':'), Just(b'{'), Just(b'}'),
                    Just(b'['), Just(b']'), Just(b','), Just(b'\n'), Just(b'-'),
                    Just(b'0'), Just(b'u'), Just(b'd'), Just(b'8'), any::<u8>(),
                ],
                0..64,
            ),
        ) {
            let mut bytes = vec![b'{'];
            bytes.extend(body);
            let _ = json::plain(&bytes, &Limits::default());
            if let Ok(text) = std::str::from_utf8(&bytes) {
                agrees(text);
            }
        }

        #[test]
        fn json_reads_as_yaml_does(v in value(), pretty in any::<bool>()) {
            let doc = serde_json::json!({ "v": v });
            let text = if pretty {
                serde_json::to_string_pretty(&doc).unwrap()
            } else {
                serde_json::to_string(&doc).unwrap()
            };
            agrees(&text);
        }
    }
}
