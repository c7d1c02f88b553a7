//! Property tests of the codec: every message round-trips, and no input,
//! however hostile, makes a decoder panic, overflow its stack or allocate
//! without bound.
//!
//! Case counts are kept small so the file runs in a few seconds in a debug
//! build; raise `PROPTEST_CASES` locally for a longer soak, or use the
//! cargo-fuzz targets in `schema/fuzz/`.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use orrery_schema::{
    decode, encode, Announcement, Cancel, Capability, ConcurrencyKey, Condition, CreateRequest,
    DecodeError, DeleteRequest, DiscoveryFilter, EdgeKind, EncodeError, Envelope, ErrorCode,
    FieldHint, FieldSchema, FieldType, FrameDecoder, LabelConfig, ListRequest, ListResult,
    ListedResource, MatchOp, MessageKind, Operation, OperationStatus, ParentScope, ProgressEvent,
    PropertyMap, ProtocolError, RateLimit, ReadRequest, ResourceSchema, StatusRequest, Target,
    TraceContext, UpdateMethod, UpdateRequest, Uuid, Value, MAX_MESSAGE_BYTES,
};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// `n` cases, unless `PROPTEST_CASES` asks for another number.
fn cases(n: u32) -> ProptestConfig {
    if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(n)
    }
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

fn short_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z_:]{0,12}",
        1 => ".{0,8}",
    ]
}

fn finite_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        Just(0.0),
        Just(-0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
    ]
}

/// Any property value: finite floats only (NaN is not equal to itself),
/// integers in their one canonical variant, bounded depth and size.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        ((i64::MAX as u64 + 1)..=u64::MAX).prop_map(Value::UInt),
        finite_f64().prop_map(Value::Float),
        short_string().prop_map(Value::String),
        vec(any::<u8>(), 0..16).prop_map(Value::Bytes),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::List),
            btree_map(short_string(), inner, 0..6).prop_map(Value::Map),
        ]
    })
}

fn property_map() -> impl Strategy<Value = PropertyMap> {
    btree_map(short_string(), value(), 0..5)
}

/// `Some(Value::Null)` is written as `nil`, which reads back as `None`: the
/// wire cannot tell them apart (see `some_null_context_reads_back_as_none`).
fn context() -> impl Strategy<Value = Option<Value>> {
    option::of(value().prop_filter("not null", |v| *v != Value::Null))
}

/// An open enum value: mostly known ones, sometimes one this release does
/// not know (which must survive as `Unknown`).
macro_rules! open_enum_strategy {
    ($name:ident, $ty:ty) => {
        fn $name() -> impl Strategy<Value = $ty> {
            let known: Vec<&'static str> = <$ty>::VARIANTS.iter().map(|(w, _)| *w).collect();
            prop_oneof![
                4 => proptest::sample::select(known).prop_map(<$ty>::from_wire),
                1 => "[A-Za-z]{0,10}".prop_map(|s| <$ty>::from_wire(&s)),
            ]
        }
    };
}

open_enum_strategy!(message_kind, MessageKind);
open_enum_strategy!(operation, Operation);
open_enum_strategy!(operation_status, OperationStatus);
open_enum_strategy!(error_code, ErrorCode);
open_enum_strategy!(edge_kind, EdgeKind);
open_enum_strategy!(update_method, UpdateMethod);
open_enum_strategy!(field_type, FieldType);
open_enum_strategy!(capability, Capability);
open_enum_strategy!(match_op, MatchOp);

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

fn target() -> impl Strategy<Value = Target> {
    (short_string(), property_map()).prop_map(|(name, config)| Target { name, config })
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        any::<u16>(),
        uuid(),
        option::of(uuid()),
        message_kind(),
        option::of(any::<u64>()),
        option::of(
            (short_string(), short_string()).prop_map(|(traceparent, tracestate)| TraceContext {
                traceparent,
                tracestate,
            }),
        ),
        vec(any::<u8>(), 0..64),
    )
        .prop_map(
            |(protocol, id, correlation, kind, deadline_ms, trace, body)| Envelope {
                protocol,
                id,
                correlation,
                kind,
                deadline_ms,
                trace,
                // Any value round-trips; the deadline's draw serves both.
                max_message_bytes: deadline_ms.map(|d| d.rotate_left(7)),
                body,
            },
        )
}

fn field_hint() -> impl Strategy<Value = FieldHint> {
    (any::<[bool; 7]>(), update_method(), edge_kind()).prop_map(|(b, update_method, edge_kind)| {
        FieldHint {
            create_only: b[0],
            write_only: b[1],
            read_only: b[2],
            required: b[3],
            required_on_create: b[4],
            opaque: b[5],
            provider_default: b[6],
            update_method,
            edge_kind,
        }
    })
}

fn field_schema() -> impl Strategy<Value = FieldSchema> {
    (short_string(), field_type(), short_string(), field_hint()).prop_map(
        |(name, field_type, description, hints)| FieldSchema {
            name,
            field_type,
            description,
            hints,
        },
    )
}

fn resource_schema() -> impl Strategy<Value = ResourceSchema> {
    (
        short_string(),
        short_string(),
        vec(short_string(), 0..3),
        vec(field_schema(), 0..4),
        any::<bool>(),
        option::of((short_string(), any::<u32>())),
        option::of((
            short_string(),
            btree_map(short_string(), short_string(), 0..3),
        )),
    )
        .prop_map(
            |(type_name, description, identifier, fields, discoverable, concurrency, parent)| {
                ResourceSchema {
                    type_name,
                    description,
                    identifier,
                    fields,
                    discoverable,
                    concurrency: concurrency.map(|(key, limit)| ConcurrencyKey { key, limit }),
                    parent: parent.map(|(resource_type, properties)| ParentScope {
                        resource_type,
                        properties,
                    }),
                }
            },
        )
}

fn announcement() -> impl Strategy<Value = Announcement> {
    let rate_limit = (finite_f64(), any::<u32>(), any::<u32>()).prop_map(
        |(requests_per_second, burst, max_in_flight)| RateLimit {
            requests_per_second,
            burst,
            max_in_flight,
        },
    );
    let condition =
        (short_string(), match_op(), value()).prop_map(|(property, op, value)| Condition {
            property,
            op,
            value,
        });
    let filter =
        (short_string(), vec(condition, 0..3)).prop_map(|(resource_type, exclude_when)| {
            DiscoveryFilter {
                resource_type,
                exclude_when,
            }
        });
    let labels = (option::of(short_string()), option::of(short_string())).prop_map(
        |(name_property, tags_property)| LabelConfig {
            name_property,
            tags_property,
        },
    );
    (
        (any::<u16>(), short_string(), short_string(), short_string()),
        vec(capability(), 0..4),
        rate_limit,
        vec(filter, 0..2),
        labels,
        vec(resource_schema(), 0..3),
        vec(field_schema(), 0..3),
        short_string(),
    )
        .prop_map(
            |(
                (protocol, name, version, namespace),
                capabilities,
                rate_limit,
                discovery_filters,
                label_config,
                resources,
                target_config,
                sdk,
            )| Announcement {
                protocol,
                name,
                version,
                namespace,
                capabilities,
                rate_limit,
                discovery_filters,
                label_config,
                resources,
                target_config,
                sdk,
            },
        )
}

fn create_request() -> impl Strategy<Value = CreateRequest> {
    (
        short_string(),
        short_string(),
        short_string(),
        target(),
        property_map(),
    )
        .prop_map(
            |(request_id, resource_type, label, target, properties)| CreateRequest {
                request_id,
                resource_type,
                label,
                target,
                properties,
            },
        )
}

fn read_request() -> impl Strategy<Value = ReadRequest> {
    (
        short_string(),
        short_string(),
        target(),
        short_string(),
        property_map(),
    )
        .prop_map(
            |(request_id, resource_type, target, native_id, properties)| ReadRequest {
                request_id,
                resource_type,
                target,
                native_id,
                properties,
            },
        )
}

fn update_request() -> impl Strategy<Value = UpdateRequest> {
    (
        (short_string(), short_string(), short_string()),
        target(),
        short_string(),
        property_map(),
        property_map(),
    )
        .prop_map(
            |((request_id, resource_type, label), target, native_id, prior, properties)| {
                UpdateRequest {
                    request_id,
                    resource_type,
                    label,
                    target,
                    native_id,
                    prior_properties: prior,
                    properties,
                }
            },
        )
}

fn delete_request() -> impl Strategy<Value = DeleteRequest> {
    read_request().prop_map(|r| DeleteRequest {
        request_id: r.request_id,
        resource_type: r.resource_type,
        target: r.target,
        native_id: r.native_id,
        properties: r.properties,
    })
}

fn status_request() -> impl Strategy<Value = StatusRequest> {
    (
        short_string(),
        operation(),
        short_string(),
        target(),
        short_string(),
        context(),
    )
        .prop_map(
            |(request_id, operation, resource_type, target, native_id, context)| StatusRequest {
                request_id,
                operation,
                resource_type,
                target,
                native_id,
                context,
            },
        )
}

fn list_request() -> impl Strategy<Value = ListRequest> {
    (
        short_string(),
        short_string(),
        target(),
        any::<u32>(),
        option::of(short_string()),
        option::of((short_string(), property_map())),
    )
        .prop_map(
            |(request_id, resource_type, target, page_size, page_token, parent)| ListRequest {
                request_id,
                resource_type,
                target,
                page_size,
                page_token,
                parent: parent.map(|(native_id, properties)| ListedResource {
                    native_id,
                    properties,
                }),
            },
        )
}

fn list_result() -> impl Strategy<Value = ListResult> {
    let listed =
        (short_string(), property_map()).prop_map(|(native_id, properties)| ListedResource {
            native_id,
            properties,
        });
    (
        (short_string(), short_string()),
        operation_status(),
        option::of(error_code()),
        option::of(short_string()),
        vec(listed, 0..4),
        option::of(short_string()),
    )
        .prop_map(
            |((request_id, resource_type), status, error_code, message, resources, next)| {
                ListResult {
                    request_id,
                    resource_type,
                    status,
                    error_code,
                    message,
                    resources,
                    next_page_token: next,
                }
            },
        )
}

fn progress_event() -> impl Strategy<Value = ProgressEvent> {
    (
        (
            operation(),
            operation_status(),
            short_string(),
            short_string(),
        ),
        option::of(short_string()),
        option::of(property_map()),
        option::of(error_code()),
        option::of(short_string()),
        option::of(any::<u64>()),
        context(),
    )
        .prop_map(
            |(
                (operation, status, request_id, resource_type),
                native_id,
                properties,
                error_code,
                message,
                retry_after_ms,
                context,
            )| ProgressEvent {
                operation,
                status,
                request_id,
                resource_type,
                native_id,
                properties,
                error_code,
                message,
                retry_after_ms,
                context,
            },
        )
}

fn cancel() -> impl Strategy<Value = Cancel> {
    short_string().prop_map(|reason| Cancel { reason })
}

fn protocol_error() -> impl Strategy<Value = ProtocolError> {
    (error_code(), short_string()).prop_map(|(code, message)| ProtocolError { code, message })
}

/// Decodes bytes as one message type, keeping only the outcome.
type Decoder = fn(&[u8]) -> Result<(), DecodeError>;

fn decode_as<T: DeserializeOwned>(bytes: &[u8]) -> Result<(), DecodeError> {
    decode::<T>(bytes).map(drop)
}

/// A valid encoding of some message type, with the decoder of that type.
fn any_encoded_message() -> impl Strategy<Value = (Vec<u8>, Decoder)> {
    fn enc<T: Serialize + DeserializeOwned>(v: T) -> (Vec<u8>, Decoder) {
        (
            encode(&v).expect("generated message encodes"),
            decode_as::<T>,
        )
    }
    prop_oneof![
        envelope().prop_map(enc),
        announcement().prop_map(enc),
        create_request().prop_map(enc),
        read_request().prop_map(enc),
        update_request().prop_map(enc),
        delete_request().prop_map(enc),
        status_request().prop_map(enc),
        list_request().prop_map(enc),
        list_result().prop_map(enc),
        progress_event().prop_map(enc),
        cancel().prop_map(enc),
        protocol_error().prop_map(enc),
    ]
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn round_trips<T>(value: &T) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let bytes = encode(value).map_err(|e| TestCaseError::fail(format!("encode: {e}")))?;
    let back: T = decode(&bytes).map_err(|e| TestCaseError::fail(format!("decode: {e}")))?;
    prop_assert_eq!(&back, value);
    Ok(())
}

/// Feeds `bytes` to the decoder of every message type and to a frame
/// decoder. Whatever they answer is fine; panicking is not.
fn decode_everything(bytes: &[u8]) {
    fn one<T: DeserializeOwned>(bytes: &[u8]) {
        let _ = decode::<T>(bytes);
    }
    one::<Envelope>(bytes);
    one::<Announcement>(bytes);
    one::<ResourceSchema>(bytes);
    one::<FieldSchema>(bytes);
    one::<FieldHint>(bytes);
    one::<CreateRequest>(bytes);
    one::<ReadRequest>(bytes);
    one::<UpdateRequest>(bytes);
    one::<DeleteRequest>(bytes);
    one::<StatusRequest>(bytes);
    one::<ListRequest>(bytes);
    one::<ListResult>(bytes);
    one::<ProgressEvent>(bytes);
    one::<Cancel>(bytes);
    one::<ProtocolError>(bytes);
    one::<Value>(bytes);
    one::<PropertyMap>(bytes);

    let mut frames = FrameDecoder::new(64);
    let mut buf = bytes::BytesMut::from(bytes);
    // Each call consumes bytes or asks for more, so this ends.
    for _ in 0..=bytes.len() {
        match frames.decode(&mut buf) {
            Ok(Some(frame)) => one::<Envelope>(&frame),
            Ok(None) => break,
            Err(_) => continue,
        }
    }
}

/// Asserts that every message type rejects `bytes`.
macro_rules! rejected_by_all {
    ($bytes:expr, $($t:ty),+ $(,)?) => {{
        let bytes: &[u8] = $bytes;
        $(
            assert!(
                decode::<$t>(bytes).is_err(),
                "{} accepted {} hostile bytes",
                stringify!($t),
                bytes.len()
            );
        )+
    }};
}

fn rejected_by_every_message(bytes: &[u8]) {
    rejected_by_all!(
        bytes,
        Envelope,
        Announcement,
        ResourceSchema,
        FieldSchema,
        FieldHint,
        CreateRequest,
        ReadRequest,
        UpdateRequest,
        DeleteRequest,
        StatusRequest,
        ListRequest,
        ListResult,
        ProgressEvent,
        Cancel,
        ProtocolError,
        Value,
        PropertyMap,
    );
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn value_round_trips(v in value()) {
        round_trips(&v)?;
    }

    #[test]
    fn envelope_round_trips(v in envelope()) {
        round_trips(&v)?;
    }

    #[test]
    fn field_hint_round_trips(v in field_hint()) {
        round_trips(&v)?;
    }

    #[test]
    fn announcement_round_trips(v in announcement()) {
        round_trips(&v)?;
    }

    #[test]
    fn create_request_round_trips(v in create_request()) {
        round_trips(&v)?;
    }

    #[test]
    fn read_request_round_trips(v in read_request()) {
        round_trips(&v)?;
    }

    #[test]
    fn update_request_round_trips(v in update_request()) {
        round_trips(&v)?;
    }

    #[test]
    fn delete_request_round_trips(v in delete_request()) {
        round_trips(&v)?;
    }

    #[test]
    fn status_request_round_trips(v in status_request()) {
        round_trips(&v)?;
    }

    #[test]
    fn list_request_round_trips(v in list_request()) {
        round_trips(&v)?;
    }

    #[test]
    fn list_result_round_trips(v in list_result()) {
        round_trips(&v)?;
    }

    #[test]
    fn progress_event_round_trips(v in progress_event()) {
        round_trips(&v)?;
    }

    #[test]
    fn cancel_round_trips(v in cancel()) {
        round_trips(&v)?;
    }

    #[test]
    fn protocol_error_round_trips(v in protocol_error()) {
        round_trips(&v)?;
    }

    #[test]
    fn envelope_body_round_trips(kind in message_kind(), body in progress_event()) {
        let env = Envelope::new(kind.clone(), &body).unwrap();
        let back = Envelope::decode(&env.encode().unwrap()).unwrap();
        prop_assert_eq!(&back.kind, &kind);
        prop_assert_eq!(back.body::<ProgressEvent>().unwrap(), body);
    }
}

// ---------------------------------------------------------------------------
// Garbage in, error out
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        decode_everything(&bytes);
    }

    /// Bytes that look like MessagePack: mostly markers and small lengths.
    #[test]
    fn marker_soup_never_panics(bytes in vec(
        prop_oneof![
            Just(0x80u8), Just(0x81), Just(0x90), Just(0x91), Just(0xa1), Just(0xc0),
            Just(0xc4), Just(0xd9), Just(0xdc), Just(0xde), Just(0xdf), Just(0xdd),
            Just(0xc6), Just(0xdb), Just(0xc7), Just(0xd4), Just(0xcb), Just(0xcf),
            Just(0xff), Just(0x00), any::<u8>(),
        ],
        0..128,
    )) {
        decode_everything(&bytes);
    }
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn flipped_bytes_never_panic(
        (mut bytes, _) in any_encoded_message(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        for (at, xor) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= xor;
        }
        decode_everything(&bytes);
    }

    #[test]
    fn truncated_messages_are_rejected(
        (bytes, decode_own_type) in any_encoded_message(),
        cut in any::<prop::sample::Index>(),
    ) {
        let prefix = &bytes[..cut.index(bytes.len())];
        decode_everything(prefix);
        // A strict prefix of a map is never a whole message.
        prop_assert!(decode_own_type(prefix).is_err());
        prop_assert!(decode::<Value>(prefix).is_err());
    }

    #[test]
    fn appended_bytes_are_rejected_as_trailing(
        (bytes, decode_own_type) in any_encoded_message(),
        extra in vec(any::<u8>(), 1..16),
    ) {
        let mut longer = bytes.clone();
        longer.extend_from_slice(&extra);
        decode_everything(&longer);
        for result in [decode_own_type(&longer), decode_as::<Value>(&longer)] {
            match result {
                Err(DecodeError::TrailingBytes { trailing }) => {
                    prop_assert_eq!(trailing, extra.len());
                }
                other => prop_assert!(false, "expected TrailingBytes, got {:?}", other),
            }
        }
    }
}

#[test]
fn appended_bytes_after_every_message_type_are_trailing() {
    fn check<T: Serialize + DeserializeOwned + Debug + Default>() {
        let mut bytes = encode(&T::default()).unwrap();
        bytes.extend_from_slice(&[0xc0, 0x01]);
        match decode::<T>(&bytes) {
            Err(DecodeError::TrailingBytes { trailing: 2 }) => {}
            other => panic!("{}: {other:?}", std::any::type_name::<T>()),
        }
    }
    check::<Envelope>();
    check::<Announcement>();
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

// ---------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------

#[test]
fn input_over_the_limit_is_too_large_before_parsing() {
    let bytes = vec![0x80u8; MAX_MESSAGE_BYTES + 1];
    match decode::<Envelope>(&bytes) {
        Err(DecodeError::TooLarge { len, max }) => {
            assert_eq!(len, MAX_MESSAGE_BYTES + 1);
            assert_eq!(max, MAX_MESSAGE_BYTES);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(matches!(
        decode::<Value>(&bytes),
        Err(DecodeError::TooLarge { .. })
    ));
}

#[test]
fn a_message_of_exactly_the_limit_decodes_and_one_byte_more_does_not_encode() {
    // `Cancel { reason }` is a fixmap, the fixstr key "reason" and a str32.
    let overhead = 1 + 7 + 5;
    let at_limit = Cancel {
        reason: "a".repeat(MAX_MESSAGE_BYTES - overhead),
    };
    let bytes = encode(&at_limit).unwrap();
    assert_eq!(bytes.len(), MAX_MESSAGE_BYTES);
    assert_eq!(decode::<Cancel>(&bytes).unwrap(), at_limit);

    let over = Cancel {
        reason: "a".repeat(MAX_MESSAGE_BYTES - overhead + 1),
    };
    assert!(matches!(
        encode(&over),
        Err(EncodeError::TooLarge { len, .. }) if len == MAX_MESSAGE_BYTES + 1
    ));
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    // 10 000 nested one-element arrays, then nil.
    let mut arrays = vec![0x91u8; 10_000];
    arrays.push(0xc0);
    rejected_by_every_message(&arrays);

    // 10 000 nested one-entry maps {"a": {"a": …}}.
    let mut maps = Vec::new();
    for _ in 0..10_000 {
        maps.extend_from_slice(&[0x81, 0xa1, b'a']);
    }
    maps.push(0xc0);
    rejected_by_every_message(&maps);

    // The nesting hidden inside a field that accepts any value.
    let mut status = vec![0x81, 0xa7];
    status.extend_from_slice(b"context");
    status.extend_from_slice(&arrays);
    assert!(decode::<StatusRequest>(&status).is_err());
    let mut progress = vec![0x81, 0xaa];
    progress.extend_from_slice(b"properties");
    progress.extend_from_slice(&maps[..maps.len() - 1]);
    progress.push(0x80);
    assert!(decode::<ProgressEvent>(&progress).is_err());
}

#[test]
fn deep_nesting_is_rejected_on_half_the_default_stack() {
    // Decoding `MAX_DEPTH` levels takes about 300 KiB of stack in a debug
    // build (under 64 KiB in release). 1 MiB is half of what std and tokio
    // give a thread by default, so a decoder on any such thread is safe.
    let handle = std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(|| {
            let mut bytes = vec![0x91u8; 100_000];
            bytes.push(0xc0);
            rejected_by_every_message(&bytes);
        })
        .unwrap();
    handle.join().expect("decoder panicked");
}

#[test]
fn moderate_nesting_within_the_limit_decodes() {
    let mut value = Value::Null;
    for _ in 0..60 {
        value = Value::List(vec![value]);
    }
    let bytes = encode(&value).unwrap();
    assert_eq!(decode::<Value>(&bytes).unwrap(), value);
}

#[test]
fn huge_claimed_lengths_in_tiny_inputs_fail_fast() {
    let started = Instant::now();
    let headers: &[&[u8]] = &[
        &[0xc6, 0xff, 0xff, 0xff, 0xff],       // bin32, 4 GiB
        &[0xdb, 0xff, 0xff, 0xff, 0xff],       // str32, 4 GiB
        &[0xdd, 0xff, 0xff, 0xff, 0xff],       // array32, 4 G elements
        &[0xdf, 0xff, 0xff, 0xff, 0xff],       // map32, 4 G entries
        &[0xc9, 0xff, 0xff, 0xff, 0xff, 0x01], // ext32, 4 GiB
    ];
    for header in headers {
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(b"tiny");
        rejected_by_every_message(&bytes);
    }
    // Inside a message, where the field's type asks for exactly that shape.
    for (key, marker) in [
        ("body", 0xc6u8),
        ("kind", 0xdb),
        ("traceparent", 0xdb),
        ("resources", 0xdd),
        ("properties", 0xdf),
    ] {
        let mut bytes = vec![0x81, 0xa0 | key.len() as u8];
        bytes.extend_from_slice(key.as_bytes());
        bytes.extend_from_slice(&[marker, 0xff, 0xff, 0xff, 0xff, 0x00]);
        rejected_by_every_message(&bytes);
    }
    // Not a timing benchmark: a guard against reading or allocating what a
    // header claims. Each of these takes microseconds.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "hostile length headers took {:?}",
        started.elapsed()
    );
}

#[test]
fn frame_decoder_skips_oversized_and_recovers() {
    let good = encode(&Envelope::default()).unwrap();
    let mut stream = Vec::new();
    stream.extend_from_slice(&u32::MAX.to_be_bytes());
    stream.extend_from_slice(&[0u8; 32]);
    let mut frames = FrameDecoder::new(1024);
    let mut buf = bytes::BytesMut::from(&stream[..]);
    assert!(frames.decode(&mut buf).is_err());
    assert!(frames.decode(&mut buf).unwrap().is_none());
    assert!(buf.is_empty());
    // The decoder still owes u32::MAX - 32 skipped bytes; a fresh one sees
    // the next frame.
    let mut frames = FrameDecoder::default();
    let mut buf = bytes::BytesMut::new();
    buf.extend_from_slice(&(good.len() as u32).to_be_bytes());
    buf.extend_from_slice(&good);
    let frame = frames.decode(&mut buf).unwrap().unwrap();
    assert_eq!(Envelope::decode(&frame).unwrap(), Envelope::default());
}

// ---------------------------------------------------------------------------
// Documented normalisations
// ---------------------------------------------------------------------------

/// `context: Some(Value::Null)` is written as `nil` and reads back as `None`:
/// MessagePack has one nil, so "absent" and "present but null" are the same
/// on the wire for optional values. Plugins must not rely on the difference.
#[test]
fn some_null_context_reads_back_as_none() {
    let event = ProgressEvent {
        context: Some(Value::Null),
        ..Default::default()
    };
    let back: ProgressEvent = decode(&encode(&event).unwrap()).unwrap();
    assert_eq!(back.context, None);
}

/// A positive `Int` and a small `UInt` are the same MessagePack integer;
/// decoding always yields the canonical `Int`.
#[test]
fn integers_decode_to_their_canonical_variant() {
    let back: Value = decode(&encode(&Value::UInt(5)).unwrap()).unwrap();
    assert_eq!(back, Value::Int(5));
    let back: Value = decode(&encode(&Value::Int(i64::MAX)).unwrap()).unwrap();
    assert_eq!(back, Value::Int(i64::MAX));
    let back: Value = decode(&encode(&Value::UInt(u64::MAX)).unwrap()).unwrap();
    assert_eq!(back, Value::UInt(u64::MAX));
}
