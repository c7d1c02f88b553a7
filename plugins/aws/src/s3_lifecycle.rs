//! A bucket's lifecycle rules (terraform's
//! `aws_s3_bucket_lifecycle_configuration`), as `AWS::S3::Bucket`'s
//! `lifecycle_rules`: expiration, transitions, noncurrent versions and
//! incomplete multipart uploads, filtered by a key prefix.

use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration,
    Transition as S3Transition, TransitionStorageClass,
};
use orrery_plugin_sdk::PluginError;
use serde::{Deserialize, Serialize};

use crate::error::{absent_if, build_error, from_sdk};
use crate::target::Clients;

/// One rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub id: String,
    /// `Enabled` or `Disabled` (required, as in terraform).
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiration_days: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noncurrent_version_expiration_days: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort_incomplete_multipart_upload_days: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<Transition>,
}

/// A move to another storage class after `days`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub days: i32,
    pub storage_class: String,
}

fn to_s3(what: &str, rule: &Rule) -> Result<LifecycleRule, PluginError> {
    let filter = LifecycleRuleFilter::builder()
        .prefix(rule.prefix.clone().unwrap_or_default())
        .build();
    LifecycleRule::builder()
        .id(&rule.id)
        .status(ExpirationStatus::from(rule.status.as_str()))
        .filter(filter)
        .set_expiration(
            rule.expiration_days
                .map(|d| LifecycleExpiration::builder().days(d).build()),
        )
        .set_noncurrent_version_expiration(rule.noncurrent_version_expiration_days.map(|d| {
            NoncurrentVersionExpiration::builder()
                .noncurrent_days(d)
                .build()
        }))
        .set_abort_incomplete_multipart_upload(rule.abort_incomplete_multipart_upload_days.map(
            |d| {
                AbortIncompleteMultipartUpload::builder()
                    .days_after_initiation(d)
                    .build()
            },
        ))
        .set_transitions((!rule.transitions.is_empty()).then(|| {
            rule.transitions
                .iter()
                .map(|t| {
                    S3Transition::builder()
                        .days(t.days)
                        .storage_class(TransitionStorageClass::from(t.storage_class.as_str()))
                        .build()
                })
                .collect()
        }))
        .build()
        .map_err(|e| build_error(what, e))
}

fn from_s3(rule: &LifecycleRule) -> Rule {
    let prefix = rule
        .filter()
        .and_then(|f| f.prefix())
        .filter(|p| !p.is_empty())
        .map(str::to_owned);
    Rule {
        id: rule.id().unwrap_or_default().to_owned(),
        status: rule.status().as_str().to_owned(),
        prefix,
        expiration_days: rule.expiration().and_then(|e| e.days()),
        noncurrent_version_expiration_days: rule
            .noncurrent_version_expiration()
            .and_then(|n| n.noncurrent_days()),
        abort_incomplete_multipart_upload_days: rule
            .abort_incomplete_multipart_upload()
            .and_then(|a| a.days_after_initiation()),
        transitions: rule
            .transitions()
            .iter()
            .map(|t| Transition {
                days: t.days().unwrap_or(0),
                storage_class: t.storage_class().map_or("", |s| s.as_str()).to_owned(),
            })
            .collect(),
    }
}

/// The bucket's rules; `None` when it has none.
pub async fn read(c: &Clients, what: &str, bucket: &str) -> Result<Option<Vec<Rule>>, PluginError> {
    let answer = absent_if(
        what,
        c.s3.get_bucket_lifecycle_configuration()
            .bucket(bucket)
            .send()
            .await,
        &["NoSuchLifecycleConfiguration"],
    )?;
    Ok(answer
        .map(|a| a.rules().iter().map(from_s3).collect::<Vec<_>>())
        .filter(|r| !r.is_empty()))
}

/// Sets the bucket's rules to `rules`; none deletes its configuration.
pub async fn put(
    c: &Clients,
    what: &str,
    bucket: &str,
    rules: Option<&[Rule]>,
) -> Result<(), PluginError> {
    let Some(rules) = rules.filter(|r| !r.is_empty()) else {
        c.s3.delete_bucket_lifecycle()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| from_sdk(what, e))?;
        return Ok(());
    };
    let config = BucketLifecycleConfiguration::builder()
        .set_rules(Some(
            rules
                .iter()
                .map(|r| to_s3(what, r))
                .collect::<Result<Vec<_>, _>>()?,
        ))
        .build()
        .map_err(|e| build_error(what, e))?;
    c.s3.put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(config)
        .send()
        .await
        .map_err(|e| from_sdk(what, e))?;
    Ok(())
}
