//! Receipts: how a primary steers work away from a satellite that stopped
//! taking it.
//!
//! NATS hands each request of a queue group to one member at random, and
//! keeps doing so while a member is hung (SIGSTOP, a stalled host) or cut
//! off, until the server's own pings give up on it minutes later. Nothing
//! on the caller's side can pick the member, so the member says when it
//! took a request:
//!
//! - The caller sets `Orrery-Receipt-By` (Unix epoch milliseconds) on a
//!   request. A satellite that takes it by then publishes a receipt (a
//!   headers-only message, `Orrery-Receipt: <its service instance id>`) to
//!   the reply subject before working on it; one that reads it later drops
//!   it unworked, since its caller has sent it again elsewhere by then.
//! - A request without a receipt by its time (plus [`RECEIPT_GRACE`] for
//!   the message's way back) never reached a plugin: the caller sends it
//!   again at once, under the same request id, and NATS picks a member
//!   again.
//! - A request with a receipt is with that satellite. Every satellite
//!   answers the service API's `$SRV.PING`, and the caller pings them all
//!   every [`PING_EVERY`]: a request whose satellite has not answered for
//!   [`SILENT_AFTER`] fails as `PluginUnavailable` (outcome unknown), and
//!   the run's own rule for unknown outcomes decides what happens next.
//!
//! Receipts are asked for only while every satellite seen says it gives
//! them (service metadata `receipts = 1`): an older satellite answers with
//! its answer alone. The receipt is the request's second reply, so a
//! satellite's NATS identity needs `allow_responses` max 2. Clocks of
//! primaries and satellites are taken to agree within [`RECEIPT_GRACE`]
//! (the request's `deadline_ms` already assumes they agree).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use orrery_plugin_sdk::client::deadline_ms;
use serde::Deserialize;

use crate::subjects::SERVICE_NAME;

/// The request header: the latest time (Unix epoch, ms) a satellite may
/// take the request.
pub const RECEIPT_BY: &str = "Orrery-Receipt-By";
/// The receipt's header: the service instance id of the satellite that
/// took the request.
pub const RECEIPT: &str = "Orrery-Receipt";
/// The service metadata key saying a satellite gives receipts.
pub const METADATA: &str = "receipts";

/// How long a satellite has to take a request. A live one takes it within
/// milliseconds (it pulls a request only with a free permit); while one of
/// N is hung, about 1/N of new requests wait this long (and the grace)
/// before going again, so it is short.
pub const RECEIPT_WINDOW: Duration = Duration::from_millis(800);
/// Added to the window for the receipt's way back (and clocks' skew).
pub const RECEIPT_GRACE: Duration = Duration::from_millis(400);
/// How often the caller pings every satellite.
pub const PING_EVERY: Duration = Duration::from_millis(500);
/// A satellite not heard from for this long is silent: the requests it
/// took fail.
pub const SILENT_AFTER: Duration = Duration::from_millis(2500);
/// A satellite not heard from for this long is forgotten: it no longer
/// decides whether receipts are asked for.
const FORGET_AFTER: Duration = Duration::from_secs(30);

/// The value of [`RECEIPT_BY`] for a request sent now: in the clock and
/// unit of the request's own `deadline_ms`.
pub fn receipt_by() -> u64 {
    deadline_ms(RECEIPT_WINDOW)
}

/// The satellite's side: whether to work on `request`. A request asking
/// for a receipt in time gets one first; one read after its time is
/// dropped (`false`). A request asking for none, or with an unreadable
/// time, is worked on as before receipts existed.
pub async fn confirm(
    client: &async_nats::Client,
    request: &async_nats::Message,
    instance: &str,
) -> bool {
    let by = request
        .headers
        .as_ref()
        .and_then(|h| h.get(RECEIPT_BY))
        .and_then(|v| v.as_str().parse::<u64>().ok());
    let (Some(by), Some(reply)) = (by, request.reply.as_ref()) else {
        return true;
    };
    let now = deadline_ms(Duration::ZERO);
    if now > by {
        tracing::debug!(
            late_ms = now - by,
            "dropping a request read after its receipt time: its sender has sent it again"
        );
        return false;
    }
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(RECEIPT, instance);
    if let Err(e) = client
        .publish_with_headers(reply.clone(), headers, bytes::Bytes::new())
        .await
    {
        // The caller will send it again; working on it too could do it twice.
        tracing::warn!(error = %e, "cannot send a receipt; dropping the request");
        return false;
    }
    true
}

/// What the caller has heard of satellites: a plain record, fed the
/// service pings' answers with the time they came.
#[derive(Debug, Default)]
pub struct Sightings {
    seen: HashMap<String, Seen>,
}

#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    receipts: bool,
    silent: bool,
    serves: Serves,
    /// Took no request sent to it directly in time: not picked before this.
    shunned_until: Option<Instant>,
    /// Its direct subjects had no subscriber (its NATS identity may not
    /// subscribe to them): never picked again.
    undirected: bool,
}

/// What a satellite says it serves, from its service metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Serves {
    /// Plugin names (`plugins` metadata: `name@version,…`).
    pub plugins: Vec<String>,
    /// Targets (`targets` metadata), `*` for every target.
    pub targets: Vec<String>,
}

impl Serves {
    /// Reads the service metadata.
    pub fn from_metadata(metadata: &HashMap<String, String>) -> Serves {
        let list = |key: &str| -> Vec<String> {
            metadata
                .get(key)
                .map(|v| {
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        Serves {
            plugins: list("plugins")
                .into_iter()
                .map(|p| p.split('@').next().unwrap_or_default().to_owned())
                .collect(),
            targets: list("targets"),
        }
    }

    fn serves(&self, plugin: &str, target: &str) -> bool {
        self.plugins.iter().any(|p| p == plugin)
            && self.targets.iter().any(|t| t == target || t == "*")
    }
}

/// How long a satellite that took no request sent to it directly is not
/// picked again.
pub const SHUN_FOR: Duration = Duration::from_secs(5);

impl Sightings {
    /// Satellite `instance` answered a ping at `now`.
    pub fn saw(&mut self, instance: &str, receipts: bool, serves: Serves, now: Instant) {
        let seen = self.seen.entry(instance.to_owned()).or_insert(Seen {
            at: now,
            receipts,
            silent: false,
            serves: Serves::default(),
            shunned_until: None,
            undirected: false,
        });
        seen.at = now;
        seen.receipts = receipts;
        seen.silent = false;
        seen.serves = serves;
    }

    /// The live satellite to send a request for `plugin` on `target` to
    /// directly, the `turn`-th of those that qualify (a caller counts its
    /// turns, spreading requests over them); `None` sends it to the queue
    /// group.
    pub fn pick(&self, plugin: &str, target: &str, turn: usize, now: Instant) -> Option<String> {
        let mut live: Vec<&String> = self
            .seen
            .iter()
            .filter(|(_, s)| {
                s.receipts
                    && !s.undirected
                    && now.saturating_duration_since(s.at) < SILENT_AFTER
                    && s.shunned_until.is_none_or(|until| now >= until)
                    && s.serves.serves(plugin, target)
            })
            .map(|(id, _)| id)
            .collect();
        live.sort();
        (!live.is_empty()).then(|| live[turn % live.len()].clone())
    }

    /// `instance` took no request sent to it directly in time.
    pub fn shun(&mut self, instance: &str, now: Instant) {
        if let Some(s) = self.seen.get_mut(instance) {
            s.shunned_until = Some(now + SHUN_FOR);
        }
    }

    /// Nobody subscribes to `instance`'s direct subjects.
    pub fn undirected(&mut self, instance: &str) {
        if let Some(s) = self.seen.get_mut(instance) {
            s.undirected = true;
        }
    }

    /// Whether requests ask for receipts: some satellite was heard from
    /// lately and every one heard from gives them.
    pub fn ask(&self, now: Instant) -> bool {
        let mut recent = self
            .seen
            .values()
            .filter(|s| now.saturating_duration_since(s.at) < FORGET_AFTER)
            .peekable();
        recent.peek().is_some() && recent.all(|s| s.receipts)
    }

    /// Whether `instance` has gone silent (or was never heard from).
    pub fn is_silent(&self, instance: &str, now: Instant) -> bool {
        self.seen
            .get(instance)
            .is_none_or(|s| now.saturating_duration_since(s.at) >= SILENT_AFTER)
    }

    /// Marks the satellites silent since the last call, forgets long-gone
    /// ones, and says whether any went silent now.
    pub fn tick(&mut self, now: Instant) -> bool {
        self.seen
            .retain(|_, s| now.saturating_duration_since(s.at) < FORGET_AFTER);
        let mut newly = false;
        for s in self.seen.values_mut() {
            if !s.silent && now.saturating_duration_since(s.at) >= SILENT_AFTER {
                s.silent = true;
                newly = true;
            }
        }
        newly
    }
}

/// The caller's view of the fleet, shared by its requests and kept by one
/// task pinging the satellites.
#[derive(Clone)]
pub struct Watch {
    sightings: Arc<Mutex<Sightings>>,
    /// Bumped whenever a satellite goes silent.
    silenced: tokio::sync::watch::Receiver<u64>,
    /// Requests addressed so far, to spread them over the satellites.
    turns: Arc<std::sync::atomic::AtomicUsize>,
}

#[derive(Deserialize)]
struct Pong {
    id: String,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

impl Watch {
    /// Starts watching through `client`; outside a runtime nothing is
    /// watched and receipts are never asked for.
    pub fn start(client: &async_nats::Client) -> Watch {
        let sightings: Arc<Mutex<Sightings>> = Arc::default();
        let (tx, silenced) = tokio::sync::watch::channel(0u64);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(keep(client.clone(), sightings.clone(), tx));
        }
        Watch {
            sightings,
            silenced,
            turns: Arc::default(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Sightings) -> T) -> T {
        f(&mut self.sightings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The satellite to address a request to directly, if any.
    pub fn pick(&self, plugin: &str, target: &str) -> Option<String> {
        let turn = self
            .turns
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.with(|s| s.pick(plugin, target, turn, Instant::now()))
    }

    /// `instance` took no request sent to it directly in time.
    pub fn shun(&self, instance: &str) {
        self.with(|s| s.shun(instance, Instant::now()));
    }

    /// Nobody subscribes to `instance`'s direct subjects.
    pub fn undirected(&self, instance: &str) {
        self.with(|s| s.undirected(instance));
    }

    /// Whether a request sent now asks for a receipt.
    pub fn ask(&self) -> bool {
        self.with(|s| s.ask(Instant::now()))
    }

    /// Whether `instance` is silent now.
    pub fn is_silent(&self, instance: &str) -> bool {
        self.with(|s| s.is_silent(instance, Instant::now()))
    }

    /// Resolves once `instance` is silent.
    pub async fn silent(&self, instance: &str) {
        let mut silenced = self.silenced.clone();
        loop {
            if self.is_silent(instance) {
                return;
            }
            if silenced.changed().await.is_err() {
                // Nothing watches any more: never silent.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Pings every satellite each [`PING_EVERY`] and records who answers,
/// until the last [`Watch`] is gone.
async fn keep(
    client: async_nats::Client,
    sightings: Arc<Mutex<Sightings>>,
    silenced: tokio::sync::watch::Sender<u64>,
) {
    let inbox = client.new_inbox();
    let Ok(mut pongs) = client.subscribe(inbox.clone()).await else {
        return;
    };
    let subject = format!("$SRV.PING.{SERVICE_NAME}");
    let mut ticks = tokio::time::interval(PING_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !silenced.is_closed() {
        tokio::select! {
            _ = ticks.tick() => {
                let newly = sightings
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .tick(Instant::now());
                if newly {
                    silenced.send_modify(|n| *n += 1);
                }
                // A failed publish (the connection is down) is a missed
                // round: satellites fall silent after a few, as they should.
                let _ = client
                    .publish_with_reply(subject.clone(), inbox.clone(), bytes::Bytes::new())
                    .await;
            }
            pong = pongs.next() => {
                let Some(pong) = pong else { return };
                let Ok(pong) = serde_json::from_slice::<Pong>(&pong.payload) else {
                    continue;
                };
                let receipts = pong.metadata.get(METADATA).is_some_and(|v| v == "1");
                let serves = Serves::from_metadata(&pong.metadata);
                sightings
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .saw(&pong.id, receipts, serves, Instant::now());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_are_asked_for_only_while_every_satellite_gives_them() {
        let t0 = Instant::now();
        let mut s = Sightings::default();
        assert!(!s.ask(t0), "nobody seen");
        s.saw("a", true, Serves::default(), t0);
        assert!(s.ask(t0));
        s.saw("b", false, Serves::default(), t0);
        assert!(
            !s.ask(t0),
            "an older satellite answers with its answer alone"
        );
        // The older one long gone: forgotten.
        s.saw("a", true, Serves::default(), t0 + FORGET_AFTER);
        s.tick(t0 + FORGET_AFTER);
        assert!(s.ask(t0 + FORGET_AFTER));
    }

    #[test]
    fn a_satellite_unheard_for_silent_after_is_silent_once() {
        let t0 = Instant::now();
        let mut s = Sightings::default();
        assert!(s.is_silent("a", t0), "never heard of");
        s.saw("a", true, Serves::default(), t0);
        assert!(!s.is_silent("a", t0 + SILENT_AFTER / 2));
        assert!(!s.tick(t0 + SILENT_AFTER / 2));
        assert!(s.is_silent("a", t0 + SILENT_AFTER));
        assert!(s.tick(t0 + SILENT_AFTER), "newly silent");
        assert!(!s.tick(t0 + SILENT_AFTER * 2), "told once");
        s.saw("a", true, Serves::default(), t0 + SILENT_AFTER * 2);
        assert!(!s.is_silent("a", t0 + SILENT_AFTER * 2), "back");
    }

    #[test]
    fn requests_go_directly_to_live_satellites_serving_the_target_in_turn() {
        let t0 = Instant::now();
        let meta = |plugins: &str, targets: &str| {
            Serves::from_metadata(&HashMap::from([
                ("plugins".to_owned(), plugins.to_owned()),
                ("targets".to_owned(), targets.to_owned()),
            ]))
        };
        let mut s = Sightings::default();
        s.saw(
            "a",
            true,
            meta("testbed@0.1.0,local@0.1.0", "lab,site-a"),
            t0,
        );
        s.saw("b", true, meta("testbed@0.1.0", "*"), t0);
        s.saw("c", true, meta("local@0.1.0", "lab"), t0);
        s.saw("d", false, meta("testbed@0.1.0", "lab"), t0);
        let picks: Vec<_> = (0..4)
            .map(|turn| s.pick("testbed", "lab", turn, t0))
            .collect();
        assert_eq!(picks, ["a", "b", "a", "b"].map(|x| Some(x.to_owned())));
        assert_eq!(s.pick("testbed", "site-z", 0, t0).as_deref(), Some("b"));
        assert_eq!(s.pick("local", "lab", 1, t0).as_deref(), Some("c"));
        s.shun("a", t0);
        assert_eq!(s.pick("testbed", "lab", 0, t0).as_deref(), Some("b"));
        let t1 = t0 + SHUN_FOR;
        s.saw(
            "a",
            true,
            meta("testbed@0.1.0,local@0.1.0", "lab,site-a"),
            t1,
        );
        s.saw("b", true, meta("testbed@0.1.0", "*"), t1);
        assert_eq!(
            s.pick("testbed", "lab", 0, t1).as_deref(),
            Some("a"),
            "shunned no more"
        );
        s.undirected("b");
        assert_eq!(
            s.pick("testbed", "site-z", 0, t1),
            None,
            "to the queue group"
        );
        // Silent: not picked.
        assert_eq!(s.pick("testbed", "lab", 0, t1 + SILENT_AFTER), None);
    }
}
