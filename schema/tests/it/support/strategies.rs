//! Strategies for the property tests: every message type, generated.
#![allow(dead_code)]

use orrery_schema::{
    Announcement, Cancel, Capability, ConcurrencyKey, Condition, CreateRequest, DeleteRequest,
    DiscoveryFilter, EdgeKind, Envelope, ErrorCode, FieldHint, FieldSchema, FieldType, LabelConfig,
    ListRequest, ListResult, ListedResource, MatchOp, MessageKind, Operation, OperationStatus,
    ParentScope, ProgressEvent, PropertyMap, ProtocolError, RateLimit, ReadRequest, ResourceSchema,
    StatusRequest, Target, TraceContext, UpdateMethod, UpdateRequest, Uuid, Value,
};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;

/// `n` cases, unless `PROPTEST_CASES` asks for another number.
pub fn cases(n: u32) -> ProptestConfig {
    if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(n)
    }
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

pub fn short_string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z_:]{0,12}",
        1 => ".{0,8}",
    ]
}

pub fn finite_f64() -> impl Strategy<Value = f64> {
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
pub fn value() -> impl Strategy<Value = Value> {
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

pub fn property_map() -> impl Strategy<Value = PropertyMap> {
    btree_map(short_string(), value(), 0..5)
}

/// `Some(Value::Null)` is written as `nil`, which reads back as `None`: the
/// wire cannot tell them apart (see `some_null_context_reads_back_as_none`).
pub fn context() -> impl Strategy<Value = Option<Value>> {
    option::of(value().prop_filter("not null", |v| *v != Value::Null))
}

/// An open enum value: mostly known ones, sometimes one this release does
/// not know (which must survive as `Unknown`).
macro_rules! open_enum_strategy {
    ($name:ident, $ty:ty) => {
        pub fn $name() -> impl Strategy<Value = $ty> {
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

pub fn uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

pub fn target() -> impl Strategy<Value = Target> {
    (short_string(), property_map()).prop_map(|(name, config)| Target {
        name,
        config,
        ..Default::default()
    })
}

pub fn envelope() -> impl Strategy<Value = Envelope> {
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

pub fn field_hint() -> impl Strategy<Value = FieldHint> {
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

pub fn field_schema() -> impl Strategy<Value = FieldSchema> {
    (short_string(), field_type(), short_string(), field_hint()).prop_map(
        |(name, field_type, description, hints)| FieldSchema {
            name,
            field_type,
            description,
            hints,
        },
    )
}

pub fn resource_schema() -> impl Strategy<Value = ResourceSchema> {
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

pub fn announcement() -> impl Strategy<Value = Announcement> {
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

pub fn create_request() -> impl Strategy<Value = CreateRequest> {
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

pub fn read_request() -> impl Strategy<Value = ReadRequest> {
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

pub fn update_request() -> impl Strategy<Value = UpdateRequest> {
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

pub fn delete_request() -> impl Strategy<Value = DeleteRequest> {
    read_request().prop_map(|r| DeleteRequest {
        request_id: r.request_id,
        resource_type: r.resource_type,
        target: r.target,
        native_id: r.native_id,
        properties: r.properties,
    })
}

pub fn status_request() -> impl Strategy<Value = StatusRequest> {
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

pub fn list_request() -> impl Strategy<Value = ListRequest> {
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

pub fn list_result() -> impl Strategy<Value = ListResult> {
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

pub fn progress_event() -> impl Strategy<Value = ProgressEvent> {
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

pub fn cancel() -> impl Strategy<Value = Cancel> {
    short_string().prop_map(|reason| Cancel { reason })
}

pub fn protocol_error() -> impl Strategy<Value = ProtocolError> {
    (error_code(), short_string()).prop_map(|(code, message)| ProtocolError { code, message })
}
