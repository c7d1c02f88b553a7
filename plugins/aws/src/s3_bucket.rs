//! `AWS::S3::Bucket`: a bucket with its versioning, default encryption,
//! public access block, ownership controls and tags (each its own S3
//! call, as terraform-provider-aws's separate resources).

use aws_sdk_s3::types::{
    BucketLocationConstraint, BucketVersioningStatus, CreateBucketConfiguration, ObjectOwnership,
    OwnershipControls, OwnershipControlsRule, PublicAccessBlockConfiguration, ServerSideEncryption,
    ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
    Tag, Tagging, VersioningConfiguration,
};
use orrery_plugin_sdk::schema::{ErrorCode, ResourceSchema};
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};

use crate::error::{absent_if, build_error, from_sdk};
use crate::lifecycle::{what, Created, Managed};
use crate::s3_lifecycle;
use crate::tags::{self, Tags};
use crate::target::Clients;

pub const TYPE: &str = "AWS::S3::Bucket";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PublicAccessBlock {
    #[serde(default)]
    pub block_public_acls: bool,
    #[serde(default)]
    pub block_public_policy: bool,
    #[serde(default)]
    pub ignore_public_acls: bool,
    #[serde(default)]
    pub restrict_public_buckets: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Bucket {
    pub bucket: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versioning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sse_algorithm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kms_master_key_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_key_enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_access_block: Option<PublicAccessBlock>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ownership: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle_rules: Option<Vec<s3_lifecycle::Rule>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("An S3 bucket; imported by its name")
        .identifier(["bucket"])
        .field(field::string("bucket").required().create_only().describe("The bucket's name"))
        .field(
            field::string("versioning")
                .provider_default()
                .describe("`Enabled` or `Suspended` (a bucket never versioned reads as absent)"),
        )
        .field(
            field::string("sse_algorithm")
                .provider_default()
                .describe("Default encryption: `AES256`, `aws:kms` or `aws:kms:dsse` (AWS: `AES256` unless set)"),
        )
        .field(field::string("kms_master_key_id").describe("The KMS key of `aws:kms` encryption"))
        .field(field::boolean("bucket_key_enabled").provider_default().describe("S3 Bucket Keys for SSE-KMS"))
        .field(
            field::map("public_access_block")
                .provider_default()
                .describe("`block_public_acls`, `block_public_policy`, `ignore_public_acls`, `restrict_public_buckets`"),
        )
        .field(
            field::string("object_ownership")
                .provider_default()
                .describe("`BucketOwnerEnforced` (AWS's default), `BucketOwnerPreferred` or `ObjectWriter`"),
        )
        .field(field::list("lifecycle_rules").describe(
            "Lifecycle rules: `id`, `status` (`Enabled`, `Disabled`), `prefix`, `expiration_days`, \
             `noncurrent_version_expiration_days`, `abort_incomplete_multipart_upload_days`, \
             `transitions` (`days`, `storage_class`); absent means none",
        ))
        .field(field::map("tags").describe("Tags; absent means none"))
        .field(field::string("arn").read_only())
        .field(field::string("region").read_only())
        .build()
}

async fn exists(c: &Clients, name: &str) -> Result<bool, PluginError> {
    // HeadBucket's 404 has no body, so no AWS code: go by what it maps to.
    match c.s3.head_bucket().bucket(name).send().await {
        Ok(_) => Ok(true),
        Err(e) => match from_sdk(&what::<Bucket>(name), e) {
            e if e.code == ErrorCode::NotFound => Ok(false),
            e => Err(e),
        },
    }
}

async fn put_versioning(c: &Clients, name: &str, status: &str) -> Result<(), PluginError> {
    let config = VersioningConfiguration::builder()
        .status(BucketVersioningStatus::from(status))
        .build();
    c.s3.put_bucket_versioning()
        .bucket(name)
        .versioning_configuration(config)
        .send()
        .await
        .map_err(|e| from_sdk(&what::<Bucket>(name), e))?;
    Ok(())
}

async fn put_encryption(c: &Clients, name: &str, desired: &Bucket) -> Result<(), PluginError> {
    let w = what::<Bucket>(name);
    let algorithm = desired.sse_algorithm.as_deref().unwrap_or("AES256");
    let default = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::from(algorithm))
        .set_kms_master_key_id(desired.kms_master_key_id.clone())
        .build()
        .map_err(|e| build_error(&w, e))?;
    let rule = ServerSideEncryptionRule::builder()
        .apply_server_side_encryption_by_default(default)
        .set_bucket_key_enabled(desired.bucket_key_enabled)
        .build();
    let config = ServerSideEncryptionConfiguration::builder()
        .rules(rule)
        .build()
        .map_err(|e| build_error(&w, e))?;
    c.s3.put_bucket_encryption()
        .bucket(name)
        .server_side_encryption_configuration(config)
        .send()
        .await
        .map_err(|e| from_sdk(&w, e))?;
    Ok(())
}

async fn put_public_access_block(
    c: &Clients,
    name: &str,
    block: &PublicAccessBlock,
) -> Result<(), PluginError> {
    let config = PublicAccessBlockConfiguration::builder()
        .block_public_acls(block.block_public_acls)
        .block_public_policy(block.block_public_policy)
        .ignore_public_acls(block.ignore_public_acls)
        .restrict_public_buckets(block.restrict_public_buckets)
        .build();
    c.s3.put_public_access_block()
        .bucket(name)
        .public_access_block_configuration(config)
        .send()
        .await
        .map_err(|e| from_sdk(&what::<Bucket>(name), e))?;
    Ok(())
}

async fn put_ownership(c: &Clients, name: &str, ownership: &str) -> Result<(), PluginError> {
    let w = what::<Bucket>(name);
    let rule = OwnershipControlsRule::builder()
        .object_ownership(ObjectOwnership::from(ownership))
        .build()
        .map_err(|e| build_error(&w, e))?;
    let controls = OwnershipControls::builder()
        .rules(rule)
        .build()
        .map_err(|e| build_error(&w, e))?;
    c.s3.put_bucket_ownership_controls()
        .bucket(name)
        .ownership_controls(controls)
        .send()
        .await
        .map_err(|e| from_sdk(&w, e))?;
    Ok(())
}

async fn put_tags(c: &Clients, name: &str, desired: Option<&Tags>) -> Result<(), PluginError> {
    let w = what::<Bucket>(name);
    let Some(tags) = desired.filter(|t| !t.is_empty()) else {
        c.s3.delete_bucket_tagging()
            .bucket(name)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        return Ok(());
    };
    let set = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| build_error(&w, e))?;
    let tagging = Tagging::builder()
        .set_tag_set(Some(set))
        .build()
        .map_err(|e| build_error(&w, e))?;
    c.s3.put_bucket_tagging()
        .bucket(name)
        .tagging(tagging)
        .send()
        .await
        .map_err(|e| from_sdk(&w, e))?;
    Ok(())
}

impl Managed for Bucket {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        schema()
    }

    async fn existing(c: &Clients, desired: &Self) -> Result<Option<String>, PluginError> {
        Ok(exists(c, &desired.bucket)
            .await?
            .then(|| desired.bucket.clone()))
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        let name = &desired.bucket;
        let w = what::<Bucket>(name);
        // us-east-1 takes no location constraint; every other region must.
        let location = (c.region != "us-east-1").then(|| {
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(c.region.as_str()))
                .build()
        });
        c.s3.create_bucket()
            .bucket(name)
            .set_create_bucket_configuration(location)
            .set_object_ownership(
                desired
                    .object_ownership
                    .as_deref()
                    .map(ObjectOwnership::from),
            )
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let current = Bucket::read(c, name).await?;
        Bucket::update(c, name, &current, desired).await?;
        Ok(name.clone().into())
    }

    async fn read(c: &Clients, name: &str) -> Result<Self, PluginError> {
        let w = what::<Bucket>(name);
        if !exists(c, name).await? {
            return Err(PluginError::not_found(format!("{w} does not exist")));
        }
        let versioning =
            c.s3.get_bucket_versioning()
                .bucket(name)
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?
                .status()
                .map(|s| s.as_str().to_owned());
        let encryption = absent_if(
            &w,
            c.s3.get_bucket_encryption().bucket(name).send().await,
            &["ServerSideEncryptionConfigurationNotFoundError"],
        )?;
        let rule = encryption
            .as_ref()
            .and_then(|e| e.server_side_encryption_configuration())
            .and_then(|c| c.rules().first());
        let default = rule.and_then(|r| r.apply_server_side_encryption_by_default());
        let block = absent_if(
            &w,
            c.s3.get_public_access_block().bucket(name).send().await,
            &["NoSuchPublicAccessBlockConfiguration"],
        )?;
        let public_access_block = block
            .as_ref()
            .and_then(|b| b.public_access_block_configuration())
            .map(|b| PublicAccessBlock {
                block_public_acls: b.block_public_acls().unwrap_or(false),
                block_public_policy: b.block_public_policy().unwrap_or(false),
                ignore_public_acls: b.ignore_public_acls().unwrap_or(false),
                restrict_public_buckets: b.restrict_public_buckets().unwrap_or(false),
            });
        let ownership = absent_if(
            &w,
            c.s3.get_bucket_ownership_controls()
                .bucket(name)
                .send()
                .await,
            &["OwnershipControlsNotFoundError"],
        )?;
        let object_ownership = ownership
            .as_ref()
            .and_then(|o| o.ownership_controls())
            .and_then(|o| o.rules().first())
            .map(|r| r.object_ownership().as_str().to_owned());
        let tagging = absent_if(
            &w,
            c.s3.get_bucket_tagging().bucket(name).send().await,
            &["NoSuchTagSet", "NoSuchTagSetError"],
        )?;
        let tags = tags::read(
            tagging
                .iter()
                .flat_map(|t| t.tag_set())
                .map(|t| (t.key().to_owned(), t.value().to_owned())),
        );
        let lifecycle_rules = s3_lifecycle::read(c, &w, name).await?;
        Ok(Bucket {
            bucket: name.to_owned(),
            lifecycle_rules,
            versioning,
            sse_algorithm: default.map(|d| d.sse_algorithm().as_str().to_owned()),
            kms_master_key_id: default
                .and_then(|d| d.kms_master_key_id())
                .map(str::to_owned),
            bucket_key_enabled: rule.and_then(|r| r.bucket_key_enabled()),
            public_access_block,
            object_ownership,
            tags,
            arn: Some(format!("arn:aws:s3:::{name}")),
            region: Some(c.region.clone()),
        })
    }

    async fn update(
        c: &Clients,
        name: &str,
        current: &Self,
        desired: &Self,
    ) -> Result<(), PluginError> {
        if let Some(v) = desired.versioning.as_deref() {
            if current.versioning.as_deref() != Some(v) {
                put_versioning(c, name, v).await?;
            }
        }
        let encryption_set = desired.sse_algorithm.is_some()
            || desired.kms_master_key_id.is_some()
            || desired.bucket_key_enabled.is_some();
        let encryption_differs = desired
            .sse_algorithm
            .as_ref()
            .is_some_and(|a| current.sse_algorithm.as_ref() != Some(a))
            || desired.kms_master_key_id != current.kms_master_key_id
            || desired
                .bucket_key_enabled
                .is_some_and(|b| current.bucket_key_enabled != Some(b));
        if encryption_set && encryption_differs {
            put_encryption(c, name, desired).await?;
        }
        if let Some(block) = &desired.public_access_block {
            if current.public_access_block.as_ref() != Some(block) {
                put_public_access_block(c, name, block).await?;
            }
        }
        if let Some(o) = desired.object_ownership.as_deref() {
            if current.object_ownership.as_deref() != Some(o) {
                put_ownership(c, name, o).await?;
            }
        }
        if current.lifecycle_rules != desired.lifecycle_rules {
            let w = what::<Bucket>(name);
            s3_lifecycle::put(c, &w, name, desired.lifecycle_rules.as_deref()).await?;
        }
        if current.tags != desired.tags {
            put_tags(c, name, desired.tags.as_ref()).await?;
        }
        Ok(())
    }

    async fn delete(c: &Clients, name: &str) -> Result<(), PluginError> {
        c.s3.delete_bucket()
            .bucket(name)
            .send()
            .await
            .map_err(|e| from_sdk(&what::<Bucket>(name), e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut names = Vec::new();
        let mut token = None;
        loop {
            let page =
                c.s3.list_buckets()
                    .set_continuation_token(token)
                    .send()
                    .await
                    .map_err(|e| from_sdk(TYPE, e))?;
            names.extend(
                page.buckets()
                    .iter()
                    .filter_map(|b| b.name().map(str::to_owned)),
            );
            match page.continuation_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                _ => return Ok(names),
            }
        }
    }
}
