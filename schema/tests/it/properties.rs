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
    decode, encode, Announcement, Cancel, CreateRequest, DecodeError, DeleteRequest, EncodeError,
    Envelope, FieldHint, FieldSchema, FrameDecoder, ListRequest, ListResult, ProgressEvent,
    PropertyMap, ProtocolError, ReadRequest, ResourceSchema, StatusRequest, UpdateRequest, Value,
    MAX_MESSAGE_BYTES,
};
use proptest::collection::vec;
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::support::strategies::*;

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
