//! Satellite loss mid-operation: a create whose answer is lost (the
//! satellite running it died: `PluginUnavailable`, or no answer at all:
//! `DeadlineExceeded`) is retried with `verify_first`, and the executor
//! lists the type and matches the identifier before sending it again: a
//! create that landed is adopted, one that did not is sent again, and
//! nothing exists twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orrery_bus::bus::BusError;
use orrery_bus::transport::{SendFuture, Transport};
use orrery_plugin_sdk::{field, resource, Answer};
use orrery_primary::apply::{Executor, Options};
use orrery_primary::plan::{self, Mode, SecretHasher};
use orrery_primary::scheduler::{RateRegistry, RetryPolicy};
use orrery_primary::stack::{self, Catalog};
use orrery_primary::state::{SqliteStore, Store};
use orrery_schema::{
    Announcement, ErrorCode, ListResult, ListedResource, Operation, OperationStatus, ProgressEvent,
    PropertyMap, Request, Value,
};

const TYPE: &str = "Fake::Box";

/// What happens to a label's first create.
#[derive(Clone, Copy, PartialEq)]
enum Loss {
    /// It takes effect; its answer says the plugin became unavailable.
    LandedThenUnavailable,
    /// It never reaches the plugin; no answer before the deadline.
    DroppedThenTimeout,
}

/// A plugin behind a transport that loses answers, listing two per page.
#[derive(Default)]
struct Flaky {
    boxes: Mutex<BTreeMap<String, PropertyMap>>,
    losses: Mutex<HashMap<String, Loss>>,
    creates: Mutex<HashMap<String, usize>>,
    lists: AtomicUsize,
}

impl Flaky {
    fn answer(&self, request: &Request) -> Result<Answer, BusError> {
        match request {
            Request::Create(c) => {
                let Some(Value::String(name)) = c.properties.get("name") else {
                    panic!("no name");
                };
                *self
                    .creates
                    .lock()
                    .unwrap()
                    .entry(name.clone())
                    .or_default() += 1;
                let loss = self.losses.lock().unwrap().remove(name);
                if loss == Some(Loss::DroppedThenTimeout) {
                    return Err(BusError::Timeout {
                        plugin: "fake".into(),
                        timeout: Duration::from_millis(1),
                    });
                }
                let mut boxes = self.boxes.lock().unwrap();
                if boxes.contains_key(name) {
                    return Ok(Answer::Progress(ProgressEvent::failure(
                        Operation::Create,
                        &c.request_id,
                        TYPE,
                        ErrorCode::AlreadyExists,
                        "exists",
                    )));
                }
                boxes.insert(name.clone(), c.properties.clone());
                Ok(Answer::Progress(match loss {
                    Some(_) => ProgressEvent::failure(
                        Operation::Create,
                        &c.request_id,
                        TYPE,
                        ErrorCode::PluginUnavailable,
                        "the satellite running it died",
                    ),
                    None => ProgressEvent::success(
                        Operation::Create,
                        &c.request_id,
                        TYPE,
                        name.clone(),
                        c.properties.clone(),
                    ),
                }))
            }
            Request::List(l) => {
                self.lists.fetch_add(1, Ordering::Relaxed);
                let boxes = self.boxes.lock().unwrap();
                let start: usize = l.page_token.as_deref().map_or(0, |t| t.parse().unwrap());
                let all: Vec<_> = boxes.iter().collect();
                let end = (start + 2).min(all.len());
                Ok(Answer::List(ListResult {
                    request_id: l.request_id.clone(),
                    resource_type: TYPE.into(),
                    status: OperationStatus::Success,
                    resources: all[start..end]
                        .iter()
                        .map(|(n, p)| ListedResource {
                            native_id: (*n).clone(),
                            properties: (*p).clone(),
                        })
                        .collect(),
                    next_page_token: (end < all.len()).then(|| end.to_string()),
                    ..Default::default()
                }))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

impl Transport for Flaky {
    fn send<'a>(
        &'a self,
        _plugin: &'a str,
        request: &'a Request,
        _timeout: Duration,
    ) -> SendFuture<'a> {
        Box::pin(async move { self.answer(request) })
    }
}

fn catalog() -> Catalog {
    let mut catalog = Catalog::new();
    catalog.insert(Announcement {
        name: "fake".into(),
        version: "1.0.0".into(),
        namespace: "Fake".into(),
        resources: vec![resource(TYPE)
            .identifier(["name"])
            .field(field::string("name").required().create_only())
            .field(field::any("size"))
            .build()],
        ..Default::default()
    });
    catalog
}

#[tokio::test]
async fn lost_create_answers_are_verified_before_sending_again() {
    let dir = tempfile::tempdir().unwrap();
    let store: Store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let mut doc =
        String::from("stack: loss\ntargets:\n  - name: t\n    plugin: fake\nresources:\n");
    for name in ["a", "b", "c", "d", "e"] {
        doc.push_str(&format!(
            "  - label: {name}\n    type: {TYPE}\n    target: t\n    properties: {{ name: box-{name}, size: 1 }}\n"
        ));
    }
    let stack = stack::parse("loss.yaml", &doc, ".").unwrap();
    let catalog = catalog();
    let graph = stack::validate(&stack, &catalog).unwrap();
    let hasher = SecretHasher::new(store.secret_key().unwrap());
    let plan = plan::plan(&stack, &graph, &catalog, &[], Mode::Reconcile, &hasher);

    let flaky = Arc::new(Flaky::default());
    flaky.losses.lock().unwrap().extend([
        ("box-b".to_owned(), Loss::LandedThenUnavailable),
        ("box-d".to_owned(), Loss::DroppedThenTimeout),
    ]);
    let options = Options {
        retry: RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(1),
            max: Duration::from_millis(5),
            throttle_factor: 1,
            jitter: 0.0,
        },
        ..Options::default()
    };
    let executor = Executor::new(
        flaky.clone(),
        store.clone(),
        catalog,
        hasher,
        options,
        RateRegistry::local(),
    );
    let report = executor
        .run("c1", "apply", "loss", Some((&stack, &graph)), &plan, &[])
        .await
        .unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.succeeded, 5);
    assert_eq!(report.retries, 2, "{report:?}");

    let creates = flaky.creates.lock().unwrap().clone();
    assert_eq!(creates["box-b"], 1, "landed: adopted, never sent again");
    assert_eq!(
        creates["box-d"], 2,
        "never landed: sent again after the check"
    );
    assert!(creates.values().all(|n| *n <= 2));
    assert!(
        flaky.lists.load(Ordering::Relaxed) >= 2,
        "each verified retry listed (every page)"
    );
    let boxes = flaky.boxes.lock().unwrap();
    assert_eq!(
        boxes.keys().cloned().collect::<Vec<_>>(),
        ["box-a", "box-b", "box-c", "box-d", "box-e"],
        "every box exists exactly once"
    );
    let stored = store.resources(Some("loss")).unwrap();
    assert_eq!(stored.len(), 5);
    let b = stored.iter().find(|r| r.label == "b").unwrap();
    assert_eq!(b.native_id, "box-b");
    assert_eq!(b.properties.get("size"), Some(&Value::from(1u64)));
    let command = store.command(Some("c1")).unwrap().unwrap();
    assert_eq!(command.status.as_str(), "completed");
    let op_b = command.operations.iter().find(|o| o.label == "b").unwrap();
    assert_eq!((op_b.status.as_str(), op_b.attempts), ("succeeded", 2));
}
