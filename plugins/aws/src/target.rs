//! A target's config (`region`, `endpoint_url`, credentials) and the SDK
//! clients built from it, kept per config.
//!
//! Credentials come from, in this order of preference:
//!
//! - a **credential source** (`credentials`, [`Source`]): static keys, a
//!   profile of shared files, `AssumeRole` through STS, or web identity
//!   from a token file. It names files and identities of the host that runs
//!   the plugin, so only that host's operator sets it (held target config
//!   on a satellite; `orrery_bus::held_targets::HOST_FIELDS` refuses a
//!   stack's own). The satellite adds it to each request it hands the
//!   plugin over stdin; the plugin turns it into the SDK's own providers
//!   (`AssumeRoleProvider`, `ProfileFileCredentialsProvider`,
//!   `WebIdentityTokenCredentialsProvider`), and the SDK's identity cache
//!   keeps the short-lived credentials they give and fetches new ones
//!   before they expire. Nothing here writes them anywhere: not the
//!   environment, not a file, not a log.
//! - static keys (`access_key_id` and `secret_access_key`, opaque: on a
//!   satellite they are held target config read from `${file:…}`);
//! - else the SDK's default chain in the plugin's process (its environment,
//!   which a plugin host clears, the shared files of its user, container
//!   and instance metadata).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use aws_config::profile::ProfileFileCredentialsProvider;
use aws_config::provider_config::ProviderConfig;
use aws_config::retry::RetryConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_config::web_identity_token::{StaticConfiguration, WebIdentityTokenCredentialsProvider};
use aws_config::{BehaviorVersion, ConfigLoader, Region};
use aws_runtime::env_config::file::{EnvConfigFileKind, EnvConfigFiles};
use aws_sdk_s3::config::{Credentials, SharedCredentialsProvider};
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use orrery_plugin_sdk::schema::{FieldSchema, PropertyMap, Target, Value};
use orrery_plugin_sdk::{field, from_properties, from_value, PluginError};
use serde::Deserialize;
use tokio::sync::Mutex;

/// The fields of a target's `config`.
pub fn fields() -> Vec<FieldSchema> {
    vec![
        field::string("region")
            .required()
            .describe("The AWS region, e.g. `eu-west-1`; one target per account and region")
            .build(),
        field::string("endpoint_url")
            .describe(
                "Another endpoint for every service, e.g. an emulator's `http://127.0.0.1:5000`",
            )
            .build(),
        field::map("credentials")
            .opaque()
            .describe(
                "Where credentials come from on the plugin's host: `source` = `static`, `profile`, \
                 `assume_role` or `web_identity`; set by the host's operator only (held target config)",
            )
            .build(),
        field::string("access_key_id")
            .opaque()
            .describe("A static access key id; hold it on the satellite (`${file:…}`)")
            .build(),
        field::string("secret_access_key")
            .opaque()
            .describe("The secret of `access_key_id`; hold it on the satellite (`${file:…}`)")
            .build(),
        field::string("session_token")
            .opaque()
            .describe("A session token with temporary static keys")
            .build(),
    ]
}

/// A target's config as read.
#[derive(Deserialize)]
struct Config {
    region: String,
    endpoint_url: Option<String>,
    /// Read into a [`Source`] on its own, so a mistake in it is reported
    /// under its name.
    credentials: Option<Value>,
    /// Read only to refuse it: a named profile is a credential source of
    /// the host now (`credentials = { source = "profile", … }`), which a
    /// stack may not pick. Ignoring it would silently act as another
    /// identity.
    profile: Option<serde::de::IgnoredAny>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    session_token: Option<String>,
}

/// The most nested `base` sources of one credential source (a role
/// assumed from a role assumed from keys is two): role chains longer than
/// this are a mistake.
const MAX_CHAIN: usize = 4;

/// A credential source, as the host's operator writes it in held target
/// config (`credentials = { source = "assume_role", … }`). Unknown fields
/// are refused: a misspelt `external_id` must not be dropped silently.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(tag = "source", rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// Long-lived keys given as values (on a satellite, `${file:…}`
    /// references the satellite resolves).
    Static {
        /// The access key id.
        access_key_id: String,
        /// Its secret.
        secret_access_key: String,
        /// A session token, with temporary keys.
        session_token: Option<String>,
    },
    /// A profile of the AWS shared config and credentials files (keys,
    /// `role_arn` with `source_profile`, `web_identity_token_file`, …).
    Profile {
        /// The profile; `default` when absent.
        profile: Option<String>,
        /// The config file; with neither file given, the user's
        /// `~/.aws/config` and `~/.aws/credentials`.
        config_file: Option<PathBuf>,
        /// The credentials file.
        credentials_file: Option<PathBuf>,
    },
    /// `sts:AssumeRole`, signed with the credentials of `base` (the SDK's
    /// default chain in the plugin's process when absent).
    AssumeRole {
        /// The role's ARN.
        role_arn: String,
        /// The external id the role's trust policy asks for.
        external_id: Option<String>,
        /// The session name, seen in CloudTrail; `orrery` when absent.
        session_name: Option<String>,
        /// How long each session lasts (STS's default, 1 h, when absent).
        duration_seconds: Option<u32>,
        /// Whose credentials assume the role.
        base: Option<Box<Source>>,
    },
    /// `sts:AssumeRoleWithWebIdentity` with the token a file holds (read
    /// again at each refresh, as rotated projected tokens need).
    WebIdentity {
        /// The role's ARN.
        role_arn: String,
        /// The file holding the OIDC token.
        token_file: PathBuf,
        /// The session name; `orrery` when absent.
        session_name: Option<String>,
    },
}

impl std::fmt::Debug for Source {
    // Where credentials come from, never the keys themselves.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Static { .. } => f.debug_struct("Static").finish_non_exhaustive(),
            Source::Profile {
                profile,
                config_file,
                credentials_file,
            } => f
                .debug_struct("Profile")
                .field("profile", profile)
                .field("config_file", config_file)
                .field("credentials_file", credentials_file)
                .finish(),
            Source::AssumeRole { role_arn, base, .. } => f
                .debug_struct("AssumeRole")
                .field("role_arn", role_arn)
                .field("base", base)
                .finish_non_exhaustive(),
            Source::WebIdentity {
                role_arn,
                token_file,
                ..
            } => f
                .debug_struct("WebIdentity")
                .field("role_arn", role_arn)
                .field("token_file", token_file)
                .finish_non_exhaustive(),
        }
    }
}

/// The session name when the operator gives none.
const SESSION_NAME: &str = "orrery";

/// The SDK clients of one target.
#[derive(Debug)]
pub struct Clients {
    /// S3, path-style when an endpoint is given (emulators serve no
    /// virtual hosts).
    pub s3: aws_sdk_s3::Client,
    /// IAM.
    pub iam: aws_sdk_iam::Client,
    /// SQS.
    pub sqs: aws_sdk_sqs::Client,
    /// The target's region.
    pub region: String,
}

/// Clients per target config, made on first use.
#[derive(Debug, Default)]
pub struct ClientCache {
    clients: Mutex<HashMap<Vec<u8>, Arc<Clients>>>,
}

impl ClientCache {
    /// The clients of `target`'s config.
    pub async fn get(&self, target: &Target) -> Result<Arc<Clients>, PluginError> {
        let key = orrery_plugin_sdk::schema::encode(&target.config)
            .map_err(|e| PluginError::invalid(format!("target config: {e}")))?;
        let mut cache = self.clients.lock().await;
        if let Some(c) = cache.get(&key) {
            return Ok(c.clone());
        }
        let made = Arc::new(clients(&target.config).await?);
        cache.insert(key, made.clone());
        Ok(made)
    }
}

/// The SDK clients a target config describes (tests use them to change
/// things behind the plugin's back).
pub async fn clients(config: &PropertyMap) -> Result<Clients, PluginError> {
    let config: Config = from_properties(config)?;
    if config.profile.is_some() {
        return Err(PluginError::invalid(
            "target config: `profile` is a credential source of the plugin's host now: its operator \
             holds `credentials = { source = \"profile\", profile = … }`",
        ));
    }
    let base = Base {
        // One HTTPS stack: rustls on ring, as the rest of Orrery.
        http: aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https(),
        region: Region::new(config.region.clone()),
        endpoint_url: config.endpoint_url.clone(),
    };
    let mut loader = base.loader();
    match (
        config.credentials,
        config.access_key_id,
        config.secret_access_key,
    ) {
        (Some(source), None, None) => {
            let source: Source = from_value(&source).map_err(|e| {
                PluginError::invalid(format!("target config `credentials`: {}", e.message))
            })?;
            loader = loader.credentials_provider(provider(&source, &base, 0).await?);
        }
        (Some(_), _, _) => {
            return Err(PluginError::invalid(
                "target config: `credentials` and static keys (`access_key_id`, \
                 `secret_access_key`) exclude each other",
            ))
        }
        (None, Some(id), Some(secret)) => {
            loader = loader.credentials_provider(Credentials::new(
                id,
                secret,
                config.session_token,
                None,
                "orrery-target-config",
            ));
        }
        (None, None, None) => {}
        _ => {
            return Err(PluginError::invalid(
                "target config: `access_key_id` and `secret_access_key` go together",
            ))
        }
    }
    // The loader wraps the provider in the SDK's lazy identity cache: one
    // per target (the `ClientCache` keeps the clients), which hands out the
    // session it holds and asks the provider again shortly before expiry.
    let shared = loader.load().await;
    let s3 = aws_sdk_s3::config::Builder::from(&shared)
        .force_path_style(config.endpoint_url.is_some())
        .build();
    Ok(Clients {
        s3: aws_sdk_s3::Client::from_conf(s3),
        iam: aws_sdk_iam::Client::new(&shared),
        sqs: aws_sdk_sqs::Client::new(&shared),
        region: config.region,
    })
}

/// What every SDK config of a target shares, credential providers' own
/// STS clients included.
struct Base {
    http: SharedHttpClient,
    region: Region,
    endpoint_url: Option<String>,
}

impl Base {
    fn loader(&self) -> ConfigLoader {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(self.http.clone())
            // Orrery's scheduler retries with backoff inside the announced
            // rate; retries inside the SDK would hide throttling from it.
            .retry_config(RetryConfig::disabled())
            .region(self.region.clone());
        if let Some(url) = &self.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        loader
    }

    /// For the providers that take a `ProviderConfig` (profile, web
    /// identity): their STS calls go to the region's STS endpoint, not
    /// `endpoint_url` (the SDK gives no way to set it there).
    fn provider_config(&self) -> ProviderConfig {
        ProviderConfig::without_region()
            .with_region(Some(self.region.clone()))
            .with_http_client(self.http.clone())
    }
}

/// The SDK provider a credential source describes; `depth` counts the
/// `base` sources above it.
fn provider<'a>(
    source: &'a Source,
    base: &'a Base,
    depth: usize,
) -> Pin<Box<dyn Future<Output = Result<SharedCredentialsProvider, PluginError>> + Send + 'a>> {
    Box::pin(async move {
        if depth > MAX_CHAIN {
            return Err(PluginError::invalid(format!(
                "target config `credentials`: more than {MAX_CHAIN} nested `base` sources"
            )));
        }
        Ok(match source {
            Source::Static {
                access_key_id,
                secret_access_key,
                session_token,
            } => SharedCredentialsProvider::new(Credentials::new(
                access_key_id,
                secret_access_key,
                session_token.clone(),
                None,
                "orrery-held-static",
            )),
            Source::Profile {
                profile,
                config_file,
                credentials_file,
            } => {
                let mut files = EnvConfigFiles::builder();
                if config_file.is_none() && credentials_file.is_none() {
                    files = files
                        .include_default_config_file(true)
                        .include_default_credentials_file(true);
                }
                if let Some(path) = config_file {
                    files = files.with_file(EnvConfigFileKind::Config, path);
                }
                if let Some(path) = credentials_file {
                    files = files.with_file(EnvConfigFileKind::Credentials, path);
                }
                let mut builder = ProfileFileCredentialsProvider::builder()
                    .configure(&base.provider_config())
                    .profile_files(files.build());
                if let Some(profile) = profile {
                    builder = builder.profile_name(profile);
                }
                SharedCredentialsProvider::new(builder.build())
            }
            Source::AssumeRole {
                role_arn,
                external_id,
                session_name,
                duration_seconds,
                base: signer,
            } => {
                let mut loader = base.loader();
                if let Some(signer) = signer {
                    loader = loader.credentials_provider(provider(signer, base, depth + 1).await?);
                }
                // STS goes where every other service of the target goes
                // (`endpoint_url`), so an emulator serves it too.
                let sts = loader.load().await;
                let mut builder = AssumeRoleProvider::builder(role_arn)
                    .configure(&sts)
                    .session_name(session_name.as_deref().unwrap_or(SESSION_NAME));
                if let Some(id) = external_id {
                    builder = builder.external_id(id);
                }
                if let Some(seconds) = duration_seconds {
                    builder = builder.session_length(Duration::from_secs((*seconds).into()));
                }
                SharedCredentialsProvider::new(builder.build().await)
            }
            Source::WebIdentity {
                role_arn,
                token_file,
                session_name,
            } => SharedCredentialsProvider::new(
                WebIdentityTokenCredentialsProvider::builder()
                    .configure(&base.provider_config())
                    .static_configuration(StaticConfiguration {
                        web_identity_token_file: token_file.clone(),
                        role_arn: role_arn.clone(),
                        session_name: session_name.as_deref().unwrap_or(SESSION_NAME).to_owned(),
                    })
                    .build(),
            ),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_plugin_sdk::to_properties;

    fn source(value: serde_json::Value) -> Result<Source, PluginError> {
        from_value(&Value::Map(to_properties(&value).unwrap()))
    }

    #[test]
    fn credential_sources_are_read_whole_and_strictly() {
        let read = source(serde_json::json!({
            "source": "assume_role",
            "role_arn": "arn:aws:iam::123456789012:role/deployer",
            "external_id": "x-1",
            "base": { "source": "profile", "credentials_file": "/etc/orrery/aws/keys" },
        }))
        .unwrap();
        assert_eq!(
            read,
            Source::AssumeRole {
                role_arn: "arn:aws:iam::123456789012:role/deployer".into(),
                external_id: Some("x-1".into()),
                session_name: None,
                duration_seconds: None,
                base: Some(Box::new(Source::Profile {
                    profile: None,
                    config_file: None,
                    credentials_file: Some("/etc/orrery/aws/keys".into()),
                })),
            }
        );
        // A misspelt field is an error, never an `AssumeRole` without
        // the external id the operator meant.
        let misspelt = source(serde_json::json!({
            "source": "assume_role",
            "role_arn": "arn:aws:iam::123456789012:role/deployer",
            "extrnal_id": "x-1",
        }));
        assert!(misspelt.is_err());
        assert!(source(serde_json::json!({ "source": "instance" })).is_err());
        assert!(source(serde_json::json!({ "role_arn": "arn" })).is_err());
    }

    #[tokio::test]
    async fn a_profile_field_or_mixed_credentials_are_refused_not_ignored() {
        for config in [
            serde_json::json!({ "region": "eu-west-1", "profile": "prod" }),
            serde_json::json!({
                "region": "eu-west-1",
                "access_key_id": "AKIA", "secret_access_key": "s3cr3t-9d",
                "credentials": { "source": "profile" },
            }),
            serde_json::json!({
                "region": "eu-west-1",
                "credentials": { "source": "static", "access_key_id": "AKIA",
                                 "secret_access_key": "s3cr3t-9d", "sesion_token": "t" },
            }),
        ] {
            let refused = clients(&to_properties(&config).unwrap()).await.unwrap_err();
            assert!(
                !refused.message.contains("s3cr3t-9d"),
                "{}",
                refused.message
            );
        }
    }
}
