//! Answers within the size the host accepts: list pages cut to fit the
//! request's `max_message_bytes`, and an answer that cannot fit answered
//! with `MessageTooLarge` instead of being dropped.

use std::time::Duration;

use orrery_plugin_sdk::client::{deadline_ms, decode_answer};
use orrery_plugin_sdk::schema::{
    CreateRequest, DeleteRequest, Envelope, ErrorCode, ListRequest, ListedResource,
    OperationStatus, PropertyMap, ReadRequest, Request, UpdateRequest, Value, MAX_FRAME_BYTES,
};
use orrery_plugin_sdk::{
    done, field, harness, paginate, resource, Answer, ListPage, OpResult, PluginError, PluginInfo,
    ResourcePlugin,
};

/// Resources listed by the bulky plugin, and the bytes of each.
const RESOURCES: usize = 120;
const RESOURCE_BYTES: usize = 12 * 1024;

/// Lists [`RESOURCES`] resources of [`RESOURCE_BYTES`] each, and creates
/// resources whose answer carries `size` bytes.
struct Bulky;

impl ResourcePlugin for Bulky {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "bulky".into(),
            version: "0.1.0".into(),
            namespace: "Test".into(),
        }
    }
    fn resources(&self) -> Vec<orrery_plugin_sdk::schema::ResourceSchema> {
        vec![resource("Test::Bulky")
            .field(field::integer("size"))
            .build()]
    }
    async fn create(&self, r: CreateRequest) -> OpResult {
        let size = r
            .properties
            .get("size")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let blob = "b".repeat(usize::try_from(size).unwrap_or(0));
        done(
            "one",
            PropertyMap::from([("blob".to_owned(), Value::from(blob))]),
        )
    }
    async fn read(&self, _: ReadRequest) -> OpResult {
        Err(PluginError::not_found("nothing is stored"))
    }
    async fn update(&self, _: UpdateRequest) -> OpResult {
        Err(PluginError::not_found("nothing is stored"))
    }
    async fn delete(&self, _: DeleteRequest) -> OpResult {
        Err(PluginError::not_found("nothing is stored"))
    }
    async fn list(&self, r: ListRequest) -> Result<ListPage, PluginError> {
        let all = (0..RESOURCES)
            .map(|i| ListedResource {
                native_id: format!("{i:04}"),
                properties: PropertyMap::from([(
                    "blob".to_owned(),
                    Value::from("x".repeat(RESOURCE_BYTES)),
                )]),
            })
            .collect();
        let (resources, next_page_token) =
            paginate(all, |r| &r.native_id, r.page_size, r.page_token.as_deref());
        Ok(ListPage {
            resources,
            next_page_token,
        })
    }
}

const TIMEOUT: Duration = Duration::from_secs(10);

fn envelope(request: &Request, max: Option<u64>) -> Envelope {
    request
        .to_envelope()
        .expect("encode")
        .with_deadline_ms(Some(deadline_ms(TIMEOUT)))
        .with_max_message_bytes(max)
}

#[tokio::test]
async fn list_pages_are_cut_to_fit_the_answer_the_host_accepts() {
    let client = harness::start(Bulky).await.expect("start");
    let max = 256 * 1024;
    let mut token = None;
    let mut listed = Vec::new();
    let mut pages = 0;
    loop {
        let request = Request::List(ListRequest {
            request_id: "list".into(),
            resource_type: "Test::Bulky".into(),
            page_size: 0,
            page_token: token.take(),
            ..Default::default()
        });
        let answer = client
            .call(envelope(&request, Some(max)), TIMEOUT)
            .await
            .expect("answered");
        let len = answer.encode().expect("encode").len();
        assert!(len <= max as usize, "a page of {len} bytes exceeds {max}");
        let Ok(Answer::List(page)) = decode_answer(&answer) else {
            panic!("not a list page: {answer:?}");
        };
        assert_eq!(page.status, OperationStatus::Success, "{:?}", page.message);
        pages += 1;
        listed.extend(page.resources.into_iter().map(|r| r.native_id));
        match page.next_page_token {
            Some(next) => token = Some(next),
            None => break,
        }
        assert!(pages < RESOURCES, "pagination does not end");
    }
    let expected: Vec<String> = (0..RESOURCES).map(|i| format!("{i:04}")).collect();
    assert_eq!(listed, expected, "every resource exactly once, in order");
    // 120 × 12 KiB is about 1.4 MiB: it cannot fit fewer than 6 pages.
    assert!(pages >= 6, "{pages} pages");
}

async fn create_answer(size: usize, max: Option<u64>) -> orrery_plugin_sdk::schema::ProgressEvent {
    let client = harness::start(Bulky).await.expect("start");
    let request = Request::Create(CreateRequest {
        request_id: "big".into(),
        resource_type: "Test::Bulky".into(),
        properties: PropertyMap::from([("size".to_owned(), Value::from(size as i64))]),
        ..Default::default()
    });
    // The call returns before its deadline: the answer is not dropped.
    let answer = client
        .call(envelope(&request, max), TIMEOUT)
        .await
        .expect("answered, not dropped");
    match decode_answer(&answer) {
        Ok(Answer::Progress(p)) => p,
        other => panic!("not a progress event: {other:?}"),
    }
}

#[tokio::test]
async fn an_answer_over_the_hosts_limit_fails_with_both_sizes() {
    let event = create_answer(300 * 1024, Some(256 * 1024)).await;
    assert_eq!(event.status, OperationStatus::Failure);
    assert_eq!(event.error_code, Some(ErrorCode::MessageTooLarge));
    let message = event.message.unwrap_or_default();
    assert!(message.contains("262144"), "{message}");
    assert!(
        message.contains("answer of 307"),
        "the answer's size: {message}"
    );
}

#[tokio::test]
async fn an_answer_just_under_the_frame_limit_is_refused_not_dropped() {
    // Its body fits a message, but not with the envelope around it.
    let event = create_answer(MAX_FRAME_BYTES - 120, None).await;
    assert_eq!(
        event.error_code,
        Some(ErrorCode::MessageTooLarge),
        "{event:?}"
    );
}
