//! # orrery-plugin-aws
//!
//! Manages AWS resources through the official AWS SDK for Rust:
//! `AWS::S3::Bucket`, `AWS::S3::BucketPolicy`, `AWS::SQS::Queue`,
//! `AWS::IAM::Role`, `AWS::IAM::Policy`, `AWS::IAM::RolePolicyAttachment`,
//! `AWS::IAM::User` and `AWS::IAM::AccessKey`.
//!
//! One module per type supplies its AWS calls ([`lifecycle::Managed`]);
//! [`lifecycle`] is the one create, read, update, delete and list they all
//! follow, and [`error`] the one mapping of AWS error codes to Orrery's.
//! A target is one account and region ([`target`]); the announced rate
//! limit holds per target.

pub mod document;
pub mod error;
mod iam;
mod iam_access_key;
mod iam_attachment;
mod iam_policy;
mod iam_role;
mod iam_user;
pub mod lifecycle;
mod s3_bucket;
mod s3_bucket_policy;
mod s3_lifecycle;
mod sqs_queue;
mod tags;
pub mod target;

use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, FieldSchema, ListRequest, RateLimit, ReadRequest, ResourceSchema,
    UpdateRequest,
};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError, PluginInfo, ResourcePlugin};

use iam_access_key::AccessKey;
use iam_attachment::Attachment;
use iam_policy::Policy;
use iam_role::Role;
use iam_user::User;
use lifecycle::Managed;
use s3_bucket::Bucket;
use s3_bucket_policy::BucketPolicy;
use sqs_queue::Queue;
use target::ClientCache;

/// The plugin: SDK clients are made on first use and kept per target.
#[derive(Debug, Default)]
pub struct AwsPlugin {
    clients: ClientCache,
}

/// Calls `lifecycle::$f::<T>(args)` for the type named `$ty`.
macro_rules! each {
    ($ty:expr, $f:ident($($arg:expr),*)) => {
        match $ty {
            s3_bucket::TYPE => lifecycle::$f::<Bucket>($($arg),*).await,
            s3_bucket_policy::TYPE => lifecycle::$f::<BucketPolicy>($($arg),*).await,
            sqs_queue::TYPE => lifecycle::$f::<Queue>($($arg),*).await,
            iam_role::TYPE => lifecycle::$f::<Role>($($arg),*).await,
            iam_policy::TYPE => lifecycle::$f::<Policy>($($arg),*).await,
            iam_attachment::TYPE => lifecycle::$f::<Attachment>($($arg),*).await,
            iam_user::TYPE => lifecycle::$f::<User>($($arg),*).await,
            iam_access_key::TYPE => lifecycle::$f::<AccessKey>($($arg),*).await,
            other => Err(PluginError::invalid(format!(
                "unknown resource type `{other}`; this plugin manages {}",
                TYPES.join(", ")
            ))),
        }
    };
}

/// Every type, in the order of [`AwsPlugin::resources`].
const TYPES: [&str; 8] = [
    s3_bucket::TYPE,
    s3_bucket_policy::TYPE,
    sqs_queue::TYPE,
    iam_role::TYPE,
    iam_policy::TYPE,
    iam_attachment::TYPE,
    iam_user::TYPE,
    iam_access_key::TYPE,
];

impl AwsPlugin {
    /// The names of every type the plugin manages.
    pub fn types() -> [&'static str; 8] {
        TYPES
    }
}

impl ResourcePlugin for AwsPlugin {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "aws".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            namespace: "AWS".into(),
        }
    }

    fn resources(&self) -> Vec<ResourceSchema> {
        vec![
            Bucket::schema(),
            BucketPolicy::schema(),
            Queue::schema(),
            Role::schema(),
            Policy::schema(),
            Attachment::schema(),
            User::schema(),
            AccessKey::schema(),
        ]
    }

    fn target_config(&self) -> Vec<FieldSchema> {
        target::fields()
    }

    /// Per target, that is per account and region. AWS throttles control
    /// planes per account (IAM's mutating calls globally, to a few a
    /// second sustained; S3's and SQS's per region): a modest sustained
    /// rate with a burst keeps an apply inside them, and a throttle that
    /// still happens answers `Throttling`, which the runtime retries.
    fn rate_limit(&self) -> RateLimit {
        RateLimit {
            requests_per_second: 10.0,
            burst: 20,
            max_in_flight: 16,
        }
    }

    async fn create(&self, request: CreateRequest) -> OpResult {
        let c = self.clients.get(&request.target).await?;
        each!(
            request.resource_type.as_str(),
            create(&c, &request.properties)
        )
    }

    async fn read(&self, request: ReadRequest) -> OpResult {
        let c = self.clients.get(&request.target).await?;
        each!(request.resource_type.as_str(), read(&c, &request.native_id))
    }

    async fn update(&self, request: UpdateRequest) -> OpResult {
        let c = self.clients.get(&request.target).await?;
        each!(
            request.resource_type.as_str(),
            update(&c, &request.native_id, &request.properties)
        )
    }

    async fn delete(&self, request: DeleteRequest) -> OpResult {
        let c = self.clients.get(&request.target).await?;
        each!(
            request.resource_type.as_str(),
            delete(&c, &request.native_id)
        )
    }

    async fn list(&self, request: ListRequest) -> Result<ListPage, PluginError> {
        let c = self.clients.get(&request.target).await?;
        let token = request.page_token.as_deref();
        each!(
            request.resource_type.as_str(),
            list(&c, request.page_size, token)
        )
    }
}
