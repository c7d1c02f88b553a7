//! The direct readers and writers against serde: `Request::from_envelope`
//! (create, read, update, delete, status) and `ProgressEvent::decode`
//! give `decode`'s message or error whatever the input;
//! `Request::to_envelope` and `ProgressEvent::encode` write `encode`'s
//! bytes.

use std::fmt::Debug;

use orrery_schema::{
    decode, encode, CreateRequest, DeleteRequest, Envelope, MessageKind, ProgressEvent,
    PropertyMap, ReadRequest, Request, RequestError, StatusRequest, UpdateRequest, Value,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use rmpv::Value as Mp;
use serde::de::DeserializeOwned;

use crate::support::strategies::*;

/// What serde makes of `bytes`: the message's debug text, or the error's.
fn serde_reads<T: DeserializeOwned + Debug>(bytes: &[u8], wrap: fn(T) -> Request) -> String {
    match decode::<T>(bytes) {
        Ok(message) => format!("{:?}", wrap(message)),
        Err(e) => format!("error: {e}"),
    }
}

/// What the request path makes of a body of `kind`.
fn request_reads(kind: MessageKind, bytes: &[u8]) -> String {
    let envelope = Envelope {
        kind,
        body: bytes.to_vec(),
        ..Envelope::default()
    };
    match Request::from_envelope(&envelope) {
        Ok(request) => format!("{request:?}"),
        Err(RequestError::Body { source, .. }) => format!("error: {source}"),
        Err(e) => panic!("not a body error: {e}"),
    }
}

/// Serde's and the direct reader's readings of `bytes` as each type.
fn readings(bytes: &[u8]) -> Vec<(String, String)> {
    let progress = |b: &[u8]| match ProgressEvent::decode(b) {
        Ok(event) => format!("{event:?}"),
        Err(e) => format!("error: {e}"),
    };
    let serde_progress = match decode::<ProgressEvent>(bytes) {
        Ok(event) => format!("{event:?}"),
        Err(e) => format!("error: {e}"),
    };
    vec![
        (
            request_reads(MessageKind::Create, bytes),
            serde_reads::<CreateRequest>(bytes, Request::Create),
        ),
        (
            request_reads(MessageKind::Read, bytes),
            serde_reads::<ReadRequest>(bytes, Request::Read),
        ),
        (
            request_reads(MessageKind::Update, bytes),
            serde_reads::<UpdateRequest>(bytes, Request::Update),
        ),
        (
            request_reads(MessageKind::Delete, bytes),
            serde_reads::<DeleteRequest>(bytes, Request::Delete),
        ),
        (
            request_reads(MessageKind::Status, bytes),
            serde_reads::<StatusRequest>(bytes, Request::Status),
        ),
        (progress(bytes), serde_progress),
    ]
}

fn assert_same(bytes: &[u8]) -> Result<(), TestCaseError> {
    for (direct, serde) in readings(bytes) {
        prop_assert_eq!(direct, serde, "bytes {:02x?}", bytes);
    }
    Ok(())
}

fn any_message() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        create_request().prop_map(|m| encode(&m).unwrap()),
        read_request().prop_map(|m| encode(&m).unwrap()),
        update_request().prop_map(|m| encode(&m).unwrap()),
        delete_request().prop_map(|m| encode(&m).unwrap()),
        status_request().prop_map(|m| encode(&m).unwrap()),
        progress_event().prop_map(|m| encode(&m).unwrap()),
    ]
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn reads_every_message_as_serde_does(bytes in any_message()) {
        assert_same(&bytes)?;
    }

    #[test]
    fn writes_the_bytes_serde_writes(
        create in create_request(),
        read in read_request(),
        update in update_request(),
        delete in delete_request(),
        status in status_request(),
        event in progress_event(),
    ) {
        let requests = [
            Request::Create(create),
            Request::Read(read),
            Request::Update(update),
            Request::Delete(delete),
            Request::Status(status),
        ];
        for request in requests {
            let serde = match &request {
                Request::Create(r) => encode(r),
                Request::Read(r) => encode(r),
                Request::Update(r) => encode(r),
                Request::Delete(r) => encode(r),
                Request::Status(r) => encode(r),
                Request::List(r) => encode(r),
            };
            let envelope = request.to_envelope().unwrap();
            prop_assert_eq!(envelope.kind, request.kind());
            prop_assert_eq!(envelope.body, serde.unwrap());
        }
        prop_assert_eq!(event.encode().unwrap(), encode(&event).unwrap());
    }

    #[test]
    fn reads_any_mutation_as_serde_does(
        bytes in any_message(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..6),
        cut in option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = bytes;
        for (at, byte, how) in edits {
            let i = at.index(bytes.len() + 1);
            match how {
                0 if i < bytes.len() => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ if i < bytes.len() => { bytes.remove(i); }
                _ => bytes.push(byte),
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        assert_same(&bytes)?;
    }
}

fn mp(value: Mp) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, &value).unwrap();
    out
}

/// The one value `bytes` encode.
fn raw(bytes: &[u8]) -> Mp {
    rmpv::decode::read_value(&mut &bytes[..]).unwrap()
}

fn map(fields: Vec<(Mp, Mp)>) -> Mp {
    Mp::Map(fields)
}

fn s(text: &str) -> Mp {
    Mp::from(text)
}

/// A create request whose `properties` holds `value` under `"v"`.
fn create_with(value: Mp) -> Vec<u8> {
    mp(map(vec![
        (s("request_id"), s("r")),
        (s("properties"), map(vec![(s("v"), value)])),
    ]))
}

/// A progress event whose `context` is `value`.
fn progress_with(value: Mp) -> Vec<u8> {
    mp(map(vec![
        (s("status"), s("Success")),
        (s("context"), value),
    ]))
}

#[test]
fn values_of_every_kind_are_written_as_serde_writes_them() {
    let values = [
        Value::Float(f64::NAN),
        Value::Float(f64::INFINITY),
        Value::Float(-0.0),
        Value::Int(-33),
        Value::Int(-129),
        Value::Int(i64::MIN),
        Value::Int(127),
        Value::Int(128),
        Value::UInt(u64::MAX),
        Value::Bytes(vec![0; 300]),
        Value::String("é".repeat(40)),
        Value::List((0..20).map(Value::Int).collect()),
    ];
    for value in values {
        let event = ProgressEvent {
            context: Some(value.clone()),
            properties: Some(PropertyMap::from([("v".to_owned(), value)])),
            ..ProgressEvent::default()
        };
        assert_eq!(
            event.encode().unwrap(),
            encode(&event).unwrap(),
            "{event:?}"
        );
    }
}

#[test]
fn every_shape_decodes_as_serde_decodes_it() {
    let mut deep = Mp::Nil;
    for _ in 0..40 {
        deep = Mp::Array(vec![deep]);
    }
    let values: Vec<(&str, Mp)> = vec![
        ("a signed marker holding a positive integer", Mp::from(5i64)),
        ("int 8", raw(&[0xd0, 0x85])),
        ("int 16 holding a small number", raw(&[0xd1, 0x00, 0x01])),
        (
            "uint 64",
            raw(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        ),
        ("a 32-bit float", Mp::F32(1.5)),
        ("a NaN", Mp::F64(f64::NAN)),
        ("an extension type", Mp::Ext(3, vec![1, 2])),
        (
            "a map with an integer key",
            map(vec![(Mp::from(1), s("x"))]),
        ),
        (
            "a map with a binary key",
            map(vec![(Mp::Binary(b"k".to_vec()), s("x"))]),
        ),
        (
            "a repeated key",
            map(vec![(s("k"), Mp::from(1)), (s("k"), Mp::from(2))]),
        ),
        ("a string that is not UTF-8", raw(&[0xa2, 0xff, 0xfe])),
        ("nesting past the direct reader's depth", deep),
        ("bytes", Mp::Binary(vec![0; 40])),
    ];
    for (what, value) in values {
        for bytes in [create_with(value.clone()), progress_with(value)] {
            for (direct, serde) in readings(&bytes) {
                assert_eq!(direct, serde, "{what}");
            }
        }
    }
    let messages: Vec<(&str, Vec<u8>)> = vec![
        (
            "integer keys (serde reads them as field indices)",
            mp(map(vec![(Mp::from(0), s("r")), (Mp::from(1), s("T"))])),
        ),
        (
            "a positional array",
            mp(Mp::Array(vec![s("r"), s("T"), s("label")])),
        ),
        (
            "a field given twice",
            mp(map(vec![
                (s("request_id"), s("a")),
                (s("request_id"), s("b")),
            ])),
        ),
        (
            "an unknown field holding a map",
            mp(map(vec![
                (s("later"), map(vec![])),
                (s("request_id"), s("a")),
            ])),
        ),
        (
            "an unknown scalar field",
            mp(map(vec![
                (s("later"), Mp::from(7)),
                (s("request_id"), s("a")),
            ])),
        ),
        (
            "a string field holding bytes",
            mp(map(vec![(s("request_id"), Mp::Binary(b"a".to_vec()))])),
        ),
        (
            "nil for a string",
            mp(map(vec![(s("request_id"), Mp::Nil)])),
        ),
        (
            "a retry delay in a signed marker",
            mp(map(vec![(s("retry_after_ms"), Mp::from(-1i64))])),
        ),
        ("trailing bytes", {
            let mut out = mp(map(vec![(s("request_id"), s("a"))]));
            out.push(0xc0);
            out
        }),
        ("not a map at all", mp(s("hello"))),
        ("nothing", Vec::new()),
    ];
    for (what, bytes) in messages {
        for (direct, serde) in readings(&bytes) {
            assert_eq!(direct, serde, "{what}");
        }
    }
}
