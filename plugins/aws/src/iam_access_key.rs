//! `AWS::IAM::AccessKey`: an access key of a user. Its native id is the
//! access key id, as AWS users know it. The secret is shown by AWS once,
//! at creation: it is answered then, in the opaque read-only `secret`
//! (so the runtime keeps only a keyed hash of it, and shows it nowhere),
//! and never read or listed again.

use aws_sdk_iam::types::StatusType;
use orrery_plugin_sdk::schema::{ErrorCode, PropertyMap, ResourceSchema, Value};
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};

use crate::error::from_sdk;
use crate::lifecycle::{what, Created, Managed};
use crate::target::Clients;

pub const TYPE: &str = "AWS::IAM::AccessKey";

#[derive(Debug, Serialize, Deserialize)]
pub struct AccessKey {
    pub user: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
}

/// The user an access key belongs to.
async fn owner(c: &Clients, id: &str) -> Result<String, PluginError> {
    let w = what::<AccessKey>(id);
    let used = c
        .iam
        .get_access_key_last_used()
        .access_key_id(id)
        .send()
        .await
        .map_err(|e| from_sdk(&w, e))?;
    used.user_name()
        .map(str::to_owned)
        .ok_or_else(|| PluginError::not_found(format!("{w} does not exist")))
}

async fn keys(c: &Clients, user: &str) -> Result<Vec<(String, String)>, PluginError> {
    let listed = c
        .iam
        .list_access_keys()
        .user_name(user)
        .send()
        .await
        .map_err(|e| from_sdk(&format!("{} `{user}`", crate::iam_user::TYPE), e))?;
    Ok(listed
        .access_key_metadata()
        .iter()
        .filter_map(|k| {
            let status = k.status().map_or("Active", |s| s.as_str());
            k.access_key_id()
                .map(|id| (id.to_owned(), status.to_owned()))
        })
        .collect())
}

async fn set_status(c: &Clients, user: &str, id: &str, status: &str) -> Result<(), PluginError> {
    c.iam
        .update_access_key()
        .user_name(user)
        .access_key_id(id)
        .status(StatusType::from(status))
        .send()
        .await
        .map_err(|e| from_sdk(&what::<AccessKey>(id), e))?;
    Ok(())
}

impl Managed for AccessKey {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        resource(TYPE)
            .describe("An access key of an IAM user; imported by its access key id")
            .field(field::string("user").required().create_only().describe("The user's name"))
            .field(field::string("status").provider_default().describe("`Active` (AWS's default) or `Inactive`"))
            .field(field::string("access_key_id").read_only().describe("The access key id"))
            .field(
                field::string("secret")
                    .read_only()
                    .opaque()
                    .describe("The secret access key: answered once, at creation, kept only as a keyed hash, never shown"),
            )
            .build()
    }

    async fn existing(_: &Clients, _: &Self) -> Result<Option<String>, PluginError> {
        // AWS names each new key: there is nothing to collide with.
        Ok(None)
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        let w = what::<AccessKey>(&desired.user);
        let answer = c
            .iam
            .create_access_key()
            .user_name(&desired.user)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let key = answer.access_key().ok_or_else(|| {
            PluginError::new(
                ErrorCode::GeneralServiceException,
                format!("{w}: AWS answered no key"),
            )
        })?;
        let id = key.access_key_id().to_owned();
        if let Some(status) = desired
            .status
            .as_deref()
            .filter(|s| *s != key.status().as_str())
        {
            set_status(c, &desired.user, &id, status).await?;
        }
        let mut once = PropertyMap::new();
        once.insert("secret".into(), Value::from(key.secret_access_key()));
        Ok(Created { id, once })
    }

    async fn read(c: &Clients, id: &str) -> Result<Self, PluginError> {
        let user = owner(c, id).await?;
        let status = keys(c, &user)
            .await?
            .into_iter()
            .find(|(k, _)| k == id)
            .map(|(_, status)| status)
            .ok_or_else(|| {
                PluginError::not_found(format!("{} does not exist", what::<AccessKey>(id)))
            })?;
        Ok(AccessKey {
            user,
            status: Some(status),
            access_key_id: Some(id.to_owned()),
        })
    }

    async fn update(
        c: &Clients,
        id: &str,
        current: &Self,
        desired: &Self,
    ) -> Result<(), PluginError> {
        if let Some(status) = desired
            .status
            .as_deref()
            .filter(|s| current.status.as_deref() != Some(*s))
        {
            set_status(c, &current.user, id, status).await?;
        }
        Ok(())
    }

    async fn delete(c: &Clients, id: &str) -> Result<(), PluginError> {
        let user = Self::read(c, id).await?.user;
        c.iam
            .delete_access_key()
            .user_name(user)
            .access_key_id(id)
            .send()
            .await
            .map_err(|e| from_sdk(&what::<AccessKey>(id), e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut ids = Vec::new();
        for user in <crate::iam_user::User as Managed>::ids(c).await? {
            match keys(c, &user).await {
                Ok(k) => ids.extend(k.into_iter().map(|(id, _)| id)),
                Err(e) if e.code == ErrorCode::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ids)
    }
}
