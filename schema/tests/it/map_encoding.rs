//! Every message is a MessagePack map keyed by field name, never a
//! positional array: a peer that adds a field must not shift the others.

use orrery_schema::{
    encode, Announcement, Cancel, CreateRequest, DeleteRequest, EdgeKind, Envelope, FieldHint,
    FieldSchema, ListRequest, ListResult, MessageKind, ProgressEvent, ProtocolError, ReadRequest,
    ResourceSchema, StatusRequest, Target, TraceContext, UpdateRequest, Uuid, Value,
};
use rmpv::Value as Mp;
use serde::Serialize;

fn is_map_marker(byte: u8) -> bool {
    matches!(byte, 0x80..=0x8f | 0xde | 0xdf)
}

/// Encodes `value`, checks that it starts with a map marker, and returns the
/// map read back with rmpv.
fn encoded_map<T: Serialize>(value: &T) -> Vec<(Mp, Mp)> {
    let bytes = encode(value).unwrap();
    assert!(
        is_map_marker(bytes[0]),
        "{} starts with 0x{:02x}, not a map marker",
        std::any::type_name::<T>(),
        bytes[0]
    );
    let mut rest = &bytes[..];
    let read = rmpv::decode::read_value(&mut rest).unwrap();
    assert!(rest.is_empty(), "one value, nothing after it");
    match read {
        Mp::Map(entries) => entries,
        other => panic!("not a map: {other}"),
    }
}

fn keys(entries: &[(Mp, Mp)]) -> Vec<&str> {
    entries
        .iter()
        .map(|(k, _)| {
            k.as_str()
                .unwrap_or_else(|| panic!("key {k} is not a string"))
        })
        .collect()
}

fn get<'a>(entries: &'a [(Mp, Mp)], key: &str) -> &'a Mp {
    entries
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no key {key}"))
}

fn create_request() -> CreateRequest {
    CreateRequest {
        request_id: "r-1".into(),
        resource_type: "Local::Fs::File".into(),
        label: "motd".into(),
        target: Target {
            name: "local".into(),
            config: [("root".to_owned(), Value::from("/srv"))].into(),
            ..Default::default()
        },
        properties: [("path".to_owned(), Value::from("motd"))].into(),
    }
}

#[test]
fn create_request_is_a_map_of_field_names() {
    let map = encoded_map(&create_request());
    assert_eq!(
        keys(&map),
        [
            "request_id",
            "resource_type",
            "label",
            "target",
            "properties"
        ]
    );
    let target = get(&map, "target").as_map().unwrap();
    assert_eq!(keys(target), ["name", "config"]);
    assert_eq!(get(&map, "label").as_str(), Some("motd"));
}

#[test]
fn minimal_envelope_is_a_map_of_field_names() {
    let env = Envelope {
        protocol: 1,
        id: Uuid::from_u128(7),
        kind: MessageKind::Ping,
        ..Default::default()
    };
    let map = encoded_map(&env);
    // Absent optional fields are left out, not written as nil.
    assert_eq!(keys(&map), ["protocol", "id", "kind", "body"]);
    assert_eq!(get(&map, "kind").as_str(), Some("ping"));
    // The id is 16 raw bytes; the body is `bin`, not an array of integers.
    assert_eq!(
        get(&map, "id"),
        &Mp::Binary(Uuid::from_u128(7).as_bytes().to_vec())
    );
    assert_eq!(get(&map, "body"), &Mp::Binary(Vec::new()));
}

#[test]
fn full_envelope_is_a_map_of_field_names() {
    let env = Envelope::new(MessageKind::Create, &create_request())
        .unwrap()
        .with_deadline_ms(Some(1_000))
        .with_trace(Some(TraceContext {
            traceparent: "00-aa-bb-01".into(),
            tracestate: String::new(),
        }));
    let env = Envelope {
        correlation: Some(Uuid::from_u128(1)),
        ..env
    };
    let map = encoded_map(&env);
    assert_eq!(
        keys(&map),
        [
            "protocol",
            "id",
            "correlation",
            "kind",
            "deadline_ms",
            "trace",
            "body"
        ]
    );
    assert_eq!(keys(get(&map, "trace").as_map().unwrap()), ["traceparent"]);
    // The body is itself an encoded map.
    let body = get(&map, "body").as_slice().unwrap();
    assert!(is_map_marker(body[0]));
}

#[test]
fn every_message_type_is_a_map() {
    fn check<T: Serialize + Default>() {
        encoded_map(&T::default());
    }
    check::<Envelope>();
    check::<Announcement>();
    check::<ResourceSchema>();
    check::<FieldSchema>();
    check::<FieldHint>();
    check::<CreateRequest>();
    check::<ReadRequest>();
    check::<UpdateRequest>();
    check::<DeleteRequest>();
    check::<StatusRequest>();
    check::<ListRequest>();
    check::<ListResult>();
    check::<ProgressEvent>();
    check::<Cancel>();
    check::<ProtocolError>();
}

#[test]
fn enums_are_strings_and_field_hint_writes_both_edge_fields() {
    let hint = FieldHint {
        edge_kind: EdgeKind::AttachesTo,
        ..Default::default()
    };
    let map = encoded_map(&hint);
    assert_eq!(get(&map, "edge_kind").as_str(), Some("attachesTo"));
    assert_eq!(get(&map, "attaches_to").as_bool(), Some(true));
    assert_eq!(get(&map, "update_method").as_str(), Some("inPlace"));

    let map = encoded_map(&FieldHint::default());
    assert_eq!(get(&map, "edge_kind").as_str(), Some("default"));
    assert!(!keys(&map).contains(&"attaches_to"));

    let field = encoded_map(&FieldSchema::default());
    assert_eq!(keys(&field), ["name", "type", "hints"]);
}
