//! Schemas vouched for by hub publishers (issue 43, attack 2, the second
//! defence). A satellite running a plugin installed from the hub names the
//! package in its describe answer (`orrery_bus::describe::PACKAGE_HEADER`).
//! A primary given the hub and its own trusted publisher keys fetches that
//! manifest, verifies its signature with those keys (`orrery_hub`, the same
//! code installs use) and plans with the manifest's schema; an answer whose
//! schema differs from the signed one fails the plan naming its satellite.
//!
//! Per-target describe subjects keep other sites out; this keeps out a
//! satellite that may serve the target but runs (or pretends to run)
//! another build. For a plugin some trusted key may sign, an answer naming
//! no package is refused too: otherwise a forger would only have to leave
//! the header out.

use std::collections::HashMap;
use std::sync::Mutex;

use orrery_bus::describe::{same_schemas, Answer, Package};
use orrery_hub::{Hub, HubError, TrustedKeys};
use orrery_schema::Announcement;

/// How many verified packages' schemas are kept (a fleet runs a handful
/// of versions; past this the memory starts over).
const MAX_VERIFIED: usize = 256;

/// Why a describe answer's schema was refused.
#[derive(Debug, thiserror::Error)]
pub enum SchemaTrustError {
    /// The answer names a package whose signed schema is not the one it
    /// described.
    #[error(
        "{origin} described plugin `{plugin}` with a schema that differs from the one signed \
         in its hub package {package}; plans use only the signed schema (stop that satellite, \
         or find out which build it runs)"
    )]
    Differs {
        /// The plugin.
        plugin: String,
        /// Who answered: `satellite <id> (version V) for target T`.
        origin: String,
        /// The package it named, `name@version`.
        package: String,
    },
    /// The answer names no package, but some trusted key may sign the
    /// plugin: its schema must come from a signed package.
    #[error(
        "{origin} described plugin `{plugin}` without naming a hub package, and this primary \
         trusts hub publishers for `{plugin}` (--trusted-key): its schema must come from a \
         signed package (install the plugin on that satellite from the hub)"
    )]
    NotFromHub {
        /// The plugin.
        plugin: String,
        /// Who answered.
        origin: String,
    },
    /// The package header does not read, or names another plugin.
    #[error(
        "{origin} described plugin `{plugin}` naming hub package `{value}`, which is not \
         `{plugin}@VERSION manifest-sha256=DIGEST`"
    )]
    Unreadable {
        /// The plugin.
        plugin: String,
        /// Who answered.
        origin: String,
        /// What it sent.
        value: String,
    },
    /// The package's manifest is not on the hub, does not verify with a
    /// key trusted for the plugin, is not the one named, or has no schema.
    #[error(
        "{origin} runs hub package {package} of plugin `{plugin}`, whose signed schema this \
         primary cannot take: {refusal}"
    )]
    Package {
        /// The plugin.
        plugin: String,
        /// Who answered.
        origin: String,
        /// The package named, `name@version`.
        package: String,
        /// The check that refused it (in the message, so not also a
        /// source: a cause chain would repeat it).
        refusal: Box<HubError>,
    },
}

/// A hub and the publisher keys this primary trusts, and the schemas of
/// the packages already verified.
pub struct HubSchemas {
    hub: Hub,
    trusted: TrustedKeys,
    verified: Mutex<HashMap<Package, Announcement>>,
}

impl std::fmt::Debug for HubSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubSchemas")
            .field("trusted", &self.trusted.ids())
            .finish_non_exhaustive()
    }
}

impl HubSchemas {
    /// Schemas from `hub`, trusting exactly `trusted` (each key for the
    /// plugin names it is bound to).
    pub fn new(hub: Hub, trusted: TrustedKeys) -> HubSchemas {
        HubSchemas {
            hub,
            trusted,
            verified: Mutex::default(),
        }
    }

    /// The schema to plan with from `answer`, a satellite's description of
    /// `plugin`: the signed schema of the package it names, once that
    /// package verified and its schema is the one described; `None` when
    /// it names none and no trusted key may sign `plugin` (the answer's
    /// own schema stands, checked against the other satellites' as
    /// before).
    pub async fn check(
        &self,
        plugin: &str,
        answer: &Answer,
    ) -> Result<Option<Announcement>, SchemaTrustError> {
        let package = match &answer.package {
            None if self.trusted.covers(plugin) => {
                return Err(SchemaTrustError::NotFromHub {
                    plugin: plugin.to_owned(),
                    origin: answer.origin(),
                })
            }
            None => return Ok(None),
            Some(Err(value)) => {
                return Err(SchemaTrustError::Unreadable {
                    plugin: plugin.to_owned(),
                    origin: answer.origin(),
                    value: value.clone(),
                })
            }
            Some(Ok(package)) if package.name != plugin => {
                return Err(SchemaTrustError::Unreadable {
                    plugin: plugin.to_owned(),
                    origin: answer.origin(),
                    value: package.header_value(),
                })
            }
            Some(Ok(package)) => package,
        };
        let signed = self
            .signed(package)
            .await
            .map_err(|refusal| SchemaTrustError::Package {
                plugin: plugin.to_owned(),
                origin: answer.origin(),
                package: package.label(),
                refusal: Box::new(refusal),
            })?;
        if !same_schemas(&signed, &answer.announcement) {
            return Err(SchemaTrustError::Differs {
                plugin: plugin.to_owned(),
                origin: answer.origin(),
                package: package.label(),
            });
        }
        Ok(Some(signed))
    }

    /// The verified schema of `package`, from memory or the hub.
    async fn signed(&self, package: &Package) -> Result<Announcement, HubError> {
        let known = self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(package)
            .cloned();
        if let Some(known) = known {
            return Ok(known);
        }
        let signed = self
            .hub
            .signed_schema(
                &package.name,
                &package.version,
                &package.manifest_sha256,
                &self.trusted,
            )
            .await?;
        // Keyed by the manifest's digest: the same key is the same signed
        // content, whatever the hub holds later.
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if verified.len() >= MAX_VERIFIED {
            verified.clear();
        }
        verified.insert(package.clone(), signed.clone());
        Ok(signed)
    }
}
