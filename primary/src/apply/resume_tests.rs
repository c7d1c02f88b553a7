//! The create lookups' edge cases the chaos soak found.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use orrery_bus::bus::BusError;
use orrery_bus::transport::{SendFuture, Transport};
use orrery_plugin_sdk::Answer;
use orrery_schema::{
    CreateRequest, ErrorCode, Operation, ProgressEvent, PropertyMap, Request, Target, Value,
};

use super::{carried_request_ids, send_create, unsure_creates, Lookup};
use crate::state::{CommandRecord, CommandStatus, OpStatus, OperationRecord};

/// Answers every create `AlreadyExists`; every list times out.
struct ExistsButUnlistable;

impl Transport for ExistsButUnlistable {
    fn send<'a>(
        &'a self,
        plugin: &'a str,
        request: &'a Request,
        timeout: Duration,
    ) -> SendFuture<'a> {
        let answer = match request {
            Request::Create(c) => Ok(Answer::Progress(ProgressEvent::failure(
                Operation::Create,
                c.request_id.clone(),
                c.resource_type.clone(),
                ErrorCode::AlreadyExists,
                "exists",
            ))),
            _ => Err(BusError::Timeout {
                plugin: plugin.to_owned(),
                timeout,
            }),
        };
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn an_already_exists_whose_lookup_fails_is_retried_not_final() {
    let request = Request::Create(CreateRequest {
        request_id: "r1".into(),
        resource_type: "T".into(),
        ..Default::default()
    });
    let lookup = Lookup {
        plugin: "p".into(),
        resource_type: "T".into(),
        target: Target::default(),
        identity: PropertyMap::from([("name".to_owned(), Value::from("a"))]),
        claimed: Arc::new(HashSet::new()),
    };
    let answer = send_create(
        Arc::new(ExistsButUnlistable),
        request,
        Some(lookup),
        false,
        Duration::from_millis(10),
    )
    .await;
    let Ok(Answer::Progress(event)) = answer else {
        panic!("{answer:?}")
    };
    let code = event.error_code.clone().unwrap();
    assert_eq!(code, ErrorCode::DeadlineExceeded, "{event:?}");
    assert!(code.is_retryable() && code.is_ambiguous(), "{code:?}");
}

fn op(label: &str, operation: &str, status: OpStatus, code: Option<&str>) -> OperationRecord {
    OperationRecord {
        label: label.into(),
        operation: operation.into(),
        request_id: format!("req-{label}"),
        status,
        error_code: code.map(str::to_owned),
        ..Default::default()
    }
}

#[test]
fn creates_a_command_left_unsure_are_those_failed_with_an_unknown_outcome() {
    let command = CommandRecord {
        id: "c".into(),
        stack: "s".into(),
        kind: "apply".into(),
        status: CommandStatus::Failed,
        started_ms: 0,
        finished_ms: Some(1),
        principal: None,
        operations: vec![
            op("exists", "create", OpStatus::Failed, Some("AlreadyExists")),
            op("lost", "create", OpStatus::Failed, Some("DeadlineExceeded")),
            op("denied", "create", OpStatus::Failed, Some("AccessDenied")),
            op("made", "create", OpStatus::Succeeded, None),
            op(
                "changed",
                "update",
                OpStatus::Failed,
                Some("DeadlineExceeded"),
            ),
        ],
    };
    let unsure: std::collections::BTreeMap<_, _> = unsure_creates(&command).into_iter().collect();
    let expected = [("exists", "req-exists"), ("lost", "req-lost")];
    assert_eq!(
        unsure,
        expected.map(|(l, r)| (l.to_owned(), r.to_owned())).into()
    );
    // The next command sends those creates again under their ids.
    assert_eq!(
        carried_request_ids(None, Some(&command)),
        unsure.into_iter().collect()
    );
}

#[test]
fn a_command_that_goes_on_sends_its_unfinished_creates_under_their_ids() {
    let command = CommandRecord {
        id: "c".into(),
        stack: "s".into(),
        kind: "apply".into(),
        status: CommandStatus::Running,
        started_ms: 0,
        finished_ms: None,
        principal: None,
        operations: vec![
            op("sent", "create", OpStatus::Running, None),
            op("gone", "create", OpStatus::Failed, Some("NotFound")),
            op("made", "create", OpStatus::Succeeded, None),
            op("changed", "update", OpStatus::Running, None),
        ],
    };
    let carried: std::collections::BTreeMap<_, _> = carried_request_ids(Some(&command), None)
        .into_iter()
        .collect();
    let expected = [("gone", "req-gone"), ("sent", "req-sent")];
    assert_eq!(
        carried,
        expected.map(|(l, r)| (l.to_owned(), r.to_owned())).into()
    );
}
