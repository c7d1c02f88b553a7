//! `AWS::SQS::Queue`: a standard or FIFO queue, its attributes, redrive
//! policy and tags. The native id is the queue URL, as AWS users import
//! it; the name is the natural identifier.

use std::collections::HashMap;

use aws_sdk_sqs::types::QueueAttributeName;
use orrery_plugin_sdk::schema::{ErrorCode, ResourceSchema};
use orrery_plugin_sdk::{field, resource, PluginError};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{absent_if, from_sdk};
use crate::lifecycle::{what, Created, Managed};
use crate::tags::{self, Tags};
use crate::target::Clients;

pub const TYPE: &str = "AWS::SQS::Queue";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Redrive {
    pub dead_letter_target_arn: String,
    pub max_receive_count: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Queue {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fifo_queue: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_based_deduplication: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deduplication_scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fifo_throughput_limit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_retention_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_message_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receive_wait_time_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redrive_policy: Option<Redrive>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kms_master_key_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kms_data_key_reuse_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sqs_managed_sse_enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// SQS's attribute names of the numeric settings, beside the property.
const NUMBERS: [&str; 6] = [
    "VisibilityTimeout",
    "MessageRetentionPeriod",
    "DelaySeconds",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "KmsDataKeyReusePeriodSeconds",
];

impl Queue {
    fn numbers(&self) -> [Option<i64>; 6] {
        [
            self.visibility_timeout_seconds,
            self.message_retention_seconds,
            self.delay_seconds,
            self.max_message_size,
            self.receive_wait_time_seconds,
            self.kms_data_key_reuse_period_seconds,
        ]
    }

    /// The attributes of the settings `self` gives, as SQS takes them:
    /// on create every one, on update those that differ from `current`
    /// (and a redrive policy or KMS key taken away, as SQS removes them:
    /// an empty value).
    fn attributes(&self, current: Option<&Queue>) -> HashMap<QueueAttributeName, String> {
        let mut out = HashMap::new();
        let mut put = |name: &str, value: String| {
            out.insert(QueueAttributeName::from(name), value);
        };
        let old = current.map(Queue::numbers).unwrap_or_default();
        for ((name, want), had) in NUMBERS.iter().zip(self.numbers()).zip(old) {
            if let Some(v) = want.filter(|v| Some(*v) != had) {
                put(name, v.to_string());
            }
        }
        let changed = |want: &Option<bool>, had: Option<bool>| want.filter(|w| Some(*w) != had);
        if current.is_none() && self.fifo_queue == Some(true) {
            put("FifoQueue", "true".into());
        }
        if let Some(v) = changed(
            &self.content_based_deduplication,
            current.and_then(|c| c.content_based_deduplication),
        ) {
            put("ContentBasedDeduplication", v.to_string());
        }
        if let Some(v) = changed(
            &self.sqs_managed_sse_enabled,
            current.and_then(|c| c.sqs_managed_sse_enabled),
        ) {
            put("SqsManagedSseEnabled", v.to_string());
        }
        let strings = [
            (
                "DeduplicationScope",
                &self.deduplication_scope,
                current.map(|c| &c.deduplication_scope),
            ),
            (
                "FifoThroughputLimit",
                &self.fifo_throughput_limit,
                current.map(|c| &c.fifo_throughput_limit),
            ),
        ];
        for (name, want, had) in strings {
            if let Some(v) = want
                .as_ref()
                .filter(|v| had.and_then(|h| h.as_ref()) != Some(*v))
            {
                put(name, v.clone());
            }
        }
        if current.map(|c| &c.kms_master_key_id) != Some(&self.kms_master_key_id) {
            match (&self.kms_master_key_id, current) {
                (Some(k), _) => put("KmsMasterKeyId", k.clone()),
                (None, Some(_)) => put("KmsMasterKeyId", String::new()),
                (None, None) => {}
            }
        }
        if current.map(|c| &c.redrive_policy) != Some(&self.redrive_policy) {
            match (&self.redrive_policy, current) {
                (Some(r), _) => put(
                    "RedrivePolicy",
                    json!({"deadLetterTargetArn": r.dead_letter_target_arn, "maxReceiveCount": r.max_receive_count})
                        .to_string(),
                ),
                (None, Some(_)) => put("RedrivePolicy", String::new()),
                (None, None) => {}
            }
        }
        out
    }
}

fn schema() -> ResourceSchema {
    let number = |name: &str, about: &str| field::integer(name).provider_default().describe(about);
    resource(TYPE)
        .describe("An SQS queue; imported by its URL")
        .identifier(["name"])
        .field(
            field::string("name")
                .required()
                .create_only()
                .describe("The queue's name; a FIFO queue's ends in `.fifo`"),
        )
        .field(
            field::boolean("fifo_queue")
                .create_only()
                .provider_default()
                .describe("A FIFO queue"),
        )
        .field(
            field::boolean("content_based_deduplication")
                .provider_default()
                .describe("FIFO: deduplicate by content"),
        )
        .field(
            field::string("deduplication_scope")
                .provider_default()
                .describe("FIFO: `queue` or `messageGroup`"),
        )
        .field(
            field::string("fifo_throughput_limit")
                .provider_default()
                .describe("FIFO: `perQueue` or `perMessageGroupId`"),
        )
        .field(number(
            "visibility_timeout_seconds",
            "Seconds a received message is hidden (AWS: 30)",
        ))
        .field(number(
            "message_retention_seconds",
            "Seconds a message is kept (AWS: 345600, 4 days)",
        ))
        .field(number(
            "delay_seconds",
            "Seconds each message is delayed (AWS: 0)",
        ))
        .field(number(
            "max_message_size",
            "Largest message in bytes (AWS: 262144)",
        ))
        .field(number(
            "receive_wait_time_seconds",
            "Long polling wait (AWS: 0)",
        ))
        .field(
            field::map("redrive_policy").describe(
                "`dead_letter_target_arn` and `max_receive_count`: the dead-letter queue",
            ),
        )
        .field(field::string("kms_master_key_id").describe("SSE-KMS: the KMS key id or alias"))
        .field(number(
            "kms_data_key_reuse_period_seconds",
            "SSE-KMS: data key reuse (AWS: 300)",
        ))
        .field(
            field::boolean("sqs_managed_sse_enabled")
                .provider_default()
                .describe("SSE with SQS-owned keys"),
        )
        .field(field::map("tags").describe("Tags; absent means none"))
        .field(field::string("arn").read_only())
        .field(field::string("url").read_only())
        .build()
}

async fn url_of(c: &Clients, name: &str) -> Result<Option<String>, PluginError> {
    let answer = absent_if(
        &what::<Queue>(name),
        c.sqs.get_queue_url().queue_name(name).send().await,
        &[
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
        ],
    )?;
    Ok(answer.and_then(|a| a.queue_url().map(str::to_owned)))
}

fn number(attributes: &HashMap<String, String>, name: &str) -> Option<i64> {
    attributes.get(name).and_then(|v| v.parse().ok())
}

fn boolean(attributes: &HashMap<String, String>, name: &str) -> Option<bool> {
    attributes.get(name).and_then(|v| v.parse().ok())
}

fn redrive(what: &str, text: &str) -> Result<Option<Redrive>, PluginError> {
    if text.is_empty() {
        return Ok(None);
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        PluginError::new(
            ErrorCode::GeneralServiceException,
            format!("{what}: RedrivePolicy is not JSON: {e}"),
        )
    })?;
    // SQS has answered the count as a number and as a string.
    let count = &value["maxReceiveCount"];
    Ok(Some(Redrive {
        dead_letter_target_arn: value["deadLetterTargetArn"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        max_receive_count: count
            .as_i64()
            .or_else(|| count.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(0),
    }))
}

impl Managed for Queue {
    const TYPE: &'static str = TYPE;

    fn schema() -> ResourceSchema {
        schema()
    }

    async fn existing(c: &Clients, desired: &Self) -> Result<Option<String>, PluginError> {
        url_of(c, &desired.name).await
    }

    async fn create(c: &Clients, desired: &Self) -> Result<Created, PluginError> {
        let w = what::<Queue>(&desired.name);
        let answer = c
            .sqs
            .create_queue()
            .queue_name(&desired.name)
            .set_attributes(Some(desired.attributes(None)))
            .set_tags(desired.tags.clone().map(|t| t.into_iter().collect()))
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let url = answer.queue_url().ok_or_else(|| {
            PluginError::new(
                ErrorCode::GeneralServiceException,
                format!("{w}: AWS answered no URL"),
            )
        })?;
        Ok(url.to_owned().into())
    }

    async fn read(c: &Clients, url: &str) -> Result<Self, PluginError> {
        let w = what::<Queue>(url);
        let answer = c
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let attributes: HashMap<String, String> = answer
            .attributes()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
            .collect();
        let tags = c
            .sqs
            .list_queue_tags()
            .queue_url(url)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        let arn = attributes.get("QueueArn").cloned();
        let name = arn
            .as_deref()
            .and_then(|a| a.rsplit(':').next())
            .or_else(|| url.rsplit('/').next())
            .unwrap_or_default()
            .to_owned();
        let fifo = boolean(&attributes, "FifoQueue").unwrap_or(false);
        Ok(Queue {
            name,
            fifo_queue: Some(fifo),
            content_based_deduplication: fifo
                .then(|| boolean(&attributes, "ContentBasedDeduplication").unwrap_or(false)),
            deduplication_scope: attributes.get("DeduplicationScope").cloned(),
            fifo_throughput_limit: attributes.get("FifoThroughputLimit").cloned(),
            visibility_timeout_seconds: number(&attributes, "VisibilityTimeout"),
            message_retention_seconds: number(&attributes, "MessageRetentionPeriod"),
            delay_seconds: number(&attributes, "DelaySeconds"),
            max_message_size: number(&attributes, "MaximumMessageSize"),
            receive_wait_time_seconds: number(&attributes, "ReceiveMessageWaitTimeSeconds"),
            redrive_policy: redrive(
                &w,
                attributes.get("RedrivePolicy").map_or("", String::as_str),
            )?,
            kms_master_key_id: attributes
                .get("KmsMasterKeyId")
                .filter(|k| !k.is_empty())
                .cloned(),
            kms_data_key_reuse_period_seconds: number(&attributes, "KmsDataKeyReusePeriodSeconds"),
            sqs_managed_sse_enabled: boolean(&attributes, "SqsManagedSseEnabled"),
            tags: tags::read(
                tags.tags()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone())),
            ),
            arn,
            url: Some(url.to_owned()),
        })
    }

    async fn update(
        c: &Clients,
        url: &str,
        current: &Self,
        desired: &Self,
    ) -> Result<(), PluginError> {
        let w = what::<Queue>(url);
        let attributes = desired.attributes(Some(current));
        if !attributes.is_empty() {
            c.sqs
                .set_queue_attributes()
                .queue_url(url)
                .set_attributes(Some(attributes))
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
        let (set, remove) = tags::diff(current.tags.as_ref(), desired.tags.as_ref());
        if !remove.is_empty() {
            c.sqs
                .untag_queue()
                .queue_url(url)
                .set_tag_keys(Some(remove))
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
        if !set.is_empty() {
            c.sqs
                .tag_queue()
                .queue_url(url)
                .set_tags(Some(set.into_iter().collect()))
                .send()
                .await
                .map_err(|e| from_sdk(&w, e))?;
        }
        Ok(())
    }

    async fn delete(c: &Clients, url: &str) -> Result<(), PluginError> {
        let w = what::<Queue>(url);
        // DeleteQueue of a gone queue succeeds on some endpoints: ask first.
        Self::read(c, url).await?;
        c.sqs
            .delete_queue()
            .queue_url(url)
            .send()
            .await
            .map_err(|e| from_sdk(&w, e))?;
        Ok(())
    }

    async fn ids(c: &Clients) -> Result<Vec<String>, PluginError> {
        let mut urls = Vec::new();
        let mut token = None;
        loop {
            let page = c
                .sqs
                .list_queues()
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| from_sdk(TYPE, e))?;
            urls.extend(page.queue_urls().iter().cloned());
            match page.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                _ => return Ok(urls),
            }
        }
    }
}
