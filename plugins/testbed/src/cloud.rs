//! `Testbed::Cloud::Thing`: a thing that behaves like a cloud API's
//! resource, so a test can see the duplicates a host makes.
//!
//! - The API assigns the id (`cloud-<n>`); the name is only a property, and
//!   two creates of one name with different request ids make two things.
//! - The only deduplication is the request id: a create whose `request_id`
//!   made a thing before answers with that thing (as EC2's client token).
//! - A create takes `create_ms` (target config) *on the provider's side*: the
//!   row is written when the request arrives, with the instant it becomes
//!   ready; it lands then even if the plugin process, its satellite or the
//!   primary die meanwhile, and `list`/`read` do not show it before.
//!
//! Things live in the store file only (target config `store` or
//! `ORRERY_TESTBED_STORE`): the provider's world outlives every process, and
//! [`crate::store::census`] counts it from outside.
//!
//! ```sql
//! cloud(id INTEGER PRIMARY KEY, target TEXT, type TEXT, name TEXT,
//!       properties BLOB, request_id TEXT UNIQUE, ready_ms INTEGER)
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use orrery_plugin_sdk::schema::{decode, encode, ErrorCode, PropertyMap};
use orrery_plugin_sdk::PluginError;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use crate::store::{failed, Store};

/// The prefix of every native id the cloud assigns.
const ID_PREFIX: &str = "cloud-";

/// The table, created with the store's own.
pub(crate) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS cloud (
         id INTEGER PRIMARY KEY,
         target TEXT NOT NULL,
         type TEXT NOT NULL,
         name TEXT NOT NULL,
         properties BLOB NOT NULL,
         request_id TEXT NOT NULL UNIQUE,
         ready_ms INTEGER NOT NULL
     );
     CREATE INDEX IF NOT EXISTS cloud_by_type ON cloud (target, type, id);";

/// Milliseconds since the Unix epoch: the provider's clock, shared by every
/// process of the machine.
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The native id of row `id`.
pub(crate) fn native_id(id: i64) -> String {
    format!("{ID_PREFIX}{id}")
}

/// The row of a native id, `None` for one the cloud never assigned.
pub(crate) fn row_of(native_id: &str) -> Option<i64> {
    native_id.strip_prefix(ID_PREFIX)?.parse().ok()
}

/// A create the provider accepted: its row and when it is ready.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub id: i64,
    pub properties: PropertyMap,
    pub ready_ms: i64,
}

impl Accepted {
    /// How long until the thing is ready.
    pub fn remaining(&self) -> Duration {
        let ms = self.ready_ms.saturating_sub(now_ms()).max(0);
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }
}

impl Store {
    /// Accepts a create: the thing `request_id` made before, or a new one
    /// ready `create_ms` from now.
    pub(crate) fn cloud_create(
        &self,
        target: &str,
        ty: &str,
        name: &str,
        properties: &PropertyMap,
        request_id: &str,
        create_ms: u64,
    ) -> Result<Accepted, PluginError> {
        let blob = encode(properties).map_err(failed)?;
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(failed)?;
        let before: Option<(i64, Vec<u8>, i64)> = tx
            .query_row(
                "SELECT id, properties, ready_ms FROM cloud WHERE request_id = ?1",
                params![request_id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(failed)?;
        let accepted = match before {
            Some((id, blob, ready_ms)) => Accepted {
                id,
                properties: decode(&blob).map_err(failed)?,
                ready_ms,
            },
            None => {
                let ready_ms =
                    now_ms().saturating_add(i64::try_from(create_ms).unwrap_or(i64::MAX));
                tx.execute(
                    "INSERT INTO cloud (target, type, name, properties, request_id, ready_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![target, ty, name, blob, request_id, ready_ms],
                )
                .map_err(failed)?;
                Accepted {
                    id: tx.last_insert_rowid(),
                    properties: properties.clone(),
                    ready_ms,
                }
            }
        };
        tx.commit().map_err(failed)?;
        Ok(accepted)
    }

    /// The properties of a ready thing of `target`.
    pub(crate) fn cloud_get(
        &self,
        target: &str,
        id: i64,
    ) -> Result<Option<PropertyMap>, PluginError> {
        let blob: Option<Vec<u8>> = self
            .conn()
            .query_row(
                "SELECT properties FROM cloud WHERE id = ?1 AND target = ?2 AND ready_ms <= ?3",
                params![id, target, now_ms()],
                |row| row.get(0),
            )
            .optional()
            .map_err(failed)?;
        blob.map(|b| decode(&b).map_err(failed)).transpose()
    }

    /// Replaces a ready thing's properties; false when there is none.
    pub(crate) fn cloud_update(
        &self,
        target: &str,
        id: i64,
        properties: &PropertyMap,
    ) -> Result<bool, PluginError> {
        let blob = encode(properties).map_err(failed)?;
        let n = self
            .conn()
            .execute(
                "UPDATE cloud SET properties = ?3 WHERE id = ?1 AND target = ?2 AND ready_ms <= ?4",
                params![id, target, blob, now_ms()],
            )
            .map_err(failed)?;
        Ok(n > 0)
    }

    /// Removes a ready thing; false when there is none.
    pub(crate) fn cloud_remove(&self, target: &str, id: i64) -> Result<bool, PluginError> {
        let n = self
            .conn()
            .execute(
                "DELETE FROM cloud WHERE id = ?1 AND target = ?2 AND ready_ms <= ?3",
                params![id, target, now_ms()],
            )
            .map_err(failed)?;
        Ok(n > 0)
    }

    /// Every ready thing of type `ty` on `target`, by id: duplicates too.
    pub(crate) fn cloud_list(
        &self,
        target: &str,
        ty: &str,
    ) -> Result<Vec<(String, PropertyMap)>, PluginError> {
        let conn = self.conn();
        let mut statement = conn
            .prepare(
                "SELECT id, properties FROM cloud WHERE target = ?1 AND type = ?2 AND ready_ms <= ?3
                 ORDER BY id",
            )
            .map_err(failed)?;
        let rows = statement
            .query_map(params![target, ty, now_ms()], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, Vec<u8>>(1)?))
            })
            .map_err(failed)?;
        rows.map(|row| {
            let (id, blob) = row.map_err(failed)?;
            Ok((native_id(id), decode(&blob).map_err(failed)?))
        })
        .collect()
    }
}

/// The error of a thing the cloud does not have (or not yet).
pub(crate) fn not_found(resource_type: &str, native_id: &str) -> PluginError {
    PluginError::new(
        ErrorCode::NotFound,
        format!("no {resource_type} with id `{native_id}`"),
    )
}
