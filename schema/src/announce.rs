//! What a plugin tells its host when it starts.

use serde::{Deserialize, Serialize};

use crate::envelope::PROTOCOL_MAJOR;
use crate::open_enum::open_enum;
use crate::resource_schema::{FieldSchema, ResourceSchema};
use crate::value::Value;

open_enum! {
    /// An optional protocol feature a peer supports.
    pub enum Capability {
        /// Honours `cancel` messages.
        Cancel = "cancel",
        /// Serves many requests at once on one link.
        Concurrent = "concurrent",
        /// Answers `ping` with `pong`.
        Ping = "ping",
        /// Reads trace context from envelopes and opens spans under it.
        TraceContext = "traceContext",
        /// Implements `list` for discovery.
        List = "list",
    }
}

/// How fast the runtime may call the plugin, per target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RateLimit {
    /// Sustained requests per second; 0 means unlimited.
    pub requests_per_second: f64,
    /// Requests allowed in a burst above the sustained rate.
    pub burst: u32,
    /// Most requests in flight at once; 0 means unlimited.
    pub max_in_flight: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            requests_per_second: 10.0,
            burst: 10,
            max_in_flight: 16,
        }
    }
}

open_enum! {
    /// How a discovery filter condition compares a property.
    #[derive(Default)]
    pub enum MatchOp {
        /// The property equals the value.
        Equals = "equals" [default],
        /// The property is a string starting with the value.
        Prefix = "prefix",
        /// The property is present (the value is ignored).
        Exists = "exists",
    }
}

/// One condition of a discovery filter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Condition {
    /// The property compared.
    pub property: String,
    /// How it is compared.
    pub op: MatchOp,
    /// What it is compared with.
    pub value: Value,
}

/// Excludes listed resources from discovery: a resource of `resource_type`
/// matching every condition is not recorded as unmanaged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiscoveryFilter {
    /// The resource type the filter applies to.
    pub resource_type: String,
    /// All must match for the resource to be excluded.
    pub exclude_when: Vec<Condition>,
}

/// Where a plugin keeps the runtime's labels on the resources it manages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LabelConfig {
    /// The property holding a resource's human name, if the provider has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_property: Option<String>,
    /// The property holding key/value tags, if the provider supports tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags_property: Option<String>,
}

/// The first message a plugin sends: who it is and what it manages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Announcement {
    /// The protocol major the plugin speaks.
    pub protocol: u16,
    /// The plugin's name, e.g. `local`.
    pub name: String,
    /// Its semver version.
    pub version: String,
    /// The namespace of its resource types, e.g. `Local`; rate limits apply per namespace and target.
    pub namespace: String,
    /// Optional features it supports.
    pub capabilities: Vec<Capability>,
    /// How fast it may be called.
    pub rate_limit: RateLimit,
    /// What discovery should not record.
    pub discovery_filters: Vec<DiscoveryFilter>,
    /// Where labels live.
    pub label_config: LabelConfig,
    /// One schema per resource type.
    pub resources: Vec<ResourceSchema>,
    /// The fields of the plugin's target configuration (`config:` of a
    /// target in a stack). A field whose hints are secret
    /// ([`crate::FieldHint::is_secret`]) is never recorded, logged or shown
    /// in clear. Empty from plugins that do not declare it: the runtime then
    /// falls back to treating secret-looking names as secret.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub target_config: Vec<FieldSchema>,
    /// The SDK that built the plugin, e.g. `orrery-plugin-sdk/0.1.0`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sdk: String,
}

impl Default for Announcement {
    fn default() -> Self {
        Announcement {
            protocol: PROTOCOL_MAJOR,
            name: String::new(),
            version: String::new(),
            namespace: String::new(),
            capabilities: Vec::new(),
            rate_limit: RateLimit::default(),
            discovery_filters: Vec::new(),
            label_config: LabelConfig::default(),
            resources: Vec::new(),
            target_config: Vec::new(),
            sdk: String::new(),
        }
    }
}

impl Announcement {
    /// The schema of `type_name`.
    pub fn resource(&self, type_name: &str) -> Option<&ResourceSchema> {
        self.resources.iter().find(|r| r.type_name == type_name)
    }

    /// The target-configuration field named `name`, if declared.
    pub fn target_field(&self, name: &str) -> Option<&FieldSchema> {
        self.target_config.iter().find(|f| f.name == name)
    }

    /// Whether the plugin declared a capability.
    pub fn has(&self, capability: &Capability) -> bool {
        self.capabilities.contains(capability)
    }
}
