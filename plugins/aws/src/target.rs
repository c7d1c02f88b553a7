//! A target's config (`region`, `endpoint_url`, credentials) and the SDK
//! clients built from it, kept per config.
//!
//! Credentials are found the standard AWS way in the plugin's process
//! (a named `profile`, else the SDK's default chain: environment, shared
//! files, container and instance metadata), unless the target gives static
//! keys (`access_key_id` and `secret_access_key`, opaque: on a satellite
//! they are held target config read from `${file:…}`, never on the bus).

use std::collections::HashMap;
use std::sync::Arc;

use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_s3::config::Credentials;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use orrery_plugin_sdk::schema::{FieldSchema, PropertyMap, Target};
use orrery_plugin_sdk::{field, from_properties, PluginError};
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
        field::string("profile")
            .describe("A named profile of the shared AWS config files on the plugin's host")
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
    profile: Option<String>,
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    session_token: Option<String>,
}

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
    // One HTTPS stack: rustls on ring, as the rest of Orrery.
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        // Orrery's scheduler retries with backoff inside the announced
        // rate; retries inside the SDK would hide throttling from it.
        .retry_config(RetryConfig::disabled())
        .region(Region::new(config.region.clone()));
    if let Some(profile) = &config.profile {
        loader = loader.profile_name(profile);
    }
    match (config.access_key_id, config.secret_access_key) {
        (Some(id), Some(secret)) => {
            loader = loader.credentials_provider(Credentials::new(
                id,
                secret,
                config.session_token,
                None,
                "orrery-target-config",
            ));
        }
        (None, None) => {}
        _ => {
            return Err(PluginError::invalid(
                "target config: `access_key_id` and `secret_access_key` go together",
            ))
        }
    }
    if let Some(url) = &config.endpoint_url {
        loader = loader.endpoint_url(url);
    }
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
