//! `AWS::IAM::Policy`: a customer managed policy. A document change makes
//! a new default version; the oldest versions that are not the default
//! are deleted first so the policy stays within AWS's five. Imported by
//! its ARN.

use aws_sdk_iam::types::PolicyScopeType;
use orrery_plugin_sdk::schema::{ErrorCode, ResourceSchema};
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document;
use crate::error::from_sdk;
use crate::iam::{from_iam, retag, to_iam};
use crate::lifecycle::{what, Created, Managed};
use crate::tags::Tags;
use crate::target::Clients;

pub const TYPE: &str = "AWS::IAM::Policy";

/// AWS keeps at most this many versions of a managed policy.
pub const MAX_VERSIONS: usize = 5;

#[derive(Debug, Serialize, Deserialize)]
pub struct Policy {
    pub name: String,
    pub policy: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_version_id: Option<String>,
}

fn no_answer(w: &str) -> PluginError {
    PluginError::new(
        ErrorCode::GeneralServiceException,
        format!("{w}: AWS answered no policy"),
    )
}

/// The version ids to delete, oldest first, so one more fits in `MAX_VERSIONS`.
async fn prune(c: &Clients, arn: &str) -> Result<(), PluginError> {
    let w = what::<Policy>(arn);
    let listed = c
        .iam
        .list_policy_versions()
        .policy_arn(arn)
        .send()
        .await
        .map_err(|e| from_sdk(&w, e))?;
    let mut old: Vec<_> = listed
        .versions()
        .iter()
        .filter(|v| !v.is_default_version())
        .collect();
    old.sort_by_key(|v| v.create_date().map(|d| (d.secs(), d.subsec_nanos())));
    let excess = (listed.versions().len() + 1).saturating_sub(MAX_VERSIONS);
    for version in old.into_iter().take(excess) {
        if let Some(id) = version.version_id() {
            c.iam
                .delete_policy_version()
                .policy_arn(arn)
                .version_id(id)
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
    }
    Ok(())
}

async fn versions(c: &Clients, arn: &str) -> Result<Vec<(String, bool)>, PluginError> {
    let listed = c
        .iam
        .list_policy_versions()
        .policy_arn(arn)
        .send()
        .await
        .map_err(|e| from_sdk(&what::<Policy>(arn), e))?;
    Ok(listed
        .versions()
        .iter()
        .filter_map(|v| {
            v.version_id()
                .map(|id| (id.to_owned(), v.is_default_version()))
        })
        .collect())
}

impl Managed for Policy {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("A customer managed IAM policy; imported by its ARN")
            .identifier(["name"])
            .field(
                field::string("name")
                    .required()
                    .create_only()
                    .describe("The policy's name"),
            )
            .field(
                field::map("policy")
                    .required()
                    .describe("The policy document; a change makes a new default version"),
            )
            .field(
                field::string("path")
                    .create_only()
                    .provider_default()
                    .describe("The policy's path (AWS: `/`)"),
            )
            .field(
                field::string("description")
                    .create_only()
                    .describe("A description (IAM cannot change it)"),
            )
            .field(field::map("tags").describe("Tags; absent means none"))
            .field(field::string("arn").read_only())
            .field(field::string("policy_id").read_only())
            .field(field::string("default_version_id").read_only())
            .build()
    }

    async fn existing(c: &Clients, desired: &Self) -> Result<Option<String>, PluginError> {
        let path = desired.path.as_deref().unwrap_or("/");
        for arn in Self::ids(c).await? {
            if arn.ends_with(&format!(":policy{path}{}", desired.name)) {
                return Ok(Some(arn));
            }
        }
        Ok(None)
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        let w = what::<Policy>(&desired.name);
        let answer = c
            .iam
            .create_policy()
            .policy_name(&desired.name)
            .policy_document(document::to_text(&w, "policy", &desired.policy)?)
            .set_path(desired.path.clone())
            .set_description(desired.description.clone())
            .set_tags(to_iam(&w, desired.tags.as_ref())?)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let arn = answer
            .policy()
            .and_then(|p| p.arn())
            .ok_or_else(|| no_answer(&w))?;
        Ok(arn.to_owned().into())
    }

    async fn read(c: &Clients, arn: &str) -> Result<Self, PluginError> {
        let w = what::<Policy>(arn);
        let answer = c
            .iam
            .get_policy()
            .policy_arn(arn)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let policy = answer.policy().ok_or_else(|| no_answer(&w))?;
        let version = policy.default_version_id().ok_or_else(|| no_answer(&w))?;
        let document = c
            .iam
            .get_policy_version()
            .policy_arn(arn)
            .version_id(version)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let text = document
            .policy_version()
            .and_then(|v| v.document())
            .unwrap_or("{}");
        Ok(Policy {
            name: policy.policy_name().unwrap_or_default().to_owned(),
            policy: document::parse(&w, text)?,
            path: policy.path().map(str::to_owned),
            description: policy
                .description()
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
            tags: from_iam(policy.tags()),
            arn: Some(arn.to_owned()),
            policy_id: policy.policy_id().map(str::to_owned),
            default_version_id: Some(version.to_owned()),
        })
    }

    async fn update(
        c: &Clients,
        arn: &str,
        current: &Self,
        desired: &Self,
    ) -> Result<(), PluginError> {
        let w = what::<Policy>(arn);
        if current.policy != desired.policy {
            prune(c, arn).await?;
            c.iam
                .create_policy_version()
                .policy_arn(arn)
                .policy_document(document::to_text(&w, "policy", &desired.policy)?)
                .set_as_default(true)
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
        retag!(
            c,
            &w,
            current.tags.as_ref(),
            desired.tags.as_ref(),
            tag_policy,
            untag_policy,
            policy_arn,
            arn
        );
        Ok(())
    }

    async fn delete(c: &Clients, arn: &str) -> Result<(), PluginError> {
        let w = what::<Policy>(arn);
        // A policy with versions besides its default cannot be deleted.
        for (id, default) in versions(c, arn).await? {
            if !default {
                c.iam
                    .delete_policy_version()
                    .policy_arn(arn)
                    .version_id(id)
                    .send()
                    .await
                    .map_err(|e| from_sdk(&w, e))?;
            }
        }
        c.iam
            .delete_policy()
            .policy_arn(arn)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut pages = c
            .iam
            .list_policies()
            .scope(PolicyScopeType::Local)
            .into_paginator()
            .send();
        let mut arns = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| from_sdk(TYPE, e))?;
            arns.extend(
                page.policies()
                    .iter()
                    .filter_map(|p| p.arn().map(str::to_owned)),
            );
        }
        Ok(arns)
    }
}
