//! `docs/protocol.md` is the normative protocol. This test keeps it honest:
//!
//! - its generated section equals `orrery_schema::docs::protocol_tables()`
//!   (`ORRERY_BLESS=1` rewrites the section in place);
//! - every wire struct of this crate has a `### `Name`` section whose field
//!   table lists exactly the keys the struct writes;
//! - the worked example's bytes are what the crate writes.

use std::collections::BTreeSet;
use std::fs;
use std::ops::Range;
use std::path::PathBuf;

use orrery_schema::docs::{protocol_tables, BEGIN_MARKER, END_MARKER};
use orrery_schema::*;
use serde::Serialize;

const BLESS_HINT: &str = "ORRERY_BLESS=1 cargo test -p orrery-schema --test it protocol_doc";

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol.md")
}

fn read_doc() -> String {
    let path = doc_path();
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Byte offsets of the lines that are exactly `line`.
fn line_offsets(doc: &str, line: &str) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    for l in doc.split_inclusive('\n') {
        if l.strip_suffix('\n').unwrap_or(l) == line {
            offsets.push(at);
        }
        at += l.len();
    }
    offsets
}

/// The generated section: from after the begin-marker line up to the start
/// of the end-marker line.
fn generated_range(doc: &str) -> Range<usize> {
    let begins = line_offsets(doc, BEGIN_MARKER);
    let ends = line_offsets(doc, END_MARKER);
    assert_eq!(
        (begins.len(), ends.len()),
        (1, 1),
        "docs/protocol.md must hold the line {BEGIN_MARKER:?} and the line {END_MARKER:?} \
         exactly once each"
    );
    let start = begins[0] + BEGIN_MARKER.len() + 1;
    assert!(
        start <= ends[0],
        "the end marker comes before the begin marker in docs/protocol.md"
    );
    start..ends[0]
}

#[test]
fn generated_section_matches_the_code() {
    let doc = read_doc();
    let range = generated_range(&doc);
    let want = protocol_tables();
    let have = &doc[range.clone()];
    if have == want {
        return;
    }
    if std::env::var("ORRERY_BLESS").is_ok_and(|v| v == "1") {
        let blessed = format!("{}{want}{}", &doc[..range.start], &doc[range.end..]);
        fs::write(doc_path(), blessed).expect("cannot write docs/protocol.md");
        eprintln!("rewrote the generated section of docs/protocol.md");
        return;
    }
    let first_difference = have
        .lines()
        .zip(want.lines())
        .find(|(h, w)| h != w)
        .map(|(h, w)| format!("first difference:\n  document: {h}\n  code:     {w}"))
        .unwrap_or_else(|| {
            format!(
                "the document has {} lines, the code {}",
                have.lines().count(),
                want.lines().count()
            )
        });
    panic!(
        "the generated section of docs/protocol.md is out of date ({first_difference}).\n\
         Run `{BLESS_HINT}` and review the diff."
    );
}

/// The top-level keys `value` writes.
fn written_keys<T: Serialize>(value: &T) -> BTreeSet<String> {
    let bytes = encode(value).expect("encode");
    match rmpv::decode::read_value(&mut &bytes[..]).expect("valid MessagePack") {
        rmpv::Value::Map(entries) => entries
            .into_iter()
            .map(|(k, _)| k.as_str().expect("string key").to_owned())
            .collect(),
        other => panic!("expected a map, got {other}"),
    }
}

/// Every wire struct, populated so that each key it can write is written.
fn wire_structs() -> Vec<(&'static str, BTreeSet<String>)> {
    let uuid = Uuid::from_u128(1);
    let some = || Some("x".to_owned());
    let attaches = FieldHint {
        edge_kind: EdgeKind::AttachesTo,
        ..FieldHint::default()
    };
    vec![
        (
            "Envelope",
            written_keys(&Envelope {
                correlation: Some(uuid),
                deadline_ms: Some(1),
                trace: Some(TraceContext::default()),
                max_message_bytes: Some(1),
                ..Envelope::default()
            }),
        ),
        (
            "TraceContext",
            written_keys(&TraceContext {
                traceparent: "x".into(),
                tracestate: "x".into(),
            }),
        ),
        (
            "Announcement",
            written_keys(&Announcement {
                sdk: "x".into(),
                target_config: vec![FieldSchema::default()],
                ..Announcement::default()
            }),
        ),
        ("RateLimit", written_keys(&RateLimit::default())),
        ("DiscoveryFilter", written_keys(&DiscoveryFilter::default())),
        ("Condition", written_keys(&Condition::default())),
        (
            "LabelConfig",
            written_keys(&LabelConfig {
                name_property: some(),
                tags_property: some(),
            }),
        ),
        (
            "ResourceSchema",
            written_keys(&ResourceSchema {
                description: "x".into(),
                concurrency: Some(ConcurrencyKey::default()),
                parent: Some(ParentScope::default()),
                ..ResourceSchema::default()
            }),
        ),
        ("ConcurrencyKey", written_keys(&ConcurrencyKey::default())),
        ("ParentScope", written_keys(&ParentScope::default())),
        (
            "FieldSchema",
            written_keys(&FieldSchema {
                description: "x".into(),
                ..FieldSchema::default()
            }),
        ),
        ("FieldHint", written_keys(&attaches)),
        (
            "Target",
            written_keys(&Target {
                stack: some(),
                ..Target::default()
            }),
        ),
        ("CreateRequest", written_keys(&CreateRequest::default())),
        ("ReadRequest", written_keys(&ReadRequest::default())),
        ("UpdateRequest", written_keys(&UpdateRequest::default())),
        ("DeleteRequest", written_keys(&DeleteRequest::default())),
        (
            "StatusRequest",
            written_keys(&StatusRequest {
                context: Some(Value::Null),
                ..StatusRequest::default()
            }),
        ),
        (
            "ListRequest",
            written_keys(&ListRequest {
                page_token: some(),
                parent: Some(ListedResource::default()),
                ..ListRequest::default()
            }),
        ),
        (
            "ListResult",
            written_keys(&ListResult {
                error_code: Some(ErrorCode::NotFound),
                message: some(),
                next_page_token: some(),
                ..ListResult::default()
            }),
        ),
        ("ListedResource", written_keys(&ListedResource::default())),
        (
            "ProgressEvent",
            written_keys(&ProgressEvent {
                native_id: some(),
                properties: Some(PropertyMap::new()),
                error_code: Some(ErrorCode::NotFound),
                message: some(),
                retry_after_ms: Some(1),
                context: Some(Value::Null),
                ..ProgressEvent::default()
            }),
        ),
        ("Cancel", written_keys(&Cancel::default())),
        ("ProtocolError", written_keys(&ProtocolError::default())),
    ]
}

/// Types documented by a section of their own without a field table.
const WITHOUT_FIELD_TABLE: &[&str] = &["Value"];

/// The lines of the `### `name`` section, up to the next heading.
fn section<'a>(doc: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let heading = format!("### `{name}`");
    let is_heading = |l: &&str| {
        l.strip_prefix(&heading)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    };
    let mut lines = doc.lines().skip_while(|l| !is_heading(l));
    lines.next()?;
    Some(lines.take_while(|l| !l.starts_with('#')).collect())
}

/// The first-column names (`` `name` ``) of the table rows in `lines`.
fn documented_fields(lines: &[&str]) -> BTreeSet<String> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name.to_owned())
        .collect()
}

#[test]
fn every_wire_struct_is_documented_with_its_fields() {
    let doc = read_doc();
    let structs = wire_structs();
    let mut problems = Vec::new();
    for (name, keys) in &structs {
        match section(&doc, name) {
            None => problems.push(format!("no `### `{name}`` section")),
            Some(lines) => {
                let documented = documented_fields(&lines);
                let missing: Vec<_> = keys.difference(&documented).collect();
                let stale: Vec<_> = documented.difference(keys).collect();
                if !missing.is_empty() || !stale.is_empty() {
                    problems.push(format!(
                        "`{name}`: undocumented fields {missing:?}, documented fields it does not write {stale:?}"
                    ));
                }
            }
        }
    }
    for name in WITHOUT_FIELD_TABLE {
        if section(&doc, name).is_none() {
            problems.push(format!("no `### `{name}`` section"));
        }
    }
    // A wire type added to the crate must be added above, and documented.
    let known: BTreeSet<&str> = structs
        .iter()
        .map(|(n, _)| *n)
        .chain(WITHOUT_FIELD_TABLE.iter().copied())
        .collect();
    for name in serialized_types_in_source() {
        if !known.contains(name.as_str()) {
            problems.push(format!(
                "`{name}` is serialized but neither listed in tests/it/protocol_doc.rs nor checked \
                 against docs/protocol.md: add it to `wire_structs()` and document it"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/protocol.md does not match the wire types:\n  {}",
        problems.join("\n  ")
    );
}

/// Public types in `src/` that derive or implement `Serialize` by name.
/// (Types declared through `open_enum!` are covered by the generated tables.)
fn serialized_types_in_source() -> BTreeSet<String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names = BTreeSet::new();
    for entry in fs::read_dir(&src).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("read source file");
        let mut derives_serialize = false;
        // An attribute being read, possibly over several lines.
        let mut attribute: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(attr) = attribute.as_mut() {
                attr.push_str(line);
            } else if line.starts_with("#[") {
                attribute = Some(line.to_owned());
            }
            if let Some(attr) = &attribute {
                if attr.ends_with(']') {
                    if attr.starts_with("#[derive(") && attr.contains("Serialize") {
                        derives_serialize = true;
                    }
                    attribute = None;
                }
                continue;
            }
            if let Some(rest) = line
                .strip_prefix("pub struct ")
                .or_else(|| line.strip_prefix("pub enum "))
            {
                if derives_serialize {
                    names.insert(ident(rest));
                }
            } else if let Some(rest) = line
                .strip_prefix("impl Serialize for ")
                .or_else(|| line.strip_prefix("impl serde::Serialize for "))
            {
                names.insert(ident(rest));
            } else if line.starts_with("///") || line.starts_with("//!") {
                continue;
            }
            derives_serialize = false;
        }
    }
    // Guard the scanner itself: it must see types of each kind it looks for.
    for expected in ["Envelope", "FieldHint", "Value"] {
        assert!(
            names.contains(expected),
            "the source scan no longer finds `{expected}`; fix serialized_types_in_source()"
        );
    }
    names
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn worked_example_is_what_the_crate_writes() {
    let doc = read_doc();
    let start = doc
        .find("```hex\n")
        .expect("docs/protocol.md has a ```hex block with the worked example")
        + "```hex\n".len();
    let len = doc[start..]
        .find("```")
        .expect("the ```hex block is closed");
    let bytes: Vec<u8> = doc[start..start + len]
        .split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).expect("hex byte"))
        .collect();

    let envelope = Envelope {
        protocol: PROTOCOL_MAJOR,
        id: "01906f1e-8c2b-7c4d-8e5f-a0b1c2d3e4f5"
            .parse()
            .expect("uuid"),
        correlation: Some(
            "01906f1e-8c2a-7b3d-9e4f-a1b2c3d4e5f6"
                .parse()
                .expect("uuid"),
        ),
        kind: MessageKind::Cancel,
        deadline_ms: None,
        trace: None,
        max_message_bytes: None,
        body: encode(&Cancel {
            reason: "user".into(),
        })
        .expect("encode body"),
    };
    assert_eq!(
        bytes,
        encode_frame(&envelope).expect("encode frame"),
        "the worked example in docs/protocol.md is not what the crate writes"
    );
    let mut buf = bytes::BytesMut::from(&bytes[..]);
    let payload = FrameDecoder::default()
        .decode(&mut buf)
        .expect("frame")
        .expect("one whole frame");
    assert!(buf.is_empty());
    let decoded = Envelope::decode(&payload).expect("envelope");
    assert_eq!(decoded, envelope);
    assert_eq!(
        decoded.body::<Cancel>().expect("body").reason,
        "user".to_owned()
    );
}
