//! The one lifecycle every type follows: create (after checking that the
//! natural identifier is free: several AWS creates are idempotent, and
//! `CreateQueue` with the same attributes answers with the old queue),
//! read, update (create-only fields refused first), delete and list
//! pages. A type supplies the AWS calls ([`Managed`]); the answers and
//! errors are shaped here.

use std::future::Future;

use orrery_plugin_sdk::schema::{ErrorCode, ListedResource, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{
    check_create_only, deleted, done, from_properties, paginate, to_properties, ListPage, OpResult,
    PluginError,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::target::Clients;

/// What a create made: the native id, and properties that AWS shows only
/// then (an access key's secret), answered once and never read again.
pub struct Created {
    /// The native id.
    pub id: String,
    /// Shown once.
    pub once: PropertyMap,
}

impl From<String> for Created {
    fn from(id: String) -> Self {
        Created {
            id,
            once: PropertyMap::new(),
        }
    }
}

/// A resource type: its properties (this struct) and its AWS calls.
pub trait Managed: Serialize + DeserializeOwned + Send + Sync {
    /// The Orrery type name.
    const TYPE: &'static str;

    /// Its schema.
    fn schema() -> ResourceSchema;

    /// The native id of a resource that already has `desired`'s natural
    /// identifier, if one exists.
    fn existing(
        c: &Clients,
        desired: &Self,
    ) -> impl Future<Output = Result<Option<String>, PluginError>> + Send;

    /// Creates it.
    fn create(
        c: &Clients,
        desired: &Self,
    ) -> impl Future<Output = Result<Created, PluginError>> + Send;

    /// Every managed field as AWS has it; `NotFound` when it is gone.
    fn read(c: &Clients, id: &str) -> impl Future<Output = Result<Self, PluginError>> + Send;

    /// Brings `current` to `desired` (create-only fields already equal).
    fn update(
        c: &Clients,
        id: &str,
        current: &Self,
        desired: &Self,
    ) -> impl Future<Output = Result<(), PluginError>> + Send;

    /// Deletes it; `NotFound` when it is gone.
    fn delete(c: &Clients, id: &str) -> impl Future<Output = Result<(), PluginError>> + Send;

    /// The native ids of every resource of the type on the target.
    fn ids(c: &Clients) -> impl Future<Output = Result<Vec<String>, PluginError>> + Send;
}

/// "AWS::S3::Bucket `logs`", for messages.
pub fn what<T: Managed>(id: &str) -> String {
    format!("{} `{id}`", T::TYPE)
}

fn answer<T: Managed>(id: &str, state: &T) -> OpResult {
    done(id, to_properties(state)?)
}

pub async fn create<T: Managed>(c: &Clients, properties: &PropertyMap) -> OpResult {
    let desired: T = from_properties(properties)?;
    if let Some(id) = T::existing(c, &desired).await? {
        return Err(PluginError::new(
            ErrorCode::AlreadyExists,
            format!("{} already exists", what::<T>(&id)),
        ));
    }
    let created = T::create(c, &desired).await?;
    let mut properties = to_properties(&T::read(c, &created.id).await?)?;
    properties.extend(created.once);
    done(created.id, properties)
}

pub async fn read<T: Managed>(c: &Clients, id: &str) -> OpResult {
    answer(id, &T::read(c, id).await?)
}

pub async fn update<T: Managed>(c: &Clients, id: &str, properties: &PropertyMap) -> OpResult {
    let desired: T = from_properties(properties)?;
    let current = T::read(c, id).await?;
    check_create_only(
        &T::schema(),
        &what::<T>(id),
        &to_properties(&desired)?,
        &to_properties(&current)?,
        "AWS has no call for it",
    )?;
    T::update(c, id, &current, &desired).await?;
    answer(id, &T::read(c, id).await?)
}

pub async fn delete<T: Managed>(c: &Clients, id: &str) -> OpResult {
    T::delete(c, id).await?;
    deleted(id)
}

/// The page the request asks for, each resource read.
pub async fn list<T: Managed>(
    c: &Clients,
    size: u32,
    token: Option<&str>,
) -> Result<ListPage, PluginError> {
    let (page, next_page_token) = paginate(T::ids(c).await?, |id| id.as_str(), size, token);
    let mut resources = Vec::with_capacity(page.len());
    for id in page {
        match T::read(c, &id).await {
            Ok(state) => resources.push(ListedResource {
                properties: to_properties(&state)?,
                native_id: id,
            }),
            // Deleted between the listing and its read.
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(ListPage {
        resources,
        next_page_token,
    })
}
