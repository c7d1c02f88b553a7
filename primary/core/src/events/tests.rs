use super::*;

fn op(label: &str, status: OpEvent) -> EventBody {
    EventBody::Operation(OperationEvent {
        label: label.into(),
        operation: "create".into(),
        resource_type: "T".into(),
        plugin: "p".into(),
        target: "t".into(),
        status,
        attempt: 1,
        code: None,
        message: None,
        elapsed_ms: None,
    })
}

#[test]
fn an_event_is_one_flat_json_object_tagged_by_type() {
    let event = CommandEvent {
        schema: SCHEMA_VERSION,
        command_id: "c".into(),
        run: "r".into(),
        seq: 3,
        at_ms: 10,
        body: op("a", OpEvent::WaitingForRateLimit),
    };
    let json = serde_norway::to_string(&event).unwrap();
    assert!(json.contains("type: operation"), "{json}");
    assert!(json.contains("status: waiting_for_rate_limit"), "{json}");
    assert!(!json.contains("code"), "absent fields are left out: {json}");
    let back: CommandEvent = orrery_stack::yaml::read(&json, &Default::default()).unwrap();
    assert_eq!(back, event);
}

#[test]
fn the_tally_follows_each_operation_through_its_transitions() {
    let mut tally = Tally::default();
    let planned = EventBody::Planned(PlannedEvent {
        operations: 3,
        ..Default::default()
    });
    tally.add(&planned, None);
    assert_eq!(tally.remaining(), 3);
    let steps = [
        ("a", None, OpEvent::WaitingForRateLimit),
        ("a", Some(OpEvent::WaitingForRateLimit), OpEvent::Started),
        ("b", None, OpEvent::Started),
        ("b", Some(OpEvent::Started), OpEvent::InProgress),
        ("a", Some(OpEvent::Started), OpEvent::Retrying),
        ("a", Some(OpEvent::Retrying), OpEvent::Attempt),
    ];
    for (label, before, status) in steps {
        tally.add(&op(label, status), before);
    }
    assert_eq!((tally.in_flight, tally.waiting), (2, 0), "{tally:?}");
    tally.add(&op("a", OpEvent::Succeeded), Some(OpEvent::Attempt));
    tally.add(&op("b", OpEvent::Failed), Some(OpEvent::InProgress));
    tally.add(&op("c", OpEvent::DependencyFailed), None);
    assert_eq!(
        (
            tally.succeeded,
            tally.failed,
            tally.in_flight,
            tally.remaining()
        ),
        (1, 2, 0, 0),
        "{tally:?}"
    );
    assert!(!tally.finished);
    tally.add(&EventBody::Finished(FinishedEvent::default()), None);
    assert!(tally.finished);
}

#[test]
fn only_the_four_ends_are_terminal() {
    let terminal: Vec<_> = [
        OpEvent::Started,
        OpEvent::Attempt,
        OpEvent::WaitingForRateLimit,
        OpEvent::InProgress,
        OpEvent::Retrying,
        OpEvent::Succeeded,
        OpEvent::Failed,
        OpEvent::DependencyFailed,
        OpEvent::Canceled,
    ]
    .into_iter()
    .filter(|s| s.is_terminal())
    .map(OpEvent::name)
    .collect();
    assert_eq!(
        terminal,
        ["succeeded", "failed", "dependency_failed", "canceled"]
    );
}

#[test]
fn a_record_tells_each_operations_last_transition_then_the_end() {
    use crate::record::{CommandRecord, CommandStatus, OpStatus, OperationRecord};
    let op = |label: &str, status| OperationRecord {
        label: label.into(),
        operation: "create".into(),
        status,
        attempts: 1,
        ..Default::default()
    };
    let mut record = CommandRecord {
        id: "c".into(),
        stack: "s".into(),
        kind: "apply".into(),
        status: CommandStatus::Running,
        started_ms: 1_000,
        finished_ms: None,
        principal: None,
        operations: vec![op("a", OpStatus::Succeeded), op("b", OpStatus::InProgress)],
    };
    let running = from_record(&record);
    assert_eq!(running.len(), 2, "no end while running: {running:?}");
    assert!(running.iter().all(|e| e.run == RECORD_RUN));
    record.status = CommandStatus::Failed;
    record.finished_ms = Some(3_500);
    record.operations[1].status = OpStatus::Failed;
    let ended = from_record(&record);
    assert_eq!(ended.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    match &ended[2].body {
        EventBody::Finished(f) => {
            assert_eq!((f.status.as_str(), f.succeeded, f.failed), ("failed", 1, 1));
            assert_eq!(f.elapsed_ms, 2_500);
        }
        other => panic!("not the end: {other:?}"),
    }
}
