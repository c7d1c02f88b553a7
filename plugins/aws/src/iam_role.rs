//! `AWS::IAM::Role`: a role with its trust policy, path, description,
//! maximum session duration, permissions boundary and tags. Imported by
//! its name.

use orrery_plugin_sdk::schema::{ErrorCode, ResourceSchema};
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document;
use crate::error::{absent_if, from_sdk};
use crate::iam::{from_iam, retag, to_iam};
use crate::lifecycle::{what, Created, Managed};
use crate::tags::Tags;
use crate::target::Clients;

pub const TYPE: &str = "AWS::IAM::Role";

#[derive(Debug, Serialize, Deserialize)]
pub struct Role {
    pub name: String,
    pub assume_role_policy: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_session_duration: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permissions_boundary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_id: Option<String>,
}

impl Managed for Role {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("An IAM role; imported by its name")
            .identifier(["name"])
            .field(
                field::string("name")
                    .required()
                    .create_only()
                    .describe("The role's name"),
            )
            .field(
                field::map("assume_role_policy")
                    .required()
                    .describe("The trust policy document"),
            )
            .field(
                field::string("path")
                    .create_only()
                    .provider_default()
                    .describe("The role's path (AWS: `/`)"),
            )
            .field(field::string("description").describe("A description"))
            .field(
                field::integer("max_session_duration")
                    .provider_default()
                    .describe("Longest session in seconds, 3600 to 43200 (AWS: 3600)"),
            )
            .field(
                field::string("permissions_boundary")
                    .describe("The ARN of the policy bounding the role's permissions"),
            )
            .field(field::map("tags").describe("Tags; absent means none"))
            .field(field::string("arn").read_only())
            .field(field::string("unique_id").read_only())
            .build()
    }

    async fn existing(c: &Clients, desired: &Self) -> Result<Option<String>, PluginError> {
        let found = absent_if(
            &what::<Role>(&desired.name),
            c.iam.get_role().role_name(&desired.name).send().await,
            &["NoSuchEntity"],
        )?;
        Ok(found.map(|_| desired.name.clone()))
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        let w = what::<Role>(&desired.name);
        c.iam
            .create_role()
            .role_name(&desired.name)
            .assume_role_policy_document(document::to_text(
                &w,
                "assume_role_policy",
                &desired.assume_role_policy,
            )?)
            .set_path(desired.path.clone())
            .set_description(desired.description.clone())
            .set_max_session_duration(desired.max_session_duration)
            .set_permissions_boundary(desired.permissions_boundary.clone())
            .set_tags(to_iam(&w, desired.tags.as_ref())?)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        Ok(desired.name.clone().into())
    }

    async fn read(c: &Clients, name: &str) -> Result<Self, PluginError> {
        let w = what::<Role>(name);
        let answer = c
            .iam
            .get_role()
            .role_name(name)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let role = answer.role().ok_or_else(|| {
            PluginError::new(
                ErrorCode::GeneralServiceException,
                format!("{w}: AWS answered no role"),
            )
        })?;
        Ok(Role {
            name: role.role_name().to_owned(),
            assume_role_policy: document::parse(
                &w,
                role.assume_role_policy_document().unwrap_or("{}"),
            )?,
            path: Some(role.path().to_owned()),
            description: role
                .description()
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
            max_session_duration: role.max_session_duration(),
            permissions_boundary: role
                .permissions_boundary()
                .and_then(|b| b.permissions_boundary_arn())
                .map(str::to_owned),
            tags: from_iam(role.tags()),
            arn: Some(role.arn().to_owned()),
            unique_id: Some(role.role_id().to_owned()),
        })
    }

    async fn update(
        c: &Clients,
        name: &str,
        current: &Self,
        desired: &Self,
    ) -> Result<(), PluginError> {
        let w = what::<Role>(name);
        if current.assume_role_policy != desired.assume_role_policy {
            c.iam
                .update_assume_role_policy()
                .role_name(name)
                .policy_document(document::to_text(
                    &w,
                    "assume_role_policy",
                    &desired.assume_role_policy,
                )?)
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
        let duration = desired
            .max_session_duration
            .filter(|d| current.max_session_duration != Some(*d));
        if current.description != desired.description || duration.is_some() {
            c.iam
                .update_role()
                .role_name(name)
                .description(desired.description.clone().unwrap_or_default())
                .set_max_session_duration(duration)
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
        if current.permissions_boundary != desired.permissions_boundary {
            match &desired.permissions_boundary {
                Some(arn) => c
                    .iam
                    .put_role_permissions_boundary()
                    .role_name(name)
                    .permissions_boundary(arn)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| from_sdk(&w, e))?,
                None => c
                    .iam
                    .delete_role_permissions_boundary()
                    .role_name(name)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| from_sdk(&w, e))?,
            }
        }
        retag!(
            c,
            &w,
            current.tags.as_ref(),
            desired.tags.as_ref(),
            tag_role,
            untag_role,
            role_name,
            name
        );
        Ok(())
    }

    async fn delete(c: &Clients, name: &str) -> Result<(), PluginError> {
        c.iam
            .delete_role()
            .role_name(name)
            .send()
            .await
            .map_err(|e| from_sdk(&what::<Role>(name), e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut pages = c.iam.list_roles().into_paginator().send();
        let mut names = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| from_sdk(TYPE, e))?;
            names.extend(page.roles().iter().map(|r| r.role_name().to_owned()));
        }
        Ok(names)
    }
}
