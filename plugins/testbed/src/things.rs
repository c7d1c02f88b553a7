//! Where a request's things live: the plugin's memory, or a store file
//! ([`crate::store`]) when the target config names one.

use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard};

use orrery_plugin_sdk::schema::{PropertyMap, Value};
use orrery_plugin_sdk::PluginError;

use crate::store::{Created, Store};
use crate::NOOP_THING;

/// (target name, resource type, thing name).
pub(crate) type Key = (String, String, String);

/// Things kept in memory. Hashed with foldhash: the benchmarks create
/// tens of thousands, and SipHash was a tenth of the plugin's work per
/// request (BENCHMARKS.md, relay round 10).
pub(crate) type Memory = Mutex<foldhash::HashMap<Key, PropertyMap>>;

/// One request's view of its things.
pub(crate) enum Things<'a> {
    Memory(&'a Memory),
    Stored(Arc<Store>),
}

fn locked(memory: &Memory) -> MutexGuard<'_, foldhash::HashMap<Key, PropertyMap>> {
    // Injected panics never happen while the lock is held.
    memory.lock().unwrap_or_else(|p| p.into_inner())
}

impl Things<'_> {
    pub(crate) fn get(&self, key: &Key) -> Result<Option<PropertyMap>, PluginError> {
        match self {
            Things::Memory(m) => Ok(locked(m).get(key).cloned()),
            Things::Stored(s) => s.get(&key.0, &key.1, &key.2),
        }
    }

    /// Makes the thing unless one of its name exists. In memory a retried
    /// create is not recognised (it finds the thing `Exists`).
    pub(crate) fn create(
        &self,
        key: Key,
        properties: &PropertyMap,
        request_id: &str,
    ) -> Result<Created, PluginError> {
        match self {
            Things::Memory(m) => match locked(m).entry(key) {
                Entry::Occupied(_) => Ok(Created::Exists),
                Entry::Vacant(vacant) => {
                    vacant.insert(properties.clone());
                    Ok(Created::New)
                }
            },
            Things::Stored(s) => s.create(&key.0, &key.1, &key.2, properties, request_id),
        }
    }

    /// Replaces a thing's properties; false when it does not exist.
    pub(crate) fn update(&self, key: &Key, properties: &PropertyMap) -> Result<bool, PluginError> {
        match self {
            Things::Memory(m) => match locked(m).get_mut(key) {
                Some(current) => {
                    *current = properties.clone();
                    Ok(true)
                }
                None => Ok(false),
            },
            Things::Stored(s) => s.update(&key.0, &key.1, &key.2, properties),
        }
    }

    pub(crate) fn remove(&self, key: &Key) -> Result<(), PluginError> {
        match self {
            Things::Memory(m) => {
                locked(m).remove(key);
                Ok(())
            }
            Things::Stored(s) => s.remove(&key.0, &key.1, &key.2),
        }
    }

    /// Every thing of `ty` on `target`: (name, properties).
    pub(crate) fn list(
        &self,
        target: &str,
        ty: &str,
    ) -> Result<Vec<(String, PropertyMap)>, PluginError> {
        match self {
            Things::Memory(m) => Ok(locked(m)
                .iter()
                .filter(|((t, y, _), _)| t == target && y == ty)
                .map(|((_, _, name), p)| (name.clone(), p.clone()))
                .collect()),
            Things::Stored(s) => s.list(target, ty),
        }
    }

    /// A thing on `target` attached to `name` or needing it, if any, and
    /// how it uses it.
    pub(crate) fn user_of(
        &self,
        target: &str,
        name: &str,
    ) -> Result<Option<(String, &'static str)>, PluginError> {
        let refers =
            |p: &PropertyMap, field: &str| p.get(field).and_then(Value::as_str) == Some(name);
        Ok(self
            .list(target, NOOP_THING)?
            .into_iter()
            .find_map(|(by, p)| {
                if refers(&p, "attached_to") {
                    Some((by, "is attached to"))
                } else if refers(&p, "needs") {
                    Some((by, "needs"))
                } else {
                    None
                }
            }))
    }
}
