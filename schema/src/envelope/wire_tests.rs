//! The direct reader and writer against serde: the same bytes out, the
//! same envelope or the same error back, whatever the input.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::*;
use crate::codec::{self, DecodeError};
use uuid::Uuid;

fn kind() -> impl Strategy<Value = MessageKind> {
    prop_oneof![
        (0..MessageKind::VARIANTS.len())
            .prop_map(|i| MessageKind::from_wire(MessageKind::VARIANTS[i].0)),
        ".{0,40}".prop_map(|s| MessageKind::from_wire(&s)),
    ]
}

fn uint() -> impl Strategy<Value = u64> {
    prop_oneof![0..0x80u64, 0..0x1_0000u64, any::<u64>()]
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        any::<u16>(),
        any::<u128>(),
        option::of(any::<u128>()),
        kind(),
        option::of(uint()),
        option::of((".{0,60}", ".{0,20}")),
        option::of(uint()),
        prop_oneof![vec(any::<u8>(), 0..300), vec(any::<u8>(), 0..70_000)],
    )
        .prop_map(
            |(protocol, id, correlation, kind, deadline_ms, trace, max, body)| Envelope {
                protocol,
                id: Uuid::from_u128(id),
                correlation: correlation.map(Uuid::from_u128),
                kind,
                deadline_ms,
                trace: trace.map(|(traceparent, tracestate)| TraceContext {
                    traceparent,
                    tracestate,
                }),
                max_message_bytes: max,
                body,
            },
        )
}

/// What serde makes of `bytes`, as the decoder always did.
fn serde_decode(bytes: &[u8]) -> Result<Envelope, String> {
    codec::decode::<Envelope>(bytes).map_err(|e| e.to_string())
}

fn direct_decode(bytes: &[u8]) -> Result<Envelope, String> {
    Envelope::decode(bytes).map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn writes_the_bytes_serde_writes_and_reads_them_back(e in envelope()) {
        let bytes = e.encode().unwrap();
        prop_assert_eq!(&bytes, &rmp_serde::to_vec_named(&e).unwrap());
        let (back, end) = decode(&bytes).expect("the direct reader takes what it writes");
        prop_assert_eq!(end, bytes.len());
        prop_assert_eq!(back, e);
    }

    #[test]
    fn decodes_any_mutation_as_serde_does(
        e in envelope(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..6),
        cut in option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = e.encode().unwrap();
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
        prop_assert_eq!(direct_decode(&bytes), serde_decode(&bytes));
    }
}

/// An envelope map of `fields`, each a key and its value, as MessagePack.
fn map(fields: &[(rmpv::Value, rmpv::Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, &rmpv::Value::Map(fields.to_vec())).unwrap();
    out
}

fn s(text: &str) -> rmpv::Value {
    rmpv::Value::from(text)
}

#[test]
fn shapes_the_direct_reader_leaves_to_serde_decode_as_before() {
    let id = rmpv::Value::Binary(vec![7; 16]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "integer keys (serde reads them as field indices)",
            map(&[(0.into(), 1.into()), (3.into(), s("ping"))]),
        ),
        ("a positional array", {
            let mut out = Vec::new();
            let fields = vec![1.into(), id.clone(), rmpv::Value::Nil, s("ping")];
            rmpv::encode::write_value(&mut out, &rmpv::Value::Array(fields)).unwrap();
            out
        }),
        (
            "an unknown field holding a map",
            map(&[
                (s("future"), rmpv::Value::Map(vec![(s("a"), 1.into())])),
                (s("kind"), s("ping")),
            ]),
        ),
        (
            "a repeated field",
            map(&[(s("kind"), s("ping")), (s("kind"), s("pong"))]),
        ),
        (
            "a signed protocol",
            map(&[(s("protocol"), rmpv::Value::from(-1))]),
        ),
        (
            "a protocol over u16",
            map(&[(s("protocol"), rmpv::Value::from(70_000))]),
        ),
        ("a body as a string", map(&[(s("body"), s("text"))])),
        (
            "an id of 15 bytes",
            map(&[(s("id"), rmpv::Value::Binary(vec![1; 15]))]),
        ),
        (
            "an id as a string",
            map(&[(s("id"), s("0190c5b4-8a2e-7000-8000-000000000000"))]),
        ),
        (
            "a kind as bytes",
            map(&[(s("kind"), rmpv::Value::Binary(b"ping".to_vec()))]),
        ),
        (
            "a kind of invalid UTF-8",
            [&[0x81, 0xa4][..], b"kind", &[0xa2, 0xff, 0xfe]].concat(),
        ),
        (
            "a trace as an array",
            map(&[(s("trace"), rmpv::Value::Array(vec![s("00-aa")]))]),
        ),
        (
            "a trace with a repeated field",
            map(&[(
                s("trace"),
                rmpv::Value::Map(vec![(s("traceparent"), s("a")), (s("traceparent"), s("b"))]),
            )]),
        ),
        ("not a map", vec![0x01]),
        (
            "a truncated map",
            map(&[(s("kind"), s("ping"))])[..4].to_vec(),
        ),
    ];
    for (what, bytes) in cases {
        assert!(
            decode(&bytes).is_none(),
            "{what}: the direct reader took it"
        );
        assert_eq!(direct_decode(&bytes), serde_decode(&bytes), "{what}");
    }
}

#[test]
fn shapes_the_direct_reader_takes_decode_as_serde_does() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("an empty map", map(&[])),
        (
            "an unknown scalar field",
            map(&[(s("future"), 5.into()), (s("kind"), s("ping"))]),
        ),
        (
            "an unknown key of invalid UTF-8",
            [
                &[0x82, 0xa1, 0xff, 0x01, 0xa4][..],
                b"kind",
                &[0xa4],
                b"ping",
            ]
            .concat(),
        ),
        (
            "nil options",
            map(&[
                (s("correlation"), rmpv::Value::Nil),
                (s("deadline_ms"), rmpv::Value::Nil),
                (s("trace"), rmpv::Value::Nil),
            ]),
        ),
        (
            "an empty trace",
            map(&[(s("trace"), rmpv::Value::Map(vec![]))]),
        ),
        ("an unknown kind", map(&[(s("kind"), s("teleport"))])),
        (
            "a protocol in uint16",
            vec![
                0x81, 0xa8, b'p', b'r', b'o', b't', b'o', b'c', b'o', b'l', 0xcd, 0x00, 0x01,
            ],
        ),
    ];
    for (what, bytes) in cases {
        assert!(decode(&bytes).is_some(), "{what}: left to serde");
        assert_eq!(direct_decode(&bytes), serde_decode(&bytes), "{what}");
    }
    let mut trailing = map(&[(s("kind"), s("ping"))]);
    trailing.push(0xc0);
    assert_eq!(direct_decode(&trailing), serde_decode(&trailing));
    assert!(direct_decode(&trailing).is_err());
}

#[test]
fn an_oversized_input_is_refused_unread() {
    let bytes = vec![0x80; codec::MAX_MESSAGE_BYTES + 1];
    assert_eq!(direct_decode(&bytes), serde_decode(&bytes));
    assert!(matches!(
        Envelope::decode(&bytes),
        Err(DecodeError::TooLarge { .. })
    ));
}
