//! Plugin schemas over NATS: a satellite answers
//! `orrery.describe.<plugin>.<target>` for each target it serves with the
//! plugin's announcement, so a primary learns schemas without having the
//! plugin binaries itself, and only from satellites the NATS permissions
//! let serve the target being planned (docs/security.md, "Where schemas
//! come from").
//!
//! Every satellite of a target answers (no queue group): the primary
//! compares the answers, and two that disagree about the schemas fail the
//! plan instead of one winning a race.

use std::time::Duration;

use futures::StreamExt;
use orrery_schema::{Announcement, Envelope, MessageKind, MAX_FRAME_BYTES};

use crate::bus::{message_limit, BusError};
pub use crate::subjects::{describe_subject, target_describe_subject};

/// The NATS header a describe answer names its satellite in (its
/// `--id`). Said by the satellite itself, so it only helps an operator
/// find the satellites that disagree; the trust comes from the subject.
pub const SATELLITE_HEADER: &str = "Orrery-Satellite";

/// The NATS header of a per-target describe answer that lists, comma
/// separated, the stack patterns the answering satellite's operator allows
/// on the target (`[target_access]`); absent when any stack may use it. A
/// primary refuses a stack outside them before planning; the satellite
/// refuses its operations whatever the primary does.
pub const STACKS_HEADER: &str = "Orrery-Stacks";

/// The NATS header of a describe answer that names the hub package the
/// satellite installed the plugin from: `NAME@VERSION
/// manifest-sha256=DIGEST`, the digest of the signed manifest's canonical
/// encoding. Absent for a plugin not installed from a hub. A primary that
/// trusts publishers fetches that manifest, verifies it and plans with its
/// schema (docs/security.md, "Where schemas come from").
pub const PACKAGE_HEADER: &str = "Orrery-Package";

/// The longest [`PACKAGE_HEADER`] value read.
const MAX_PACKAGE_HEADER: usize = 256;

/// A hub package a plugin was installed from, as a satellite names it in
/// [`PACKAGE_HEADER`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Package {
    /// The plugin's name.
    pub name: String,
    /// The package version (the manifest's, which may differ from the one
    /// the binary announces).
    pub version: String,
    /// SHA-256 (lower-case hex) of the signed manifest's canonical
    /// encoding.
    pub manifest_sha256: String,
}

impl Package {
    /// The header value: `NAME@VERSION manifest-sha256=DIGEST`.
    pub fn header_value(&self) -> String {
        format!(
            "{}@{} manifest-sha256={}",
            self.name, self.version, self.manifest_sha256
        )
    }

    /// Reads a header value; `None` when it is not one (what a satellite
    /// says is outside input: bounded and checked character by character).
    pub fn parse(value: &str) -> Option<Package> {
        if value.len() > MAX_PACKAGE_HEADER {
            return None;
        }
        let (label, digest) = value.split_once(' ')?;
        let digest = digest.strip_prefix("manifest-sha256=")?;
        let (name, version) = label.split_once('@')?;
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        let version_ok = !version.is_empty()
            && version.len() <= 64
            && version
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'));
        let digest_ok = digest.len() == 64
            && digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (name_ok && version_ok && digest_ok).then(|| Package {
            name: name.to_owned(),
            version: version.to_owned(),
            manifest_sha256: digest.to_owned(),
        })
    }

    /// `name@version`.
    pub fn label(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// The most stack patterns read from one [`STACKS_HEADER`].
const MAX_STACK_PATTERNS: usize = 64;

/// How many answers to one describe request are read at most; the rest
/// are dropped with the subscription (bounded work however many
/// satellites serve a target).
pub const MAX_ANSWERS: usize = 32;

/// The subjects a satellite serving `targets` (empty: every target)
/// answers describe requests for `plugin` on: one per target, or, serving
/// every target, the per-target wildcard and the plugin-wide subject of
/// older primaries (both granted only to identities allowed every target).
pub fn served_subjects(plugin: &str, targets: &[String]) -> Vec<String> {
    if targets.is_empty() || targets.iter().any(|t| t == "*") {
        vec![
            target_describe_subject(plugin, "*"),
            describe_subject(plugin),
        ]
    } else {
        targets
            .iter()
            .map(|t| target_describe_subject(plugin, t))
            .collect()
    }
}

/// Answers describe requests for every plugin of `hosts`, on the subjects
/// of `targets` (empty: every target), until `shutdown` resolves.
/// `satellite` names this satellite in each answer's [`SATELLITE_HEADER`].
pub async fn serve_describe(
    client: async_nats::Client,
    hosts: Vec<crate::plugin_host::PluginHost>,
    targets: Vec<String>,
    satellite: String,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), async_nats::SubscribeError> {
    let mut subscriptions = futures::stream::SelectAll::new();
    // A plugin is described once it has announced itself: a satellite
    // still retrying its first handshake leaves describe requests to the
    // satellites that can answer them.
    let mut pending = futures::stream::FuturesUnordered::new();
    for host in hosts {
        let client = client.clone();
        let targets = targets.clone();
        pending.push(async move {
            host.announced().await;
            let mut subs = Vec::new();
            for subject in served_subjects(host.name(), &targets) {
                subs.push(client.subscribe(subject).await?);
            }
            // The largest request this satellite takes for the plugin: what
            // NATS carries, never more than a frame.
            let accepts = message_limit(&client).min(MAX_FRAME_BYTES) as u64;
            let envelope = Envelope::new(MessageKind::Announce, host.announcement())
                .map(|e| e.with_max_message_bytes(Some(accepts)));
            let payload: Option<bytes::Bytes> = match envelope.and_then(|e| e.encode()) {
                Ok(bytes) => Some(bytes.into()),
                Err(e) => {
                    tracing::error!(plugin = %host.name(), error = %e, "cannot encode the announcement");
                    None
                }
            };
            // What each answer's headers say besides the satellite: who
            // may use a target, and the hub package the plugin came from.
            let held = host.held().clone();
            let package = host.package().map(Package::header_value);
            Ok::<_, async_nats::SubscribeError>(payload.map(|p| (subs, p, (held, package))))
        });
    }
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(SATELLITE_HEADER, satellite.as_str());
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            Some(ready) = pending.next(), if !pending.is_empty() => {
                if let Some((subs, payload, plugin)) = ready? {
                    for sub in subs {
                        let (payload, plugin) = (payload.clone(), plugin.clone());
                        subscriptions.push(sub.map(move |msg| (msg, payload.clone(), plugin.clone())));
                    }
                }
            }
            Some((msg, payload, (held, package))) = subscriptions.next(), if !subscriptions.is_empty() => {
                if let Some(reply) = msg.reply {
                    let mut headers = headers.clone();
                    if let Some(package) = &package {
                        headers.insert(PACKAGE_HEADER, package.as_str());
                    }
                    // `orrery.describe.<plugin>.<target>`: say who may use
                    // the target.
                    if let Some(stacks) = msg
                        .subject
                        .splitn(4, '.')
                        .nth(3)
                        .and_then(|target| held.stacks_of(target))
                    {
                        headers.insert(STACKS_HEADER, stacks.join(",").as_str());
                    }
                    if let Err(e) = client.publish_with_headers(reply, headers, payload).await {
                        tracing::warn!(error = %e, "cannot answer a describe request");
                    }
                }
            }
            () = &mut shutdown => return Ok(()),
        }
    }
}

/// Why a plugin could not be described.
#[derive(Debug, thiserror::Error)]
pub enum DescribeError {
    /// No answer: no satellite, a timeout, the transport.
    #[error(transparent)]
    Bus(#[from] BusError),
    /// Two satellites answered different schemas for the plugin: planning
    /// with either would be a race between them.
    #[error(
        "satellites disagree about the schemas of plugin `{plugin}`: {first} and {second} \
         answered different resource or target-configuration schemas; a plan cannot pick \
         one (stop or fix the satellite that runs the wrong plugin build)"
    )]
    Disagreement {
        /// The plugin.
        plugin: String,
        /// Who answered first: `satellite <id> (version V) for target T`.
        first: String,
        /// Who answered otherwise.
        second: String,
    },
}

/// One satellite's answer, and who gave it.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The announcement.
    pub announcement: Announcement,
    /// The satellite's [`SATELLITE_HEADER`], when it sent one (older
    /// satellites do not).
    pub satellite: Option<String>,
    /// The target asked for; `None` for the plugin-wide subject.
    pub target: Option<String>,
    /// The stack patterns the satellite's operator allows on the target
    /// ([`STACKS_HEADER`]); `None` when it allows every stack.
    pub stacks: Option<Vec<String>>,
    /// The hub package the satellite says it runs ([`PACKAGE_HEADER`]):
    /// `None` without the header, `Some(Err(value))` with one that does not
    /// read (at most [`MAX_PACKAGE_HEADER`] bytes of it kept).
    pub package: Option<Result<Package, String>>,
}

impl Answer {
    /// `satellite <id> (version V) for target T`, for errors.
    pub fn origin(&self) -> String {
        format!(
            "satellite `{}` (version {}) {}",
            self.satellite.as_deref().unwrap_or("unnamed"),
            self.announcement.version,
            match &self.target {
                Some(t) => format!("for target `{t}`"),
                None => "on the plugin-wide subject".to_owned(),
            }
        )
    }

    /// Whether `other` describes the same schemas: what planning reads and
    /// what decides which values are secret. The version may differ (a
    /// release that changed no schema).
    pub fn agrees_with(&self, other: &Answer) -> bool {
        same_schemas(&self.announcement, &other.announcement)
    }

    /// [`DescribeError::Disagreement`] unless `other` agrees with this one.
    pub fn check(&self, other: &Answer) -> Result<(), DescribeError> {
        if self.agrees_with(other) {
            return Ok(());
        }
        Err(DescribeError::Disagreement {
            plugin: self.announcement.name.clone(),
            first: self.origin(),
            second: other.origin(),
        })
    }
}

/// Whether two announcements describe the same schemas: what planning
/// reads and what decides which values are secret (name, namespace,
/// resource and target-configuration schemas). The version may differ (a
/// release that changed no schema).
pub fn same_schemas(a: &Announcement, b: &Announcement) -> bool {
    a.name == b.name
        && a.namespace == b.namespace
        && a.resources == b.resources
        && a.target_config == b.target_config
}

/// Asks the satellites serving `plugin` for `target` for its announcement:
/// on `orrery.describe.<plugin>.<target>`, and only when no satellite
/// listens there on the plugin-wide subject of older satellites. Waits at
/// most `timeout` for the first answer, then `gather` for other
/// satellites' (at most [`MAX_ANSWERS`]); answers that disagree are
/// [`DescribeError::Disagreement`].
pub async fn describe_target(
    client: &async_nats::Client,
    plugin: &str,
    target: &str,
    timeout: Duration,
    gather: Duration,
) -> Result<Answer, DescribeError> {
    let mut answers = describe_target_all(client, plugin, target, timeout, gather)
        .await?
        .into_iter();
    let first = answers.next().ok_or_else(|| {
        DescribeError::Bus(BusError::NoSatellite {
            plugin: plugin.to_owned(),
            target: target.to_owned(),
        })
    })?;
    for other in answers {
        first.check(&other)?;
    }
    Ok(first)
}

/// As [`describe_target`], but every answer gathered, the first first, and
/// none compared: for a caller that checks each answer itself (a primary
/// holding each against its signed hub package). Never empty.
pub async fn describe_target_all(
    client: &async_nats::Client,
    plugin: &str,
    target: &str,
    timeout: Duration,
    gather: Duration,
) -> Result<Vec<Answer>, DescribeError> {
    let subject = target_describe_subject(plugin, target);
    match gather_answers(client, plugin, &subject, Some(target), timeout, gather).await {
        Err(DescribeError::Bus(BusError::NoSatellite { .. })) => {
            gather_answers(
                client,
                plugin,
                &describe_subject(plugin),
                None,
                timeout,
                gather,
            )
            .await
        }
        other => other,
    }
    .map_err(|e| match e {
        DescribeError::Bus(BusError::NoSatellite { plugin, .. }) => {
            DescribeError::Bus(BusError::NoSatellite {
                plugin,
                target: target.to_owned(),
            })
        }
        e => e,
    })
}

/// Asks on `subject` and reads the answers (see [`describe_target`]).
async fn gather_answers(
    client: &async_nats::Client,
    plugin: &str,
    subject: &str,
    target: Option<&str>,
    timeout: Duration,
    gather: Duration,
) -> Result<Vec<Answer>, DescribeError> {
    let transport = |e: &dyn std::fmt::Display| BusError::Transport(e.to_string());
    let inbox = client.new_inbox();
    let mut answers = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| transport(&e))?;
    client
        .publish_with_reply(subject.to_owned(), inbox, bytes::Bytes::new())
        .await
        .map_err(|e| transport(&e))?;
    let decode = |message: async_nats::Message| -> Result<Answer, DescribeError> {
        let announcement: Announcement = Envelope::decode(&message.payload)
            .and_then(|envelope| envelope.body())
            .map_err(|e| transport(&format!("undecodable announcement of `{plugin}`: {e}")))?;
        let satellite = message
            .headers
            .as_ref()
            .and_then(|h| h.get(SATELLITE_HEADER))
            .map(|v| v.as_str().chars().take(128).collect());
        let stacks = message
            .headers
            .as_ref()
            .and_then(|h| h.get(STACKS_HEADER))
            .map(|v| {
                v.as_str()
                    .split(',')
                    .take(MAX_STACK_PATTERNS)
                    .map(|p| p.chars().take(200).collect())
                    .collect()
            });
        let package = message
            .headers
            .as_ref()
            .and_then(|h| h.get(PACKAGE_HEADER))
            .map(|v| {
                let v = v.as_str();
                Package::parse(v).ok_or_else(|| v.chars().take(MAX_PACKAGE_HEADER).collect())
            });
        let answer = Answer {
            announcement,
            satellite,
            target: target.map(str::to_owned),
            stacks,
            package,
        };
        if answer.announcement.name != plugin {
            return Err(transport(&format!(
                "{} answered for plugin `{}`, asked for `{plugin}`",
                answer.origin(),
                answer.announcement.name
            ))
            .into());
        }
        Ok(answer)
    };
    let no_satellite = || BusError::NoSatellite {
        plugin: plugin.to_owned(),
        target: target.unwrap_or("*").to_owned(),
    };
    let first = match tokio::time::timeout(timeout, answers.next()).await {
        Err(_) => {
            return Err(BusError::Timeout {
                plugin: plugin.to_owned(),
                timeout,
            }
            .into())
        }
        Ok(None) => return Err(transport(&"the connection closed").into()),
        Ok(Some(m)) if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) => {
            return Err(no_satellite().into())
        }
        Ok(Some(m)) => decode(m)?,
    };
    // Every satellite of the target answers; those that answer within
    // `gather` of the first are compared with it. One that is slower is
    // not compared: the window bounds a plan's wait, and the NATS
    // permissions, not this check, keep other sites out.
    let until = tokio::time::Instant::now() + gather;
    let mut all = vec![first];
    for _ in 1..MAX_ANSWERS {
        match tokio::time::timeout_at(until, answers.next()).await {
            Ok(Some(m)) if m.status.is_none() => all.push(decode(m)?),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::{served_subjects, Package};

    /// The package header reads back what a satellite writes, and nothing
    /// that is not one.
    #[test]
    fn package_headers_round_trip_and_refuse_anything_else() {
        let package = Package {
            name: "local".into(),
            version: "1.2.0+build.7".into(),
            manifest_sha256: "ab".repeat(32),
        };
        let value = package.header_value();
        assert_eq!(Package::parse(&value), Some(package));
        for bad in [
            String::new(),
            "local@1.0.0".into(),
            format!("local@1.0.0 sha256={}", "ab".repeat(32)),
            format!("local@1.0.0 manifest-sha256={}", "AB".repeat(32)),
            format!("local@1.0.0 manifest-sha256={}", "ab".repeat(31)),
            format!("Local@1.0.0 manifest-sha256={}", "ab".repeat(32)),
            format!("local@1 0 manifest-sha256={}", "ab".repeat(32)),
            format!("local@ manifest-sha256={}", "ab".repeat(32)),
            format!(
                "{}@1.0.0 manifest-sha256={}",
                "a".repeat(65),
                "ab".repeat(32)
            ),
        ] {
            assert_eq!(Package::parse(&bad), None, "{bad}");
        }
    }

    /// A satellite with targets answers for those only; one serving every
    /// target for all of them and on the plugin-wide subject.
    #[test]
    fn a_satellite_answers_describe_for_the_targets_it_serves() {
        assert_eq!(
            served_subjects("local", &["b".into(), "lab".into()]),
            ["orrery.describe.local.b", "orrery.describe.local.lab"]
        );
        for every in [vec![], vec!["*".to_owned()]] {
            assert_eq!(
                served_subjects("local", &every),
                ["orrery.describe.local.*", "orrery.describe.local"]
            );
        }
    }
}
