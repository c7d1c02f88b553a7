//! Peers of different releases talking to each other.
//!
//! `v1` below is a frozen copy of message definitions as an older release
//! had them: `FieldHint` with only the deprecated boolean `attaches_to` (no
//! `edge_kind`, no `read_only`), fewer enum values, fewer fields. `v3` is a
//! plausible future release: new fields (`ResourceSchema::cost_center`, …)
//! and new enum values (`EdgeKind` `weakReference`, `OperationStatus`
//! `Paused`, …). The current release is `orrery_schema` itself.
//!
//! Frozen structs go through `rmp_serde::to_vec_named` (what every release
//! writes) and `orrery_schema::decode` (bounded decoding of untrusted
//! bytes); the current side through `orrery_schema::encode`/`decode`.
//!
//! The tests prove, in both directions and through relays: fields both sides
//! know survive, unknown fields are ignored, unknown enum values are kept
//! verbatim, and the deprecated `attaches_to` folds into `edge_kind` and is
//! still written for old peers.
//!
//! Never edit `v1` to follow a change in the current definitions: it stands
//! for binaries already deployed.

use std::collections::BTreeMap;

use orrery_schema::{
    decode, encode, Announcement, Capability, EdgeKind, ErrorCode, FieldHint, FieldSchema,
    FieldType, LabelConfig, Operation, OperationStatus, ProgressEvent, PropertyMap, RateLimit,
    ResourceSchema, UpdateMethod, Value,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A string-valued enum with a catch-all, written the way any release must
/// write one; the frozen copies cannot use the crate-private `open_enum!`.
macro_rules! frozen_enum {
    (pub enum $name:ident { $($variant:ident = $wire:literal,)+ } default $default:ident) => {
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum $name {
            $($variant,)+
            Unknown(String),
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$default
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(match self {
                    $($name::$variant => $wire,)+
                    $name::Unknown(other) => other,
                })
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let wire = String::deserialize(d)?;
                Ok(match wire.as_str() {
                    $($wire => $name::$variant,)+
                    _ => $name::Unknown(wire),
                })
            }
        }
    };
}

/// The older release.
mod v1 {
    use super::*;

    frozen_enum! {
        pub enum UpdateMethod {
            InPlace = "inPlace",
            DeleteBeforeCreate = "deleteBeforeCreate",
        } default InPlace
    }

    frozen_enum! {
        pub enum FieldType {
            String = "string",
            Integer = "integer",
            Boolean = "boolean",
            Any = "any",
        } default Any
    }

    frozen_enum! {
        pub enum Capability {
            Cancel = "cancel",
            Ping = "ping",
        } default Ping
    }

    frozen_enum! {
        pub enum Operation {
            Create = "create",
            Read = "read",
            Update = "update",
            Delete = "delete",
        } default Read
    }

    frozen_enum! {
        pub enum OperationStatus {
            Success = "Success",
            Failure = "Failure",
            InProgress = "InProgress",
        } default Failure
    }

    frozen_enum! {
        pub enum ErrorCode {
            InvalidRequest = "InvalidRequest",
            AlreadyExists = "AlreadyExists",
            NotFound = "NotFound",
            Throttling = "Throttling",
            InternalFailure = "InternalFailure",
        } default InternalFailure
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct FieldHint {
        pub create_only: bool,
        pub write_only: bool,
        pub required: bool,
        pub required_on_create: bool,
        pub opaque: bool,
        pub provider_default: bool,
        pub update_method: UpdateMethod,
        /// This release's only way to say "attaches to".
        pub attaches_to: bool,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct FieldSchema {
        pub name: String,
        #[serde(rename = "type")]
        pub field_type: FieldType,
        pub description: String,
        pub hints: FieldHint,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct ResourceSchema {
        pub type_name: String,
        pub description: String,
        pub identifier: Vec<String>,
        pub fields: Vec<FieldSchema>,
        pub discoverable: bool,
    }

    /// No rate limit, discovery filters, label config or sdk yet.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Announcement {
        pub protocol: u16,
        pub name: String,
        pub version: String,
        pub namespace: String,
        pub capabilities: Vec<Capability>,
        pub resources: Vec<ResourceSchema>,
    }

    /// No `retry_after_ms` or `context` yet; absent options written as nil.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct ProgressEvent {
        pub operation: Operation,
        pub status: OperationStatus,
        pub request_id: String,
        pub resource_type: String,
        pub native_id: Option<String>,
        pub properties: Option<BTreeMap<String, Value>>,
        pub error_code: Option<ErrorCode>,
        pub message: Option<String>,
    }
}

/// A future release.
mod v3 {
    use super::*;

    frozen_enum! {
        pub enum EdgeKind {
            Default = "default",
            AttachesTo = "attachesTo",
            RuntimeDependency = "runtimeDependency",
            WeakReference = "weakReference",
        } default Default
    }

    frozen_enum! {
        pub enum UpdateMethod {
            InPlace = "inPlace",
            DeleteBeforeCreate = "deleteBeforeCreate",
            CreateBeforeDelete = "createBeforeDelete",
        } default InPlace
    }

    frozen_enum! {
        pub enum FieldType {
            String = "string",
            Integer = "integer",
            Number = "number",
            Boolean = "boolean",
            List = "list",
            Map = "map",
            Bytes = "bytes",
            Any = "any",
            IpAddress = "ipAddress",
        } default Any
    }

    frozen_enum! {
        pub enum Capability {
            Cancel = "cancel",
            Concurrent = "concurrent",
            Ping = "ping",
            TraceContext = "traceContext",
            List = "list",
            Streaming = "streaming",
        } default Ping
    }

    frozen_enum! {
        pub enum Operation {
            Create = "create",
            Read = "read",
            Update = "update",
            Delete = "delete",
            Status = "status",
            List = "list",
            Import = "import",
        } default Read
    }

    frozen_enum! {
        pub enum OperationStatus {
            Success = "Success",
            Failure = "Failure",
            InProgress = "InProgress",
            Pending = "Pending",
            Canceled = "Canceled",
            Paused = "Paused",
        } default Failure
    }

    frozen_enum! {
        pub enum ErrorCode {
            Throttling = "Throttling",
            NotFound = "NotFound",
            InternalFailure = "InternalFailure",
            BudgetExceeded = "BudgetExceeded",
        } default InternalFailure
    }

    /// Still writes the deprecated `attaches_to` for the oldest peers.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct FieldHint {
        pub create_only: bool,
        pub write_only: bool,
        pub read_only: bool,
        pub required: bool,
        pub required_on_create: bool,
        pub opaque: bool,
        pub provider_default: bool,
        pub update_method: UpdateMethod,
        pub edge_kind: EdgeKind,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        pub attaches_to: bool,
        /// New: the value is shown masked in plans.
        pub masked_in_plan: bool,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct FieldSchema {
        pub name: String,
        #[serde(rename = "type")]
        pub field_type: FieldType,
        #[serde(skip_serializing_if = "String::is_empty")]
        pub description: String,
        pub hints: FieldHint,
        /// New.
        pub deprecated: bool,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct ResourceSchema {
        pub type_name: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        pub description: String,
        pub identifier: Vec<String>,
        pub fields: Vec<FieldSchema>,
        pub discoverable: bool,
        /// New: who pays for resources of this type.
        pub cost_center: String,
    }

    /// Unchanged nested structs are today's.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Announcement {
        pub protocol: u16,
        pub name: String,
        pub version: String,
        pub namespace: String,
        pub capabilities: Vec<Capability>,
        pub rate_limit: RateLimit,
        pub discovery_filters: Vec<orrery_schema::DiscoveryFilter>,
        pub label_config: LabelConfig,
        pub resources: Vec<ResourceSchema>,
        #[serde(skip_serializing_if = "String::is_empty")]
        pub sdk: String,
        /// New: the oldest host release the plugin works with.
        pub min_host_version: String,
    }

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    pub struct ProgressEvent {
        pub operation: Operation,
        pub status: OperationStatus,
        pub request_id: String,
        pub resource_type: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub native_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub properties: Option<PropertyMap>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub error_code: Option<ErrorCode>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub retry_after_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub context: Option<Value>,
        /// New.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub progress_percent: Option<u8>,
        /// New.
        pub warnings: Vec<String>,
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// How every release writes a frozen struct.
fn frozen<T: Serialize>(value: &T) -> Vec<u8> {
    rmp_serde::to_vec_named(value).expect("frozen value encodes")
}

/// Reads bytes as a frozen struct, through the same bounded decoder.
fn as_frozen<T: DeserializeOwned>(bytes: &[u8]) -> T {
    decode(bytes).expect("decodes as the frozen definition")
}

fn current<T: DeserializeOwned>(bytes: &[u8]) -> T {
    decode(bytes).expect("decodes as the current definition")
}

fn props<const N: usize>(entries: [(&str, Value); N]) -> PropertyMap {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

// ---------------------------------------------------------------------------
// v1 → current
// ---------------------------------------------------------------------------

fn v1_announcement() -> v1::Announcement {
    v1::Announcement {
        protocol: 1,
        name: "disks".into(),
        version: "0.1.0".into(),
        namespace: "Disk".into(),
        capabilities: vec![v1::Capability::Cancel, v1::Capability::Ping],
        resources: vec![v1::ResourceSchema {
            type_name: "Disk::Attachment".into(),
            description: "Attaches a disk to an instance.".into(),
            identifier: vec!["disk".into(), "instance".into()],
            fields: vec![
                v1::FieldSchema {
                    name: "disk".into(),
                    field_type: v1::FieldType::String,
                    description: String::new(),
                    hints: v1::FieldHint {
                        create_only: true,
                        required: true,
                        update_method: v1::UpdateMethod::DeleteBeforeCreate,
                        ..Default::default()
                    },
                },
                v1::FieldSchema {
                    name: "instance".into(),
                    field_type: v1::FieldType::String,
                    description: "The instance the disk attaches to.".into(),
                    hints: v1::FieldHint {
                        required_on_create: true,
                        attaches_to: true,
                        ..Default::default()
                    },
                },
                v1::FieldSchema {
                    name: "secret".into(),
                    field_type: v1::FieldType::Any,
                    description: String::new(),
                    hints: v1::FieldHint {
                        write_only: true,
                        opaque: true,
                        provider_default: true,
                        ..Default::default()
                    },
                },
            ],
            discoverable: true,
        }],
    }
}

#[test]
fn v1_announcement_decodes_as_current_with_attaches_to_folded() {
    let got: Announcement = current(&frozen(&v1_announcement()));
    let expected = Announcement {
        target_config: Vec::new(),
        protocol: 1,
        name: "disks".into(),
        version: "0.1.0".into(),
        namespace: "Disk".into(),
        capabilities: vec![Capability::Cancel, Capability::Ping],
        rate_limit: RateLimit::default(),
        discovery_filters: Vec::new(),
        label_config: LabelConfig::default(),
        resources: vec![ResourceSchema {
            concurrency: None,
            parent: None,
            type_name: "Disk::Attachment".into(),
            description: "Attaches a disk to an instance.".into(),
            identifier: vec!["disk".into(), "instance".into()],
            fields: vec![
                FieldSchema {
                    name: "disk".into(),
                    field_type: FieldType::String,
                    description: String::new(),
                    hints: FieldHint {
                        create_only: true,
                        required: true,
                        update_method: UpdateMethod::DeleteBeforeCreate,
                        edge_kind: EdgeKind::Default,
                        ..Default::default()
                    },
                },
                FieldSchema {
                    name: "instance".into(),
                    field_type: FieldType::String,
                    description: "The instance the disk attaches to.".into(),
                    hints: FieldHint {
                        required_on_create: true,
                        edge_kind: EdgeKind::AttachesTo,
                        ..Default::default()
                    },
                },
                FieldSchema {
                    name: "secret".into(),
                    field_type: FieldType::Any,
                    description: String::new(),
                    hints: FieldHint {
                        write_only: true,
                        opaque: true,
                        provider_default: true,
                        ..Default::default()
                    },
                },
            ],
            discoverable: true,
        }],
        sdk: String::new(),
    };
    assert_eq!(got, expected);
}

fn v1_progress() -> v1::ProgressEvent {
    v1::ProgressEvent {
        operation: v1::Operation::Create,
        status: v1::OperationStatus::Failure,
        request_id: "req-1".into(),
        resource_type: "Disk::Attachment".into(),
        native_id: None,
        properties: Some(props([("disk", "d-1".into()), ("size", Value::Int(20))])),
        error_code: Some(v1::ErrorCode::AlreadyExists),
        message: Some("attachment exists".into()),
    }
}

#[test]
fn v1_progress_decodes_as_current() {
    let bytes = frozen(&v1_progress());
    let got: ProgressEvent = current(&bytes);
    assert_eq!(
        got,
        ProgressEvent {
            operation: Operation::Create,
            status: OperationStatus::Failure,
            request_id: "req-1".into(),
            resource_type: "Disk::Attachment".into(),
            native_id: None,
            properties: Some(props([("disk", "d-1".into()), ("size", Value::Int(20))])),
            error_code: Some(ErrorCode::AlreadyExists),
            message: Some("attachment exists".into()),
            retry_after_ms: None,
            context: None,
        }
    );
    // And back: the current release writes what v1 reads, unchanged.
    let back: v1::ProgressEvent = as_frozen(&encode(&got).unwrap());
    assert_eq!(back, v1_progress());
}

#[test]
fn v1_announcement_survives_a_current_relay() {
    let relayed: Announcement = current(&frozen(&v1_announcement()));
    let back: v1::Announcement = as_frozen(&encode(&relayed).unwrap());
    assert_eq!(back, v1_announcement());
}

// ---------------------------------------------------------------------------
// current → v1
// ---------------------------------------------------------------------------

fn current_announcement() -> Announcement {
    let hint = |edge_kind| FieldHint {
        required: true,
        edge_kind,
        ..Default::default()
    };
    Announcement {
        target_config: Vec::new(),
        protocol: 1,
        name: "cloud".into(),
        version: "2.4.0".into(),
        namespace: "Cloud".into(),
        capabilities: vec![Capability::Cancel, Capability::List, Capability::Ping],
        rate_limit: RateLimit {
            requests_per_second: 3.5,
            burst: 7,
            max_in_flight: 2,
        },
        discovery_filters: Vec::new(),
        label_config: LabelConfig {
            name_property: Some("name".into()),
            tags_property: None,
        },
        resources: vec![ResourceSchema {
            concurrency: None,
            parent: None,
            type_name: "Cloud::Volume::Attachment".into(),
            description: String::new(),
            identifier: vec!["volume".into()],
            fields: vec![
                FieldSchema {
                    name: "volume".into(),
                    field_type: FieldType::String,
                    description: String::new(),
                    hints: FieldHint {
                        create_only: true,
                        read_only: true,
                        update_method: UpdateMethod::CreateBeforeDelete,
                        ..hint(EdgeKind::Default)
                    },
                },
                FieldSchema {
                    name: "instance".into(),
                    field_type: FieldType::String,
                    description: String::new(),
                    hints: hint(EdgeKind::AttachesTo),
                },
                FieldSchema {
                    name: "log_sink".into(),
                    field_type: FieldType::Map,
                    description: String::new(),
                    hints: hint(EdgeKind::RuntimeDependency),
                },
            ],
            discoverable: false,
        }],
        sdk: "orrery-plugin-sdk/0.1.0".into(),
    }
}

#[test]
fn current_announcement_decodes_as_v1() {
    let got: v1::Announcement = as_frozen(&encode(&current_announcement()).unwrap());
    let hint = |attaches_to| v1::FieldHint {
        required: true,
        attaches_to,
        ..Default::default()
    };
    let expected = v1::Announcement {
        protocol: 1,
        name: "cloud".into(),
        version: "2.4.0".into(),
        namespace: "Cloud".into(),
        capabilities: vec![
            v1::Capability::Cancel,
            v1::Capability::Unknown("list".into()),
            v1::Capability::Ping,
        ],
        resources: vec![v1::ResourceSchema {
            type_name: "Cloud::Volume::Attachment".into(),
            description: String::new(),
            identifier: vec!["volume".into()],
            fields: vec![
                v1::FieldSchema {
                    name: "volume".into(),
                    field_type: v1::FieldType::String,
                    description: String::new(),
                    hints: v1::FieldHint {
                        create_only: true,
                        update_method: v1::UpdateMethod::Unknown("createBeforeDelete".into()),
                        ..hint(false)
                    },
                },
                v1::FieldSchema {
                    name: "instance".into(),
                    field_type: v1::FieldType::String,
                    description: String::new(),
                    // The old peer sees the deprecated boolean.
                    hints: hint(true),
                },
                v1::FieldSchema {
                    name: "log_sink".into(),
                    field_type: v1::FieldType::Unknown("map".into()),
                    description: String::new(),
                    // Not an attachment: v1 has no other way to say it.
                    hints: hint(false),
                },
            ],
            discoverable: false,
        }],
    };
    assert_eq!(got, expected);
}

fn current_progress() -> ProgressEvent {
    ProgressEvent {
        operation: Operation::Status,
        status: OperationStatus::Pending,
        request_id: "req-2".into(),
        resource_type: "Cloud::Vm".into(),
        native_id: Some("vm-9".into()),
        properties: Some(props([("state", "queued".into())])),
        error_code: Some(ErrorCode::PluginUnhealthy),
        message: Some("queued behind 3 operations".into()),
        retry_after_ms: Some(5000),
        context: Some(Value::Map(props([("token", Value::Bytes(vec![1, 2, 3]))]))),
    }
}

#[test]
fn current_progress_decodes_as_v1_with_new_values_unknown() {
    let got: v1::ProgressEvent = as_frozen(&encode(&current_progress()).unwrap());
    assert_eq!(
        got,
        v1::ProgressEvent {
            operation: v1::Operation::Unknown("status".into()),
            status: v1::OperationStatus::Unknown("Pending".into()),
            request_id: "req-2".into(),
            resource_type: "Cloud::Vm".into(),
            native_id: Some("vm-9".into()),
            properties: Some(props([("state", "queued".into())])),
            error_code: Some(v1::ErrorCode::Unknown("PluginUnhealthy".into())),
            message: Some("queued behind 3 operations".into()),
        }
    );
}

#[test]
fn a_v1_relay_keeps_what_it_knows_and_new_enum_values() {
    // current → v1 → current: the fields v1 knows and every enum value
    // survive (v1 writes unknown values back verbatim); fields v1 never had
    // are lost, and edge kinds other than `attachesTo` fall back to default,
    // because v1 can only carry the boolean.
    let via_v1: v1::ProgressEvent = as_frozen(&encode(&current_progress()).unwrap());
    let back: ProgressEvent = current(&frozen(&via_v1));
    assert_eq!(
        back,
        ProgressEvent {
            retry_after_ms: None,
            context: None,
            ..current_progress()
        }
    );

    let via_v1: v1::Announcement = as_frozen(&encode(&current_announcement()).unwrap());
    let back: Announcement = current(&frozen(&via_v1));
    let fields = &back.resources[0].fields;
    assert_eq!(
        fields[0].hints.update_method,
        UpdateMethod::CreateBeforeDelete
    );
    assert!(!fields[0].hints.read_only, "v1 never had read_only");
    assert_eq!(fields[1].hints.edge_kind, EdgeKind::AttachesTo);
    assert_eq!(fields[2].hints.edge_kind, EdgeKind::Default);
    assert_eq!(fields[2].field_type, FieldType::Map);
    assert_eq!(
        back.capabilities,
        vec![Capability::Cancel, Capability::List, Capability::Ping]
    );
    assert_eq!(
        back.rate_limit,
        RateLimit::default(),
        "v1 had no rate limit"
    );
}

// ---------------------------------------------------------------------------
// v3 → current, and back
// ---------------------------------------------------------------------------

fn v3_announcement() -> v3::Announcement {
    v3::Announcement {
        protocol: 1,
        name: "cloud".into(),
        version: "7.0.0".into(),
        namespace: "Cloud".into(),
        capabilities: vec![v3::Capability::Streaming, v3::Capability::Cancel],
        rate_limit: RateLimit {
            requests_per_second: 100.0,
            burst: 200,
            max_in_flight: 32,
        },
        discovery_filters: Vec::new(),
        label_config: LabelConfig {
            name_property: None,
            tags_property: Some("tags".into()),
        },
        resources: vec![v3::ResourceSchema {
            type_name: "Cloud::Network::Interface".into(),
            description: "A network interface.".into(),
            identifier: vec!["address".into()],
            fields: vec![
                v3::FieldSchema {
                    name: "address".into(),
                    field_type: v3::FieldType::IpAddress,
                    description: String::new(),
                    hints: v3::FieldHint {
                        create_only: true,
                        masked_in_plan: true,
                        ..Default::default()
                    },
                    deprecated: false,
                },
                v3::FieldSchema {
                    name: "subnet".into(),
                    field_type: v3::FieldType::String,
                    description: String::new(),
                    hints: v3::FieldHint {
                        edge_kind: v3::EdgeKind::WeakReference,
                        ..Default::default()
                    },
                    deprecated: true,
                },
                v3::FieldSchema {
                    name: "instance".into(),
                    field_type: v3::FieldType::String,
                    description: String::new(),
                    hints: v3::FieldHint {
                        edge_kind: v3::EdgeKind::AttachesTo,
                        attaches_to: true,
                        read_only: true,
                        ..Default::default()
                    },
                    deprecated: false,
                },
            ],
            discoverable: true,
            cost_center: "networking".into(),
        }],
        sdk: "orrery-plugin-sdk/3.0.0".into(),
        min_host_version: "2.0.0".into(),
    }
}

#[test]
fn v3_announcement_decodes_as_current_with_unknown_values() {
    let got: Announcement = current(&frozen(&v3_announcement()));
    let expected = Announcement {
        target_config: Vec::new(),
        protocol: 1,
        name: "cloud".into(),
        version: "7.0.0".into(),
        namespace: "Cloud".into(),
        capabilities: vec![Capability::Unknown("streaming".into()), Capability::Cancel],
        rate_limit: RateLimit {
            requests_per_second: 100.0,
            burst: 200,
            max_in_flight: 32,
        },
        discovery_filters: Vec::new(),
        label_config: LabelConfig {
            name_property: None,
            tags_property: Some("tags".into()),
        },
        resources: vec![ResourceSchema {
            concurrency: None,
            parent: None,
            type_name: "Cloud::Network::Interface".into(),
            description: "A network interface.".into(),
            identifier: vec!["address".into()],
            fields: vec![
                FieldSchema {
                    name: "address".into(),
                    field_type: FieldType::Unknown("ipAddress".into()),
                    description: String::new(),
                    hints: FieldHint {
                        create_only: true,
                        ..Default::default()
                    },
                },
                FieldSchema {
                    name: "subnet".into(),
                    field_type: FieldType::String,
                    description: String::new(),
                    hints: FieldHint {
                        edge_kind: EdgeKind::Unknown("weakReference".into()),
                        ..Default::default()
                    },
                },
                FieldSchema {
                    name: "instance".into(),
                    field_type: FieldType::String,
                    description: String::new(),
                    hints: FieldHint {
                        edge_kind: EdgeKind::AttachesTo,
                        read_only: true,
                        ..Default::default()
                    },
                },
            ],
            discoverable: true,
        }],
        sdk: "orrery-plugin-sdk/3.0.0".into(),
    };
    assert_eq!(got, expected);
}

#[test]
fn current_reencoding_of_v3_announcement_keeps_what_current_knows() {
    let relayed: Announcement = current(&frozen(&v3_announcement()));
    let got: v3::Announcement = as_frozen(&encode(&relayed).unwrap());
    // Everything survives except the fields the current release never had.
    let mut expected = v3_announcement();
    expected.min_host_version = String::new();
    for resource in &mut expected.resources {
        resource.cost_center = String::new();
        for field in &mut resource.fields {
            field.deprecated = false;
            field.hints.masked_in_plan = false;
        }
    }
    assert_eq!(got, expected);
    assert_eq!(
        got.resources[0].fields[1].hints.edge_kind,
        v3::EdgeKind::WeakReference
    );
    assert_eq!(got.capabilities[0], v3::Capability::Streaming);
}

#[test]
fn current_announcement_decodes_as_v3() {
    let got: v3::Announcement = as_frozen(&encode(&current_announcement()).unwrap());
    let fields = &got.resources[0].fields;
    assert_eq!(got.name, "cloud");
    assert_eq!(got.rate_limit, current_announcement().rate_limit);
    assert_eq!(got.label_config, current_announcement().label_config);
    assert_eq!(got.sdk, "orrery-plugin-sdk/0.1.0");
    assert_eq!(got.min_host_version, "");
    assert_eq!(got.resources[0].cost_center, "");
    assert!(fields[0].hints.read_only && fields[0].hints.create_only);
    assert_eq!(
        fields[0].hints.update_method,
        v3::UpdateMethod::CreateBeforeDelete
    );
    assert_eq!(fields[1].hints.edge_kind, v3::EdgeKind::AttachesTo);
    assert!(fields[1].hints.attaches_to);
    assert_eq!(fields[2].hints.edge_kind, v3::EdgeKind::RuntimeDependency);
    assert!(!fields[2].hints.attaches_to);
    assert_eq!(fields[2].field_type, v3::FieldType::Map);
}

#[test]
fn v3_announcement_decodes_as_v1() {
    // The oldest peer reading the newest: only `attachesTo` reaches it, as the
    // deprecated boolean; everything else it does not know is ignored.
    let got: v1::Announcement = as_frozen(&frozen(&v3_announcement()));
    let attaches: Vec<bool> = got.resources[0]
        .fields
        .iter()
        .map(|f| f.hints.attaches_to)
        .collect();
    assert_eq!(attaches, vec![false, false, true]);
    assert_eq!(
        got.resources[0].fields[0].field_type,
        v1::FieldType::Unknown("ipAddress".into())
    );
}

fn v3_progress() -> v3::ProgressEvent {
    v3::ProgressEvent {
        operation: v3::Operation::Import,
        status: v3::OperationStatus::Paused,
        request_id: "req-3".into(),
        resource_type: "Cloud::Vm".into(),
        native_id: Some("vm-3".into()),
        properties: Some(props([("cpu", Value::Int(4))])),
        error_code: Some(v3::ErrorCode::BudgetExceeded),
        message: Some("paused: budget".into()),
        retry_after_ms: Some(60_000),
        context: Some(Value::List(vec![Value::Int(1), Value::Null])),
        progress_percent: Some(40),
        warnings: vec!["slow disk".into()],
    }
}

#[test]
fn v3_progress_decodes_as_current_with_unknown_values() {
    let got: ProgressEvent = current(&frozen(&v3_progress()));
    assert_eq!(
        got,
        ProgressEvent {
            operation: Operation::Unknown("import".into()),
            status: OperationStatus::Unknown("Paused".into()),
            request_id: "req-3".into(),
            resource_type: "Cloud::Vm".into(),
            native_id: Some("vm-3".into()),
            properties: Some(props([("cpu", Value::Int(4))])),
            error_code: Some(ErrorCode::Unknown("BudgetExceeded".into())),
            message: Some("paused: budget".into()),
            retry_after_ms: Some(60_000),
            context: Some(Value::List(vec![Value::Int(1), Value::Null])),
        }
    );
    // The current release treats what it does not know conservatively.
    assert!(got.status.is_terminal());
    assert!(!got.error_code.as_ref().unwrap().is_retryable());
}

#[test]
fn current_reencoding_of_v3_progress_keeps_what_current_knows() {
    let relayed: ProgressEvent = current(&frozen(&v3_progress()));
    let got: v3::ProgressEvent = as_frozen(&encode(&relayed).unwrap());
    assert_eq!(
        got,
        v3::ProgressEvent {
            progress_percent: None,
            warnings: Vec::new(),
            ..v3_progress()
        }
    );
}

#[test]
fn current_progress_decodes_as_v3() {
    let got: v3::ProgressEvent = as_frozen(&encode(&current_progress()).unwrap());
    assert_eq!(
        got,
        v3::ProgressEvent {
            operation: v3::Operation::Status,
            status: v3::OperationStatus::Pending,
            request_id: "req-2".into(),
            resource_type: "Cloud::Vm".into(),
            native_id: Some("vm-9".into()),
            properties: Some(props([("state", "queued".into())])),
            error_code: Some(v3::ErrorCode::Unknown("PluginUnhealthy".into())),
            message: Some("queued behind 3 operations".into()),
            retry_after_ms: Some(5000),
            context: Some(Value::Map(props([("token", Value::Bytes(vec![1, 2, 3]))]))),
            progress_percent: None,
            warnings: Vec::new(),
        }
    );
}
