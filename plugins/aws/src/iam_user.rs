//! `AWS::IAM::User`: a user with its path, permissions boundary and tags.
//! Imported by its name.

use orrery_plugin_sdk::schema::{ErrorCode, ResourceSchema};
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};

use crate::error::{absent_if, from_sdk};
use crate::iam::{from_iam, retag, to_iam};
use crate::lifecycle::{what, Created, Managed};
use crate::tags::Tags;
use crate::target::Clients;

pub const TYPE: &str = "AWS::IAM::User";

#[derive(Debug, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permissions_boundary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_id: Option<String>,
}

impl Managed for User {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("An IAM user; imported by its name")
            .identifier(["name"])
            .field(
                field::string("name")
                    .required()
                    .create_only()
                    .describe("The user's name"),
            )
            .field(
                field::string("path")
                    .provider_default()
                    .describe("The user's path (AWS: `/`)"),
            )
            .field(
                field::string("permissions_boundary")
                    .describe("The ARN of the policy bounding the user's permissions"),
            )
            .field(field::map("tags").describe("Tags; absent means none"))
            .field(field::string("arn").read_only())
            .field(field::string("unique_id").read_only())
            .build()
    }

    async fn existing(c: &Clients, desired: &Self) -> Result<Option<String>, PluginError> {
        let found = absent_if(
            &what::<User>(&desired.name),
            c.iam.get_user().user_name(&desired.name).send().await,
            &["NoSuchEntity"],
        )?;
        Ok(found.map(|_| desired.name.clone()))
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        let w = what::<User>(&desired.name);
        c.iam
            .create_user()
            .user_name(&desired.name)
            .set_path(desired.path.clone())
            .set_permissions_boundary(desired.permissions_boundary.clone())
            .set_tags(to_iam(&w, desired.tags.as_ref())?)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        Ok(desired.name.clone().into())
    }

    async fn read(c: &Clients, name: &str) -> Result<Self, PluginError> {
        let w = what::<User>(name);
        let answer = c
            .iam
            .get_user()
            .user_name(name)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let user = answer.user().ok_or_else(|| {
            PluginError::new(
                ErrorCode::GeneralServiceException,
                format!("{w}: AWS answered no user"),
            )
        })?;
        Ok(User {
            name: user.user_name().to_owned(),
            path: Some(user.path().to_owned()),
            permissions_boundary: user
                .permissions_boundary()
                .and_then(|b| b.permissions_boundary_arn())
                .map(str::to_owned),
            tags: from_iam(user.tags()),
            arn: Some(user.arn().to_owned()),
            unique_id: Some(user.user_id().to_owned()),
        })
    }

    async fn update(
        c: &Clients,
        name: &str,
        current: &Self,
        desired: &Self,
    ) -> Result<(), PluginError> {
        let w = what::<User>(name);
        let new_path = desired
            .path
            .as_ref()
            .filter(|p| current.path.as_ref() != Some(*p));
        let path_changed = new_path.is_some();
        if let Some(path) = new_path {
            c.iam
                .update_user()
                .user_name(name)
                .new_path(path)
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
        if current.permissions_boundary != desired.permissions_boundary {
            match &desired.permissions_boundary {
                Some(arn) => c
                    .iam
                    .put_user_permissions_boundary()
                    .user_name(name)
                    .permissions_boundary(arn)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| from_sdk(&w, e))?,
                None => c
                    .iam
                    .delete_user_permissions_boundary()
                    .user_name(name)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| from_sdk(&w, e))?,
            }
        }
        // moto drops a user's tags on UpdateUser (AWS keeps them): compare
        // with the tags as they are after the path change.
        let tags = match path_changed {
            true => Self::read(c, name).await?.tags,
            false => current.tags.clone(),
        };
        retag!(
            c,
            &w,
            tags.as_ref(),
            desired.tags.as_ref(),
            tag_user,
            untag_user,
            user_name,
            name
        );
        Ok(())
    }

    async fn delete(c: &Clients, name: &str) -> Result<(), PluginError> {
        c.iam
            .delete_user()
            .user_name(name)
            .send()
            .await
            .map_err(|e| from_sdk(&what::<User>(name), e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut pages = c.iam.list_users().into_paginator().send();
        let mut names = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| from_sdk(TYPE, e))?;
            names.extend(page.users().iter().map(|u| u.user_name().to_owned()));
        }
        Ok(names)
    }
}
