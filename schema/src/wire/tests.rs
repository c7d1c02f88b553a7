//! The direct readers take what this release writes; what they leave is
//! in `tests/it/direct_codec.rs`, against serde, for every input.

use super::*;
use crate::{
    CreateRequest, ErrorCode, Operation, OperationStatus, ProgressEvent, PropertyMap,
    StatusRequest, Target, Value,
};

fn properties() -> PropertyMap {
    PropertyMap::from([
        ("name".into(), Value::from("thing-1")),
        ("count".into(), Value::Int(-70_000)),
        ("big".into(), Value::UInt(u64::MAX)),
        ("small".into(), Value::Int(5)),
        ("ratio".into(), Value::Float(0.25)),
        ("on".into(), Value::Bool(true)),
        ("none".into(), Value::Null),
        ("raw".into(), Value::Bytes(vec![0, 1, 255])),
        (
            "nested".into(),
            Value::List(vec![
                Value::Map(PropertyMap::from([("k".into(), Value::from("日本"))])),
                Value::Int(i64::MIN),
            ]),
        ),
    ])
}

/// Reads `bytes` with `T`'s direct reader, which must take all of them.
fn direct<T: Direct>(bytes: &[u8]) -> T {
    let mut r = Reader::new(bytes);
    let message = T::read(&mut r).expect("the direct reader takes what serde writes");
    assert_eq!(r.at(), bytes.len());
    message
}

#[test]
fn requests_and_answers_as_written_are_read_directly() {
    let create = CreateRequest {
        request_id: "r-1".into(),
        resource_type: "Testbed::Noop::Thing".into(),
        label: "a".into(),
        target: Target {
            name: "t".into(),
            config: properties(),
        },
        properties: properties(),
    };
    let bytes = crate::encode(&create).unwrap();
    assert_eq!(direct::<CreateRequest>(&bytes), create);

    let status = StatusRequest {
        operation: Operation::Unknown("later".into()),
        context: Some(Value::Map(properties())),
        ..StatusRequest::default()
    };
    let bytes = crate::encode(&status).unwrap();
    assert_eq!(direct::<StatusRequest>(&bytes), status);

    let mut event = ProgressEvent::success(Operation::Create, "r-1", "T", "n-1", properties());
    event.status = OperationStatus::InProgress;
    event.error_code = Some(ErrorCode::Throttling);
    event.message = Some("wait".into());
    event.retry_after_ms = Some(1 << 40);
    event.context = Some(Value::from("state"));
    let bytes = crate::encode(&event).unwrap();
    assert_eq!(direct::<ProgressEvent>(&bytes), event);
}

#[test]
fn values_nested_past_the_readers_depth_are_left_to_serde() {
    let mut deep = Value::Null;
    for _ in 0..=MAX_VALUE_DEPTH {
        deep = Value::List(vec![deep]);
    }
    let event = ProgressEvent {
        context: Some(deep),
        ..ProgressEvent::default()
    };
    let bytes = crate::encode(&event).unwrap();
    assert!(ProgressEvent::read(&mut Reader::new(&bytes)).is_none());
    // ... which decodes them as before.
    assert_eq!(ProgressEvent::decode(&bytes).unwrap(), event);
}
