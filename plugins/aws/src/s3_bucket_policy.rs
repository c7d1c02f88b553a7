//! `AWS::S3::BucketPolicy`: the one policy of a bucket; its native id is
//! the bucket's name.

use orrery_plugin_sdk::schema::ResourceSchema;
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document;
use crate::error::{absent_if, from_sdk};
use crate::lifecycle::{what, Created, Managed};
use crate::target::Clients;

pub const TYPE: &str = "AWS::S3::BucketPolicy";

#[derive(Debug, Serialize, Deserialize)]
pub struct BucketPolicy {
    pub bucket: String,
    pub policy: Value,
}

async fn put(c: &Clients, desired: &BucketPolicy) -> Result<(), PluginError> {
    let w = what::<BucketPolicy>(&desired.bucket);
    c.s3.put_bucket_policy()
        .bucket(&desired.bucket)
        .policy(document::to_text(&w, "policy", &desired.policy)?)
        .send()
        .await
        .map_err(|e| from_sdk(&w, e))?;
    Ok(())
}

impl Managed for BucketPolicy {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("The policy of an S3 bucket; imported by the bucket's name")
            .identifier(["bucket"])
            .field(
                field::string("bucket")
                    .required()
                    .create_only()
                    .describe("The bucket"),
            )
            .field(
                field::map("policy")
                    .required()
                    .describe("The policy document"),
            )
            .build()
    }

    async fn existing(c: &Clients, desired: &Self) -> Result<Option<String>, PluginError> {
        match Self::read(c, &desired.bucket).await {
            Ok(_) => Ok(Some(desired.bucket.clone())),
            Err(e) if e.code == orrery_plugin_sdk::schema::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        put(c, desired).await?;
        Ok(desired.bucket.clone().into())
    }

    async fn read(c: &Clients, bucket: &str) -> Result<Self, PluginError> {
        let w = what::<BucketPolicy>(bucket);
        let answer =
            c.s3.get_bucket_policy()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        let text = answer
            .policy()
            .ok_or_else(|| PluginError::not_found(format!("{w} has no policy")))?;
        Ok(BucketPolicy {
            bucket: bucket.to_owned(),
            policy: document::parse(&w, text)?,
        })
    }

    async fn update(
        c: &Clients,
        _: &str,
        current: &Self,
        desired: &Self,
    ) -> Result<(), PluginError> {
        if current.policy != desired.policy {
            put(c, desired).await?;
        }
        Ok(())
    }

    async fn delete(c: &Clients, bucket: &str) -> Result<(), PluginError> {
        let w = what::<BucketPolicy>(bucket);
        // DeleteBucketPolicy succeeds on a bucket without one: a delete of
        // what is gone must say `NotFound`.
        Self::read(c, bucket).await?;
        c.s3.delete_bucket_policy()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut ids = Vec::new();
        for bucket in <crate::s3_bucket::Bucket as Managed>::ids(c).await? {
            let w = what::<BucketPolicy>(&bucket);
            let policy = absent_if(
                &w,
                c.s3.get_bucket_policy().bucket(&bucket).send().await,
                &["NoSuchBucketPolicy", "NoSuchBucket"],
            )?;
            if policy.is_some_and(|p| p.policy().is_some()) {
                ids.push(bucket);
            }
        }
        Ok(ids)
    }
}
