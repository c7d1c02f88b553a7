//! Golden fixtures: the encoded bytes of every message, as each release wrote
//! them, decoded by this release.
//!
//! Each case names a file under `tests/fixtures/`, says how to produce its
//! bytes the first time, and what the bytes must decode to. A present fixture
//! is never rewritten: if it stops decoding to the expected value, the code
//! broke compatibility and the code is what must change. A missing fixture is
//! written only when `ORRERY_BLESS=1` is set:
//!
//! ```text
//! ORRERY_BLESS=1 cargo test -p orrery-schema --test it golden
//! ```
//!
//! Most fixtures are this release's own encoding of a value. Some are built by
//! hand with `rmpv` because they hold what today's structs cannot write:
//! unknown fields and enum values from a newer peer, the deprecated
//! `attaches_to` boolean alone as an older peer wrote it, integers and floats
//! in the encodings other MessagePack libraries choose.
//!
//! Expected values are spelled out here, never derived from today's encoder,
//! so that a change in the encoder shows up as a failing fixture.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use orrery_schema::{
    decode, encode, Announcement, Cancel, Capability, ConcurrencyKey, Condition, CreateRequest,
    DeleteRequest, DiscoveryFilter, EdgeKind, Envelope, ErrorCode, FieldHint, FieldSchema,
    FieldType, LabelConfig, ListRequest, ListResult, ListedResource, MatchOp, MessageKind,
    Operation, OperationStatus, ParentScope, ProgressEvent, PropertyMap, ProtocolError, RateLimit,
    ReadRequest, ResourceSchema, StatusRequest, Target, TraceContext, UpdateMethod, UpdateRequest,
    Uuid, Value,
};
use rmpv::Value as Mp;
use serde::de::DeserializeOwned;
use serde::Serialize;

// ---------------------------------------------------------------------------
// The mechanism
// ---------------------------------------------------------------------------

type Check = Box<dyn Fn(&[u8]) -> Result<(), String>>;

/// One fixture file and what it must decode to.
struct Case {
    /// Path under `tests/fixtures/`, with `/` separators.
    file: &'static str,
    /// The bytes written when the fixture is blessed.
    bless: Box<dyn Fn() -> Vec<u8>>,
    /// Decodes the stored bytes and compares them with the expected value.
    check: Check,
}

/// A fixture holding this release's encoding of `expected()`.
fn encoded<T>(file: &'static str, expected: fn() -> T) -> Case
where
    T: Serialize + DeserializeOwned + PartialEq + Debug + 'static,
{
    Case {
        file,
        bless: Box::new(move || encode(&expected()).expect("expected value encodes")),
        check: Box::new(move |bytes| decodes_to(bytes, &expected())),
    }
}

/// A fixture whose bytes are built by hand, decoding to `expected()`.
fn handmade<T>(file: &'static str, bytes: fn() -> Vec<u8>, expected: fn() -> T) -> Case
where
    T: Serialize + DeserializeOwned + PartialEq + Debug + 'static,
{
    Case {
        file,
        bless: Box::new(bytes),
        check: Box::new(move |stored| decodes_to(stored, &expected())),
    }
}

/// Decodes `bytes` as `T`, compares with `expected`, and checks that
/// re-encoding the decoded value and decoding it again changes nothing.
fn decodes_to<T>(bytes: &[u8], expected: &T) -> Result<(), String>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let name = std::any::type_name::<T>();
    let got: T = decode(bytes).map_err(|e| format!("does not decode as {name}: {e}"))?;
    if &got != expected {
        return Err(format!(
            "decodes as {name}\n{got:#?}\nbut the expected value is\n{expected:#?}"
        ));
    }
    let again = encode(&got).map_err(|e| format!("decoded {name} does not re-encode: {e}"))?;
    let back: T = decode(&again).map_err(|e| format!("re-encoded {name} does not decode: {e}"))?;
    if back != got {
        return Err(format!(
            "re-encoding the decoded {name} changes it:\n{back:#?}"
        ));
    }
    Ok(())
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn blessing() -> bool {
    std::env::var("ORRERY_BLESS").is_ok_and(|v| v == "1")
}

const HOW_TO_BLESS: &str = "ORRERY_BLESS=1 cargo test -p orrery-schema --test it golden";

/// Checks one case, writing its fixture first if it is missing and blessing
/// is on. Never overwrites an existing file.
fn run_case(case: &Case) -> Result<(), String> {
    let path = fixtures_dir().join(case.file);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !blessing() {
                return Err(format!(
                    "fixture is missing. If this is a new case, write it with `{HOW_TO_BLESS}` \
                     and commit the new file"
                ));
            }
            let bytes = (case.bless)();
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir).map_err(|e| format!("cannot create {dir:?}: {e}"))?;
            }
            // `create_new` makes "never overwrite" hold even against a race.
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    file.write_all(&bytes)
                        .map_err(|e| format!("cannot write fixture: {e}"))?;
                    eprintln!("blessed new fixture {}", case.file);
                    bytes
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    fs::read(&path).map_err(|e| format!("cannot read fixture: {e}"))?
                }
                Err(e) => return Err(format!("cannot create fixture: {e}")),
            }
        }
        Err(e) => return Err(format!("cannot read fixture: {e}")),
    };
    (case.check)(&bytes).map_err(|e| {
        format!(
            "{e}\n(fixtures are never rewritten: a fixture that no longer decodes means \
             this change breaks peers that wrote it; fix the code, not the fixture)"
        )
    })
}

/// Every `.msgpack` file under `dir`, as a path relative to `root` with `/`
/// separators.
fn msgpack_files(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("readable fixtures directory").path();
        if path.is_dir() {
            msgpack_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "msgpack") {
            let rel = path.strip_prefix(root).expect("under the fixtures root");
            let rel: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            out.insert(rel.join("/"));
        }
    }
}

/// The stored bytes of a fixture that has a case. While blessing, a fixture
/// not yet written is taken from its case (the table test writes the file).
fn fixture(file: &str) -> Vec<u8> {
    let path = fixtures_dir().join(file);
    match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && blessing() => {
            let case = cases().into_iter().find(|c| c.file == file);
            (case.expect("fixture has a case").bless)()
        }
        Err(e) => panic!("cannot read {path:?}: {e}; bless missing fixtures with `{HOW_TO_BLESS}`"),
    }
}

#[test]
fn every_fixture_decodes_to_its_expected_value() {
    let cases = cases();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| run_case(case).err().map(|e| format!("{}: {e}", case.file)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} golden fixtures failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_fixture_file_has_a_case() {
    let known: BTreeSet<String> = cases().iter().map(|c| c.file.to_owned()).collect();
    let mut on_disk = BTreeSet::new();
    msgpack_files(&fixtures_dir(), &fixtures_dir(), &mut on_disk);
    let orphans: Vec<_> = on_disk.difference(&known).collect();
    assert!(
        orphans.is_empty(),
        "fixture files with no case in tests/it/golden.rs (a fixture is never deleted; \
         restore its case): {orphans:?}"
    );
}

#[test]
fn case_names_are_unique_and_well_formed() {
    let cases = cases();
    let mut seen = BTreeSet::new();
    for case in &cases {
        assert!(seen.insert(case.file), "duplicate case {}", case.file);
        assert!(
            case.file.ends_with(".msgpack") && !case.file.contains('\\'),
            "bad fixture name {}",
            case.file
        );
    }
}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

fn cases() -> Vec<Case> {
    vec![
        // Envelopes.
        encoded("v1/envelope_minimal.msgpack", envelope_minimal),
        encoded("v1/envelope_full.msgpack", envelope_full),
        encoded(
            "v1/envelope_max_message_bytes.msgpack",
            envelope_max_message_bytes,
        ),
        handmade(
            "v1/envelope_unknown_fields.msgpack",
            envelope_unknown_fields_bytes,
            envelope_unknown_fields,
        ),
        handmade(
            "v1/envelope_unknown_kind.msgpack",
            envelope_unknown_kind_bytes,
            envelope_unknown_kind,
        ),
        // Announcements.
        encoded("v1/announcement_default.msgpack", announcement_default),
        encoded("v1/announcement_realistic.msgpack", announcement_realistic),
        encoded(
            "v1/announcement_attaches_to.msgpack",
            announcement_attaches_to,
        ),
        encoded(
            "v1/announcement_target_config_concurrency_parent.msgpack",
            announcement_target_config_concurrency_parent,
        ),
        handmade(
            "v1/announcement_unknown_fields.msgpack",
            announcement_unknown_fields_bytes,
            announcement_unknown_fields,
        ),
        handmade(
            "v1/announcement_unknown_enum_values.msgpack",
            announcement_unknown_enum_values_bytes,
            announcement_unknown_enum_values,
        ),
        // As an older peer wrote them: the deprecated `attaches_to` boolean.
        handmade(
            "v1/old_peer_field_schema_attaches_to.msgpack",
            old_peer_field_schema_attaches_to_bytes,
            old_peer_field_schema_attaches_to,
        ),
        handmade(
            "v1/old_peer_field_schema_no_edge.msgpack",
            old_peer_field_schema_no_edge_bytes,
            old_peer_field_schema_no_edge,
        ),
        handmade(
            "v1/old_peer_field_hint_attaches_to.msgpack",
            old_peer_field_hint_attaches_to_bytes,
            old_peer_field_hint_attaches_to,
        ),
        handmade(
            "v1/old_peer_announcement.msgpack",
            old_peer_announcement_bytes,
            old_peer_announcement,
        ),
        handmade(
            "v1/field_hint_edge_kind_wins.msgpack",
            field_hint_edge_kind_wins_bytes,
            field_hint_edge_kind_wins,
        ),
        // Requests.
        encoded("v1/create_request.msgpack", create_request),
        encoded("v1/create_request_empty_maps.msgpack", create_request_empty),
        encoded(
            "v1/create_request_target_stack.msgpack",
            create_request_target_stack,
        ),
        encoded("v1/read_request.msgpack", read_request),
        encoded("v1/update_request.msgpack", update_request),
        encoded("v1/delete_request.msgpack", delete_request),
        encoded(
            "v1/status_request_with_context.msgpack",
            status_request_with_context,
        ),
        encoded("v1/list_request_first_page.msgpack", list_request_first),
        encoded("v1/list_request_next_page.msgpack", list_request_next),
        encoded("v1/list_request_of_parent.msgpack", list_request_of_parent),
        // Answers.
        encoded("v1/list_result_page.msgpack", list_result_page),
        encoded("v1/list_result_failure.msgpack", list_result_failure),
        encoded("v1/progress_success.msgpack", progress_success),
        encoded("v1/progress_failure.msgpack", progress_failure),
        encoded("v1/progress_in_progress.msgpack", progress_in_progress),
        handmade(
            "v1/progress_unknown_fields.msgpack",
            progress_unknown_fields_bytes,
            progress_unknown_fields,
        ),
        handmade(
            "v1/progress_unknown_enum_values.msgpack",
            progress_unknown_enum_values_bytes,
            progress_unknown_enum_values,
        ),
        encoded("v1/cancel.msgpack", cancel),
        encoded("v1/protocol_error.msgpack", protocol_error),
        // Edge cases.
        Case {
            file: "v1/empty_map.msgpack",
            bless: Box::new(|| vec![0x80]),
            check: Box::new(empty_map_decodes_as_every_default),
        },
        encoded("v1/maximal_values.msgpack", maximal_values),
        handmade(
            "v1/values_from_other_encoders.msgpack",
            values_from_other_encoders_bytes,
            values_from_other_encoders,
        ),
    ]
}

// ---------------------------------------------------------------------------
// Helpers for expected values and hand-made bytes
// ---------------------------------------------------------------------------

const REQUEST_ID: &str = "01907f3a-1c2b-7def-8a1b-2c3d4e5f6071";

fn props<const N: usize>(entries: [(&str, Value); N]) -> PropertyMap {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

fn target() -> Target {
    Target {
        name: "workstation".into(),
        config: props([("root", "/srv/orrery".into())]),
        ..Default::default()
    }
}

/// A MessagePack map from string keys, in the order given.
fn mp_map<const N: usize>(entries: [(&str, Mp); N]) -> Mp {
    Mp::Map(entries.into_iter().map(|(k, v)| (Mp::from(k), v)).collect())
}

fn mp_bytes(value: &Mp) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, value).expect("writing to a Vec succeeds");
    out
}

fn id_a() -> Uuid {
    Uuid::from_u128(0x0190_7f3a_1c2b_7def_8a1b_2c3d_4e5f_6071)
}

fn id_b() -> Uuid {
    Uuid::from_u128(0x0190_7f3a_1d00_7aaa_9bbb_0123_4567_89ab)
}

/// `Cancel { reason: "user pressed ctrl-c" }`, written out byte by byte so
/// that the envelope fixtures never depend on today's encoder.
fn cancel_body() -> Vec<u8> {
    let reason = b"user pressed ctrl-c";
    let mut out = vec![0x81, 0xa6];
    out.extend_from_slice(b"reason");
    out.push(0xa0 | reason.len() as u8);
    out.extend_from_slice(reason);
    out
}

// ---------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------

fn envelope_minimal() -> Envelope {
    Envelope {
        protocol: 1,
        id: id_a(),
        correlation: None,
        kind: MessageKind::Ping,
        deadline_ms: None,
        trace: None,
        max_message_bytes: None,
        body: Vec::new(),
    }
}

fn envelope_full() -> Envelope {
    Envelope {
        protocol: 1,
        id: id_b(),
        correlation: Some(id_a()),
        kind: MessageKind::Cancel,
        deadline_ms: Some(1_767_225_600_000),
        trace: Some(TraceContext {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: "rojo=00f067aa0ba902b7".into(),
        }),
        max_message_bytes: None,
        body: cancel_body(),
    }
}

/// A list request relayed by a satellite on a server with the default
/// `max_payload` (1 MiB, less the satellite's header room): the plugin
/// must answer within it.
fn envelope_max_message_bytes() -> Envelope {
    Envelope {
        protocol: 1,
        id: id_b(),
        correlation: None,
        kind: MessageKind::List,
        deadline_ms: Some(1_767_225_600_000),
        trace: None,
        max_message_bytes: Some(1_047_552),
        body: vec![0x80],
    }
}

fn envelope_unknown_fields_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("protocol", 1.into()),
        ("id", Mp::Binary(id_a().as_bytes().to_vec())),
        ("priority", 7.into()),
        ("kind", "cancel".into()),
        (
            "route",
            mp_map([
                ("hops", Mp::Array(vec!["sat-1".into(), "sat-2".into()])),
                ("sticky", true.into()),
            ]),
        ),
        // A MessagePack timestamp extension, as a newer peer might add.
        (
            "sent_at",
            Mp::Ext(-1, vec![0, 0, 0, 0, 0x65, 0x92, 0x00, 0x80]),
        ),
        ("body", Mp::Binary(cancel_body())),
        ("compression", Mp::Nil),
    ]))
}

fn envelope_unknown_fields() -> Envelope {
    Envelope {
        protocol: 1,
        id: id_a(),
        kind: MessageKind::Cancel,
        body: cancel_body(),
        ..Default::default()
    }
}

fn envelope_unknown_kind_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("protocol", 1.into()),
        ("id", Mp::Binary(id_b().as_bytes().to_vec())),
        ("correlation", Mp::Binary(id_a().as_bytes().to_vec())),
        ("kind", "subscribe".into()),
        ("body", Mp::Binary(vec![0x80])),
    ]))
}

fn envelope_unknown_kind() -> Envelope {
    Envelope {
        protocol: 1,
        id: id_b(),
        correlation: Some(id_a()),
        kind: MessageKind::Unknown("subscribe".into()),
        body: vec![0x80],
        ..Default::default()
    }
}

#[test]
fn full_envelope_body_is_the_cancel() {
    let env: Envelope = decode(&fixture("v1/envelope_full.msgpack")).unwrap();
    assert_eq!(
        env.body::<Cancel>().unwrap(),
        Cancel {
            reason: "user pressed ctrl-c".into()
        }
    );
}

#[test]
fn unknown_message_kind_is_written_back_verbatim() {
    let env: Envelope = decode(&fixture("v1/envelope_unknown_kind.msgpack")).unwrap();
    let again = rmpv::decode::read_value(&mut &encode(&env).unwrap()[..]).unwrap();
    assert_eq!(map_get(&again, "kind").as_str(), Some("subscribe"));
}

// ---------------------------------------------------------------------------
// Announcements and resource schemas
// ---------------------------------------------------------------------------

fn announcement_default() -> Announcement {
    Announcement {
        protocol: 1,
        name: String::new(),
        version: String::new(),
        namespace: String::new(),
        capabilities: Vec::new(),
        rate_limit: RateLimit {
            requests_per_second: 10.0,
            burst: 10,
            max_in_flight: 16,
        },
        discovery_filters: Vec::new(),
        label_config: LabelConfig::default(),
        resources: Vec::new(),
        target_config: Vec::new(),
        sdk: String::new(),
    }
}

fn field(name: &str, field_type: FieldType, description: &str, hints: FieldHint) -> FieldSchema {
    FieldSchema {
        name: name.into(),
        field_type,
        description: description.into(),
        hints,
    }
}

fn announcement_realistic() -> Announcement {
    let file = ResourceSchema {
        type_name: "Local::Fs::File".into(),
        description: "A regular file under the target's root.".into(),
        identifier: vec!["path".into()],
        fields: vec![
            field(
                "path",
                FieldType::String,
                "Path relative to the root.",
                FieldHint {
                    create_only: true,
                    required: true,
                    required_on_create: true,
                    ..Default::default()
                },
            ),
            field("content", FieldType::String, "", FieldHint::default()),
            field(
                "mode",
                FieldType::Integer,
                "Unix permission bits.",
                FieldHint {
                    provider_default: true,
                    ..Default::default()
                },
            ),
            field(
                "encryption_key",
                FieldType::Bytes,
                "Encrypts the content at rest.",
                FieldHint {
                    write_only: true,
                    opaque: true,
                    update_method: UpdateMethod::CreateBeforeDelete,
                    ..Default::default()
                },
            ),
            field(
                "sha256",
                FieldType::String,
                "",
                FieldHint {
                    read_only: true,
                    ..Default::default()
                },
            ),
            field(
                "directory",
                FieldType::String,
                "The directory holding the file.",
                FieldHint {
                    edge_kind: EdgeKind::Default,
                    update_method: UpdateMethod::DeleteBeforeCreate,
                    ..Default::default()
                },
            ),
            field(
                "everything",
                FieldType::Any,
                "Every hint at once.",
                FieldHint {
                    create_only: true,
                    write_only: true,
                    read_only: true,
                    required: true,
                    required_on_create: true,
                    opaque: true,
                    provider_default: true,
                    update_method: UpdateMethod::DeleteBeforeCreate,
                    edge_kind: EdgeKind::RuntimeDependency,
                },
            ),
        ],
        discoverable: true,
        concurrency: None,
        parent: None,
    };
    let directory = ResourceSchema {
        type_name: "Local::Fs::Directory".into(),
        description: String::new(),
        identifier: vec!["path".into()],
        fields: vec![
            field(
                "path",
                FieldType::String,
                "",
                FieldHint {
                    create_only: true,
                    required: true,
                    ..Default::default()
                },
            ),
            field("labels", FieldType::Map, "", FieldHint::default()),
            field("entries", FieldType::List, "", FieldHint::default()),
        ],
        discoverable: true,
        concurrency: None,
        parent: None,
    };
    let service = ResourceSchema {
        type_name: "Local::Process::Service".into(),
        description: "A supervised process.".into(),
        identifier: Vec::new(),
        fields: vec![
            field(
                "command",
                FieldType::List,
                "",
                FieldHint {
                    required: true,
                    ..Default::default()
                },
            ),
            field(
                "socket",
                FieldType::String,
                "A socket the service talks to once running.",
                FieldHint {
                    edge_kind: EdgeKind::RuntimeDependency,
                    ..Default::default()
                },
            ),
            field("restart", FieldType::Boolean, "", FieldHint::default()),
            field("cpu_share", FieldType::Number, "", FieldHint::default()),
        ],
        discoverable: false,
        concurrency: None,
        parent: None,
    };
    Announcement {
        protocol: 1,
        name: "local".into(),
        version: "0.3.1".into(),
        namespace: "Local".into(),
        capabilities: vec![
            Capability::Cancel,
            Capability::Concurrent,
            Capability::Ping,
            Capability::TraceContext,
            Capability::List,
        ],
        rate_limit: RateLimit {
            requests_per_second: 25.5,
            burst: 50,
            max_in_flight: 8,
        },
        discovery_filters: vec![DiscoveryFilter {
            resource_type: "Local::Fs::File".into(),
            exclude_when: vec![
                Condition {
                    property: "path".into(),
                    op: MatchOp::Prefix,
                    value: "tmp/".into(),
                },
                Condition {
                    property: "managed_by".into(),
                    op: MatchOp::Exists,
                    value: Value::Null,
                },
                Condition {
                    property: "mode".into(),
                    op: MatchOp::Equals,
                    value: Value::Int(0o600),
                },
            ],
        }],
        label_config: LabelConfig {
            name_property: Some("name".into()),
            tags_property: Some("labels".into()),
        },
        resources: vec![file, directory, service],
        target_config: Vec::new(),
        sdk: "orrery-plugin-sdk/0.1.0".into(),
    }
}

/// Release 0.2: secret target-config fields, a concurrency key and a
/// parent-scoped type.
fn announcement_target_config_concurrency_parent() -> Announcement {
    let grant = ResourceSchema {
        type_name: "Postgres::Grant".into(),
        description: String::new(),
        identifier: vec!["database".into(), "role".into()],
        fields: vec![
            field("database", FieldType::String, "", FieldHint::default()),
            field("role", FieldType::String, "", FieldHint::default()),
        ],
        discoverable: true,
        concurrency: Some(ConcurrencyKey {
            key: "database:{database}".into(),
            limit: 1,
        }),
        parent: Some(ParentScope {
            resource_type: "Postgres::Database".into(),
            properties: BTreeMap::from([("database".into(), "name".into())]),
        }),
    };
    Announcement {
        name: "postgres".into(),
        version: "0.2.0".into(),
        namespace: "Postgres".into(),
        resources: vec![grant],
        target_config: vec![
            field("host", FieldType::String, "", FieldHint::default()),
            field(
                "password",
                FieldType::String,
                "",
                FieldHint {
                    opaque: true,
                    ..Default::default()
                },
            ),
        ],
        ..announcement_default()
    }
}

fn announcement_attaches_to() -> Announcement {
    Announcement {
        name: "volumes".into(),
        version: "1.0.0".into(),
        namespace: "Local".into(),
        resources: vec![ResourceSchema {
            type_name: "Local::Fs::Mount".into(),
            identifier: vec!["mount_point".into()],
            fields: vec![
                field(
                    "mount_point",
                    FieldType::String,
                    "",
                    FieldHint {
                        create_only: true,
                        required: true,
                        ..Default::default()
                    },
                ),
                field(
                    "volume",
                    FieldType::String,
                    "The volume this mount attaches to.",
                    FieldHint {
                        required: true,
                        edge_kind: EdgeKind::AttachesTo,
                        ..Default::default()
                    },
                ),
            ],
            ..Default::default()
        }],
        ..announcement_default()
    }
}

/// `resources[0].fields[index].hints` of an announcement, read with rmpv.
fn hints_of(announcement: &Mp, index: usize) -> Mp {
    let resources = map_get(announcement, "resources");
    let fields = map_get(&resources.as_array().unwrap()[0], "fields");
    map_get(&fields.as_array().unwrap()[index], "hints")
}

fn map_get(map: &Mp, key: &str) -> Mp {
    map.as_map()
        .unwrap_or_else(|| panic!("not a map: {map}"))
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no key {key} in {map}"))
}

#[test]
fn attaches_to_fixture_also_carries_the_deprecated_boolean() {
    let raw =
        rmpv::decode::read_value(&mut &fixture("v1/announcement_attaches_to.msgpack")[..]).unwrap();
    let volume = hints_of(&raw, 1);
    assert_eq!(map_get(&volume, "edge_kind").as_str(), Some("attachesTo"));
    assert_eq!(map_get(&volume, "attaches_to").as_bool(), Some(true));
}

fn announcement_unknown_fields_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("protocol", 1.into()),
        ("name", "local".into()),
        ("version", "9.0.0".into()),
        ("namespace", "Local".into()),
        ("min_host_version", "0.9.0".into()),
        ("capabilities", Mp::Array(vec!["ping".into()])),
        (
            "rate_limit",
            mp_map([
                ("requests_per_second", Mp::F64(2.0)),
                ("burst", 4.into()),
                ("max_in_flight", 1.into()),
                ("per_minute_quota", 600.into()),
            ]),
        ),
        (
            "resources",
            Mp::Array(vec![mp_map([
                ("type_name", "Local::Fs::File".into()),
                ("cost_center", "platform".into()),
                ("identifier", Mp::Array(vec!["path".into()])),
                (
                    "fields",
                    Mp::Array(vec![mp_map([
                        ("name", "path".into()),
                        ("type", "string".into()),
                        ("deprecated_since", "8.0.0".into()),
                        (
                            "hints",
                            mp_map([
                                ("create_only", true.into()),
                                ("sensitive_in_logs", true.into()),
                                ("edge_kind", "attachesTo".into()),
                                ("attaches_to", true.into()),
                            ]),
                        ),
                    ])]),
                ),
                ("discoverable", true.into()),
            ])]),
        ),
        (
            "extensions",
            mp_map([("billing", mp_map([("enabled", false.into())]))]),
        ),
    ]))
}

fn announcement_unknown_fields() -> Announcement {
    Announcement {
        name: "local".into(),
        version: "9.0.0".into(),
        namespace: "Local".into(),
        capabilities: vec![Capability::Ping],
        rate_limit: RateLimit {
            requests_per_second: 2.0,
            burst: 4,
            max_in_flight: 1,
        },
        resources: vec![ResourceSchema {
            type_name: "Local::Fs::File".into(),
            identifier: vec!["path".into()],
            fields: vec![field(
                "path",
                FieldType::String,
                "",
                FieldHint {
                    create_only: true,
                    edge_kind: EdgeKind::AttachesTo,
                    ..Default::default()
                },
            )],
            discoverable: true,
            ..Default::default()
        }],
        ..announcement_default()
    }
}

fn announcement_unknown_enum_values_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("protocol", 1.into()),
        ("name", "cloud".into()),
        ("version", "4.0.0".into()),
        ("namespace", "Cloud".into()),
        (
            "capabilities",
            Mp::Array(vec!["streaming".into(), "cancel".into()]),
        ),
        (
            "discovery_filters",
            Mp::Array(vec![mp_map([
                ("resource_type", "Cloud::Vm".into()),
                (
                    "exclude_when",
                    Mp::Array(vec![mp_map([
                        ("property", "name".into()),
                        ("op", "regex".into()),
                        ("value", "^tmp-".into()),
                    ])]),
                ),
            ])]),
        ),
        (
            "resources",
            Mp::Array(vec![mp_map([
                ("type_name", "Cloud::Vm".into()),
                (
                    "fields",
                    Mp::Array(vec![mp_map([
                        ("name", "address".into()),
                        ("type", "ipAddress".into()),
                        (
                            "hints",
                            mp_map([
                                ("update_method", "replaceInPlace".into()),
                                ("edge_kind", "weakReference".into()),
                            ]),
                        ),
                    ])]),
                ),
            ])]),
        ),
    ]))
}

fn announcement_unknown_enum_values() -> Announcement {
    Announcement {
        name: "cloud".into(),
        version: "4.0.0".into(),
        namespace: "Cloud".into(),
        capabilities: vec![Capability::Unknown("streaming".into()), Capability::Cancel],
        discovery_filters: vec![DiscoveryFilter {
            resource_type: "Cloud::Vm".into(),
            exclude_when: vec![Condition {
                property: "name".into(),
                op: MatchOp::Unknown("regex".into()),
                value: "^tmp-".into(),
            }],
        }],
        resources: vec![ResourceSchema {
            type_name: "Cloud::Vm".into(),
            fields: vec![field(
                "address",
                FieldType::Unknown("ipAddress".into()),
                "",
                FieldHint {
                    update_method: UpdateMethod::Unknown("replaceInPlace".into()),
                    edge_kind: EdgeKind::Unknown("weakReference".into()),
                    ..Default::default()
                },
            )],
            ..Default::default()
        }],
        ..announcement_default()
    }
}

#[test]
fn unknown_announcement_enum_values_are_written_back_verbatim() {
    let ann: Announcement =
        decode(&fixture("v1/announcement_unknown_enum_values.msgpack")).unwrap();
    let again = rmpv::decode::read_value(&mut &encode(&ann).unwrap()[..]).unwrap();
    let hints = hints_of(&again, 0);
    assert_eq!(map_get(&hints, "edge_kind").as_str(), Some("weakReference"));
    assert_eq!(
        map_get(&hints, "update_method").as_str(),
        Some("replaceInPlace")
    );
    // An unknown edge kind is not `attachesTo`, so older peers see `false`
    // (written as the key's absence).
    assert!(hints
        .as_map()
        .unwrap()
        .iter()
        .all(|(k, _)| k.as_str() != Some("attaches_to")));
    let capabilities = map_get(&again, "capabilities");
    assert_eq!(
        capabilities.as_array().unwrap()[0].as_str(),
        Some("streaming")
    );
}

fn old_peer_field_schema_attaches_to_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("name", "instance_id".into()),
        ("type", "string".into()),
        (
            "hints",
            mp_map([("create_only", true.into()), ("attaches_to", true.into())]),
        ),
    ]))
}

fn old_peer_field_schema_attaches_to() -> FieldSchema {
    field(
        "instance_id",
        FieldType::String,
        "",
        FieldHint {
            create_only: true,
            edge_kind: EdgeKind::AttachesTo,
            ..Default::default()
        },
    )
}

fn old_peer_field_schema_no_edge_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("name", "size_gb".into()),
        ("type", "integer".into()),
        ("hints", mp_map([("required", true.into())])),
    ]))
}

fn old_peer_field_schema_no_edge() -> FieldSchema {
    field(
        "size_gb",
        FieldType::Integer,
        "",
        FieldHint {
            required: true,
            edge_kind: EdgeKind::Default,
            ..Default::default()
        },
    )
}

fn old_peer_field_hint_attaches_to_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([("attaches_to", true.into())]))
}

fn old_peer_field_hint_attaches_to() -> FieldHint {
    FieldHint {
        edge_kind: EdgeKind::AttachesTo,
        ..Default::default()
    }
}

/// A whole announcement as a release-0 plugin wrote it: no rate limit, no
/// discovery filters, no label config, no sdk, no `read_only` and no
/// `edge_kind` in hints, `attaches_to` written explicitly even when false.
fn old_peer_announcement_bytes() -> Vec<u8> {
    let hint = |attaches: bool| {
        mp_map([
            ("create_only", false.into()),
            ("write_only", false.into()),
            ("required", true.into()),
            ("required_on_create", false.into()),
            ("opaque", false.into()),
            ("provider_default", false.into()),
            ("update_method", "inPlace".into()),
            ("attaches_to", attaches.into()),
        ])
    };
    mp_bytes(&mp_map([
        ("protocol", 1.into()),
        ("name", "disks".into()),
        ("version", "0.1.0".into()),
        ("namespace", "Disk".into()),
        ("capabilities", Mp::Array(vec!["cancel".into()])),
        (
            "resources",
            Mp::Array(vec![mp_map([
                ("type_name", "Disk::Attachment".into()),
                ("identifier", Mp::Array(Vec::new())),
                (
                    "fields",
                    Mp::Array(vec![
                        mp_map([
                            ("name", "disk".into()),
                            ("type", "string".into()),
                            ("hints", hint(false)),
                        ]),
                        mp_map([
                            ("name", "instance".into()),
                            ("type", "string".into()),
                            ("hints", hint(true)),
                        ]),
                    ]),
                ),
                ("discoverable", false.into()),
            ])]),
        ),
    ]))
}

fn old_peer_announcement() -> Announcement {
    let hint = |edge_kind| FieldHint {
        required: true,
        edge_kind,
        ..Default::default()
    };
    Announcement {
        name: "disks".into(),
        version: "0.1.0".into(),
        namespace: "Disk".into(),
        capabilities: vec![Capability::Cancel],
        resources: vec![ResourceSchema {
            type_name: "Disk::Attachment".into(),
            fields: vec![
                field("disk", FieldType::String, "", hint(EdgeKind::Default)),
                field(
                    "instance",
                    FieldType::String,
                    "",
                    hint(EdgeKind::AttachesTo),
                ),
            ],
            ..Default::default()
        }],
        ..announcement_default()
    }
}

/// A newer peer that writes both and disagrees with itself: the new field wins.
fn field_hint_edge_kind_wins_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("edge_kind", "runtimeDependency".into()),
        ("attaches_to", true.into()),
    ]))
}

fn field_hint_edge_kind_wins() -> FieldHint {
    FieldHint {
        edge_kind: EdgeKind::RuntimeDependency,
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

fn file_properties() -> PropertyMap {
    props([
        ("path", "etc/motd".into()),
        ("content", "hello\n".into()),
        ("mode", Value::Int(0o644)),
    ])
}

fn create_request() -> CreateRequest {
    CreateRequest {
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        label: "motd".into(),
        target: target(),
        properties: file_properties(),
    }
}

/// A request that names its stack, for a satellite that restricts the
/// target to some stacks.
fn create_request_target_stack() -> CreateRequest {
    CreateRequest {
        target: Target {
            stack: Some("team-b-web".into()),
            ..target()
        },
        ..create_request()
    }
}

fn create_request_empty() -> CreateRequest {
    CreateRequest {
        request_id: String::new(),
        resource_type: String::new(),
        label: String::new(),
        target: Target {
            name: String::new(),
            config: PropertyMap::new(),
            ..Default::default()
        },
        properties: PropertyMap::new(),
    }
}

fn read_request() -> ReadRequest {
    ReadRequest {
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        target: target(),
        native_id: "/srv/orrery/etc/motd".into(),
        properties: file_properties(),
    }
}

fn update_request() -> UpdateRequest {
    let mut desired = file_properties();
    desired.insert("content".into(), "welcome\n".into());
    UpdateRequest {
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        label: "motd".into(),
        target: target(),
        native_id: "/srv/orrery/etc/motd".into(),
        prior_properties: file_properties(),
        properties: desired,
    }
}

fn delete_request() -> DeleteRequest {
    DeleteRequest {
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        target: target(),
        native_id: "/srv/orrery/etc/motd".into(),
        properties: file_properties(),
    }
}

fn poll_context() -> Value {
    Value::Map(props([
        ("attempt", Value::Int(3)),
        ("operation_url", "https://api.example/ops/7f3a".into()),
        ("started_ms", Value::Int(1_767_225_600_000)),
    ]))
}

fn status_request_with_context() -> StatusRequest {
    StatusRequest {
        request_id: REQUEST_ID.into(),
        operation: Operation::Create,
        resource_type: "Cloud::Vm".into(),
        target: target(),
        native_id: "vm-0a1b2c".into(),
        context: Some(poll_context()),
    }
}

fn list_request_first() -> ListRequest {
    ListRequest {
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        target: target(),
        page_size: 100,
        page_token: None,
        parent: None,
    }
}

/// Release 0.2: the children of one parent.
fn list_request_of_parent() -> ListRequest {
    ListRequest {
        page_size: 50,
        parent: Some(ListedResource {
            native_id: "app".into(),
            properties: PropertyMap::from([("name".into(), Value::from("app"))]),
        }),
        resource_type: "Postgres::Schema".into(),
        ..list_request_first()
    }
}

fn list_request_next() -> ListRequest {
    ListRequest {
        page_size: 0,
        page_token: Some("page-2".into()),
        ..list_request_first()
    }
}

// ---------------------------------------------------------------------------
// Answers
// ---------------------------------------------------------------------------

fn list_result_page() -> ListResult {
    let listed = |name: &str| ListedResource {
        native_id: format!("/srv/orrery/{name}"),
        properties: props([("path", name.into()), ("mode", Value::Int(0o600))]),
    };
    ListResult {
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        status: OperationStatus::Success,
        error_code: None,
        message: None,
        resources: vec![listed("a.txt"), listed("b.txt"), listed("c/d.txt")],
        next_page_token: Some("page-2".into()),
    }
}

fn list_result_failure() -> ListResult {
    ListResult {
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        status: OperationStatus::Failure,
        error_code: Some(ErrorCode::AccessDenied),
        message: Some("permission denied reading /srv/orrery".into()),
        resources: Vec::new(),
        next_page_token: None,
    }
}

fn progress_success() -> ProgressEvent {
    ProgressEvent {
        operation: Operation::Create,
        status: OperationStatus::Success,
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        native_id: Some("/srv/orrery/etc/motd".into()),
        properties: Some(file_properties()),
        error_code: None,
        message: None,
        retry_after_ms: None,
        context: None,
    }
}

fn progress_failure() -> ProgressEvent {
    ProgressEvent {
        operation: Operation::Update,
        status: OperationStatus::Failure,
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        native_id: Some("/srv/orrery/etc/motd".into()),
        properties: None,
        error_code: Some(ErrorCode::Throttling),
        message: Some("slow down".into()),
        retry_after_ms: Some(1500),
        context: None,
    }
}

fn progress_in_progress() -> ProgressEvent {
    ProgressEvent {
        operation: Operation::Create,
        status: OperationStatus::InProgress,
        request_id: REQUEST_ID.into(),
        resource_type: "Cloud::Vm".into(),
        native_id: Some("vm-0a1b2c".into()),
        properties: None,
        error_code: None,
        message: Some("waiting for the instance to boot".into()),
        retry_after_ms: Some(2000),
        context: Some(poll_context()),
    }
}

fn progress_unknown_fields_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("operation", "delete".into()),
        ("progress_percent", 42.into()),
        ("status", "Success".into()),
        ("request_id", REQUEST_ID.into()),
        ("resource_type", "Local::Fs::File".into()),
        ("native_id", "/srv/orrery/etc/motd".into()),
        (
            "annotations",
            mp_map([("why", Mp::Array(vec![1.into(), Mp::Nil, "x".into()]))]),
        ),
        ("duration_ms", Mp::from(u64::MAX)),
    ]))
}

fn progress_unknown_fields() -> ProgressEvent {
    ProgressEvent {
        operation: Operation::Delete,
        status: OperationStatus::Success,
        request_id: REQUEST_ID.into(),
        resource_type: "Local::Fs::File".into(),
        native_id: Some("/srv/orrery/etc/motd".into()),
        ..Default::default()
    }
}

fn progress_unknown_enum_values_bytes() -> Vec<u8> {
    mp_bytes(&mp_map([
        ("operation", "import".into()),
        ("status", "Paused".into()),
        ("request_id", REQUEST_ID.into()),
        ("resource_type", "Cloud::Vm".into()),
        ("error_code", "QuotaWobble".into()),
        ("message", "paused by an operator".into()),
    ]))
}

fn progress_unknown_enum_values() -> ProgressEvent {
    ProgressEvent {
        operation: Operation::Unknown("import".into()),
        status: OperationStatus::Unknown("Paused".into()),
        request_id: REQUEST_ID.into(),
        resource_type: "Cloud::Vm".into(),
        error_code: Some(ErrorCode::Unknown("QuotaWobble".into())),
        message: Some("paused by an operator".into()),
        ..Default::default()
    }
}

#[test]
fn unknown_progress_values_are_classified_safely() {
    let event: ProgressEvent = decode(&fixture("v1/progress_unknown_enum_values.msgpack")).unwrap();
    // An unknown status is terminal and an unknown code is not retried.
    assert!(event.status.is_terminal());
    assert!(!event.error_code.unwrap().is_retryable());
}

fn cancel() -> Cancel {
    Cancel {
        reason: "apply interrupted".into(),
    }
}

fn protocol_error() -> ProtocolError {
    ProtocolError {
        code: ErrorCode::MalformedMessage,
        message: "body of `create` request: malformed message".into(),
    }
}

// ---------------------------------------------------------------------------
// Edge cases
// ---------------------------------------------------------------------------

fn empty_map_decodes_as_every_default(bytes: &[u8]) -> Result<(), String> {
    fn default_of<T>(bytes: &[u8]) -> Result<(), String>
    where
        T: Serialize + DeserializeOwned + PartialEq + Debug + Default,
    {
        decodes_to(bytes, &T::default())
    }
    default_of::<Envelope>(bytes)?;
    default_of::<Announcement>(bytes)?;
    default_of::<ResourceSchema>(bytes)?;
    default_of::<FieldSchema>(bytes)?;
    default_of::<FieldHint>(bytes)?;
    default_of::<CreateRequest>(bytes)?;
    default_of::<ReadRequest>(bytes)?;
    default_of::<UpdateRequest>(bytes)?;
    default_of::<DeleteRequest>(bytes)?;
    default_of::<StatusRequest>(bytes)?;
    default_of::<ListRequest>(bytes)?;
    default_of::<ListResult>(bytes)?;
    default_of::<ProgressEvent>(bytes)?;
    default_of::<Cancel>(bytes)?;
    default_of::<ProtocolError>(bytes)?;
    decodes_to(bytes, &Value::Map(PropertyMap::new()))?;
    decodes_to(bytes, &BTreeMap::<String, Value>::new())
}

/// Every kind of value, at its extremes.
fn maximal_values() -> CreateRequest {
    let nested = Value::List(vec![
        Value::Null,
        Value::List(vec![Value::List(vec![Value::Int(1)]), Value::List(vec![])]),
        Value::Map(props([
            ("inner", Value::Map(props([("deeper", Value::Bool(false))]))),
            ("empty", Value::Map(PropertyMap::new())),
        ])),
    ]);
    CreateRequest {
        request_id: REQUEST_ID.into(),
        resource_type: "Test::Every::Value".into(),
        label: "ünïcødé ✓ label".into(),
        target: Target {
            name: String::new(),
            config: PropertyMap::new(),
            ..Default::default()
        },
        properties: props([
            ("null", Value::Null),
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("zero", Value::Int(0)),
            ("small", Value::Int(127)),
            ("negative", Value::Int(-33)),
            ("i64_min", Value::Int(i64::MIN)),
            ("i64_max", Value::Int(i64::MAX)),
            ("above_i64", Value::UInt(i64::MAX as u64 + 1)),
            ("u64_max", Value::UInt(u64::MAX)),
            ("float", Value::Float(-1234.5625)),
            ("float_tiny", Value::Float(f64::MIN_POSITIVE)),
            ("float_max", Value::Float(f64::MAX)),
            ("float_negative_zero", Value::Float(-0.0)),
            ("empty_string", Value::String(String::new())),
            (
                "string",
                "a longer string with \"quotes\", tabs\tand 🚀".into(),
            ),
            ("long_string", Value::String("x".repeat(70_000))),
            ("empty_bytes", Value::Bytes(Vec::new())),
            ("bytes", Value::Bytes((0..=255).collect())),
            ("nested", nested),
            ("", "an empty key".into()),
        ]),
    }
}

/// Integers and floats as other MessagePack encoders write them: wider
/// markers than needed, 32-bit floats, 16-bit container headers.
fn values_from_other_encoders_bytes() -> Vec<u8> {
    fn key(out: &mut Vec<u8>, k: &str) {
        out.push(0xa0 | k.len() as u8);
        out.extend_from_slice(k.as_bytes());
    }
    let mut props = Vec::new();
    let mut count = 0u16;
    let mut entry = |k: &str, v: &[u8]| {
        key(&mut props, k);
        props.extend_from_slice(v);
        count += 1;
    };
    entry("i64_marker", &[0xd3, 0, 0, 0, 0, 0, 0, 0, 42]);
    entry("u64_marker", &[0xcf, 0, 0, 0, 0, 0, 0, 0, 7]);
    entry("u32_marker", &[0xce, 0, 1, 0, 0]);
    entry("i8_marker", &[0xd0, 0xff]);
    entry("i16_positive", &[0xd1, 0x01, 0x00]);
    entry("f32", &[0xca, 0x3f, 0xc0, 0, 0]);
    entry("str8", &[0xd9, 3, b'a', b'b', b'c']);
    entry("str16", &[0xda, 0, 1, b'z']);
    entry("bin8", &[0xc4, 2, 0xde, 0xad]);
    entry("bin32_empty", &[0xc6, 0, 0, 0, 0]);
    entry("array16", &[0xdc, 0, 2, 0xc3, 0xc2]);
    entry("array32_empty", &[0xdd, 0, 0, 0, 0]);
    entry("map16", &[0xde, 0, 1, 0xa1, b'k', 0xc0]);
    entry("negative_fixint", &[0xe0]);
    let mut out = vec![0x82];
    key(&mut out, "resource_type");
    key(&mut out, "Test::Foreign");
    key(&mut out, "properties");
    out.push(0xde);
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&props);
    out
}

fn values_from_other_encoders() -> CreateRequest {
    CreateRequest {
        resource_type: "Test::Foreign".into(),
        properties: props([
            ("i64_marker", Value::Int(42)),
            ("u64_marker", Value::Int(7)),
            ("u32_marker", Value::Int(65536)),
            ("i8_marker", Value::Int(-1)),
            ("i16_positive", Value::Int(256)),
            ("f32", Value::Float(1.5)),
            ("str8", "abc".into()),
            ("str16", "z".into()),
            ("bin8", Value::Bytes(vec![0xde, 0xad])),
            ("bin32_empty", Value::Bytes(Vec::new())),
            (
                "array16",
                Value::List(vec![Value::Bool(true), Value::Bool(false)]),
            ),
            ("array32_empty", Value::List(Vec::new())),
            ("map16", Value::Map(props([("k", Value::Null)]))),
            ("negative_fixint", Value::Int(-32)),
        ]),
        ..Default::default()
    }
}
