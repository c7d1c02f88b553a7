//! `AWS::IAM::RolePolicyAttachment`: a managed policy attached to a role.
//! Its native id is `role/policy-arn`, as terraform-provider-aws imports
//! it (role names have no `/`, so the first one splits it).

use orrery_plugin_sdk::schema::{EdgeKind, ResourceSchema};
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};

use crate::error::from_sdk;
use crate::lifecycle::{what, Created, Managed};
use crate::target::Clients;

pub const TYPE: &str = "AWS::IAM::RolePolicyAttachment";

#[derive(Debug, Serialize, Deserialize)]
pub struct Attachment {
    pub role: String,
    pub policy_arn: String,
}

fn split(id: &str) -> Result<(&str, &str), PluginError> {
    id.split_once('/')
        .filter(|(role, arn)| !role.is_empty() && arn.starts_with("arn:"))
        .ok_or_else(|| {
            PluginError::invalid(format!("{TYPE}: `{id}` is not `role-name/policy-arn`"))
        })
}

async fn attached(c: &Clients, role: &str) -> Result<Vec<String>, PluginError> {
    let mut pages = c
        .iam
        .list_attached_role_policies()
        .role_name(role)
        .into_paginator()
        .send();
    let mut arns = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| from_sdk(&format!("{} `{role}`", crate::iam_role::TYPE), e))?;
        arns.extend(
            page.attached_policies()
                .iter()
                .filter_map(|p| p.policy_arn().map(str::to_owned)),
        );
    }
    Ok(arns)
}

impl Managed for Attachment {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("A managed policy attached to a role; imported as `role-name/policy-arn`")
            .identifier(["role", "policy_arn"])
            .field(
                field::string("role")
                    .required()
                    .create_only()
                    .edge_kind(EdgeKind::AttachesTo)
                    .describe("The role's name"),
            )
            .field(
                field::string("policy_arn")
                    .required()
                    .create_only()
                    .edge_kind(EdgeKind::AttachesTo)
                    .describe("The policy's ARN"),
            )
            .build()
    }

    async fn existing(c: &Clients, desired: &Self) -> Result<Option<String>, PluginError> {
        let id = format!("{}/{}", desired.role, desired.policy_arn);
        match attached(c, &desired.role).await {
            Ok(arns) => Ok(arns.contains(&desired.policy_arn).then_some(id)),
            Err(e) if e.code == orrery_plugin_sdk::schema::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        let id = format!("{}/{}", desired.role, desired.policy_arn);
        c.iam
            .attach_role_policy()
            .role_name(&desired.role)
            .policy_arn(&desired.policy_arn)
            .send()
            .await
            .map_err(|e| from_sdk(&what::<Attachment>(&id), e))?;
        Ok(id.into())
    }

    async fn read(c: &Clients, id: &str) -> Result<Self, PluginError> {
        let (role, arn) = split(id)?;
        if !attached(c, role).await?.iter().any(|a| a == arn) {
            return Err(PluginError::not_found(format!(
                "{} is not attached",
                what::<Attachment>(id)
            )));
        }
        Ok(Attachment {
            role: role.to_owned(),
            policy_arn: arn.to_owned(),
        })
    }

    async fn update(_: &Clients, _: &str, _: &Self, _: &Self) -> Result<(), PluginError> {
        // Both fields are create-only, so an update changes nothing.
        Ok(())
    }

    async fn delete(c: &Clients, id: &str) -> Result<(), PluginError> {
        let (role, arn) = split(id)?;
        c.iam
            .detach_role_policy()
            .role_name(role)
            .policy_arn(arn)
            .send()
            .await
            .map_err(|e| from_sdk(&what::<Attachment>(id), e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut ids = Vec::new();
        for role in <crate::iam_role::Role as Managed>::ids(c).await? {
            match attached(c, &role).await {
                Ok(arns) => ids.extend(arns.into_iter().map(|a| format!("{role}/{a}"))),
                Err(e) if e.code == orrery_plugin_sdk::schema::ErrorCode::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ids)
    }
}
