//! The plugin side of the link under bad and concurrent input: a real
//! `serve_io` on in-memory pipes, driven with raw frames.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use orrery_plugin_sdk::frame_io::FrameCodec;
use orrery_plugin_sdk::schema::{
    encode_frame, Cancel, CreateRequest, Envelope, ErrorCode, ListRequest, MessageKind,
    OperationStatus, ProgressEvent, PropertyMap, ProtocolError, Request, Value,
};
use orrery_plugin_sdk::{
    done, field, harness, resource, Answer, ListPage, OpResult, PluginError, PluginInfo,
    ResourcePlugin,
};
use tokio::io::{AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio_util::codec::FramedRead;

#[derive(Default)]
struct Sleepy;

impl ResourcePlugin for Sleepy {
    fn info(&self) -> PluginInfo {
        PluginInfo {
            name: "sleepy".into(),
            version: "0.1.0".into(),
            namespace: "Test".into(),
        }
    }
    fn resources(&self) -> Vec<orrery_plugin_sdk::schema::ResourceSchema> {
        vec![resource("Test::Sleepy")
            .field(field::string("name"))
            .field(field::integer("delay_ms"))
            .field(field::boolean("panic"))
            .build()]
    }
    async fn create(&self, r: CreateRequest) -> OpResult {
        if let Some(ms) = r.properties.get("delay_ms").and_then(Value::as_i64) {
            tokio::time::sleep(Duration::from_millis(ms as u64)).await;
        }
        if r.properties.get("panic") == Some(&Value::Bool(true)) {
            panic!("boom in create");
        }
        let name = r
            .properties
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("x")
            .to_owned();
        done(name, r.properties)
    }
    async fn read(&self, _: orrery_plugin_sdk::schema::ReadRequest) -> OpResult {
        Err(PluginError::not_found("nothing is stored"))
    }
    async fn update(&self, _: orrery_plugin_sdk::schema::UpdateRequest) -> OpResult {
        Err(PluginError::not_found("nothing is stored"))
    }
    async fn delete(&self, _: orrery_plugin_sdk::schema::DeleteRequest) -> OpResult {
        Err(PluginError::not_found("nothing is stored"))
    }
    async fn list(&self, _: ListRequest) -> Result<ListPage, PluginError> {
        Ok(ListPage::default())
    }
}

fn create(name: &str, extra: &[(&str, Value)]) -> CreateRequest {
    let mut properties = PropertyMap::from([("name".to_owned(), Value::from(name))]);
    properties.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    CreateRequest {
        request_id: format!("req-{name}"),
        resource_type: "Test::Sleepy".into(),
        properties,
        ..Default::default()
    }
}

/// A raw link: bytes in, decoded envelopes out.
struct RawLink {
    to_plugin: WriteHalf<DuplexStream>,
    from_plugin: FramedRead<ReadHalf<DuplexStream>, FrameCodec>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RawLink {
    async fn start() -> RawLink {
        let (host, plugin) = tokio::io::duplex(1 << 16);
        let (plugin_read, plugin_write) = tokio::io::split(plugin);
        let served = tokio::spawn(orrery_plugin_sdk::serve_io(
            Arc::new(Sleepy),
            plugin_read,
            plugin_write,
            std::future::pending(),
        ));
        let (host_read, to_plugin) = tokio::io::split(host);
        let mut link = RawLink {
            to_plugin,
            from_plugin: FramedRead::new(host_read, FrameCodec::default()),
            served,
        };
        let hello = link.next().await;
        assert_eq!(hello.kind, MessageKind::Announce);
        link
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.to_plugin.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, envelope: &Envelope) {
        let frame = encode_frame(envelope).unwrap();
        self.send_raw(&frame).await;
    }

    async fn next(&mut self) -> Envelope {
        let frame = tokio::time::timeout(Duration::from_secs(10), self.from_plugin.next())
            .await
            .expect("plugin answered within 10 s")
            .expect("link open")
            .unwrap()
            .unwrap();
        Envelope::decode(&frame).unwrap()
    }
}

fn frame_of(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

#[tokio::test]
async fn garbage_frames_are_skipped_and_the_link_keeps_serving() {
    let mut link = RawLink::start().await;
    // A frame that is not an envelope, and an oversized frame (skipped as it streams).
    link.send_raw(&frame_of(b"\xc1\xc1 not msgpack")).await;
    let big = 17 * 1024 * 1024;
    link.send_raw(&(big as u32).to_be_bytes()).await;
    let writer = async {
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..17 {
            link.to_plugin.write_all(&chunk).await.unwrap();
        }
    };
    writer.await;
    let request = Request::Create(create("after-garbage", &[]))
        .to_envelope()
        .unwrap();
    link.send(&request).await;
    let answer = link.next().await;
    assert_eq!(answer.correlation, Some(request.id));
    let event: ProgressEvent = answer.body().unwrap();
    assert_eq!(event.status, OperationStatus::Success);
    assert_eq!(event.native_id.as_deref(), Some("after-garbage"));
}

#[tokio::test]
async fn unknown_kind_and_malformed_body_are_answered_with_errors() {
    let mut link = RawLink::start().await;
    let mut unknown = Envelope::new(MessageKind::from_wire("teleport"), &()).unwrap();
    unknown.body = orrery_plugin_sdk::schema::encode(&PropertyMap::new()).unwrap();
    link.send(&unknown).await;
    let answer = link.next().await;
    assert_eq!(answer.kind, MessageKind::Error);
    assert_eq!(answer.correlation, Some(unknown.id));
    let err: ProtocolError = answer.body().unwrap();
    assert_eq!(err.code, ErrorCode::UnsupportedOperation);
    assert!(err.message.contains("teleport"), "{}", err.message);

    let mut bad_body = Request::Create(create("x", &[])).to_envelope().unwrap();
    bad_body.body = vec![0x93, 0x01];
    link.send(&bad_body).await;
    let answer = link.next().await;
    assert_eq!(answer.correlation, Some(bad_body.id));
    let err: ProtocolError = answer.body().unwrap();
    assert_eq!(err.code, ErrorCode::MalformedMessage);
}

#[tokio::test]
async fn unknown_fields_in_a_request_are_ignored() {
    let mut link = RawLink::start().await;
    // A newer host's request: extra top-level fields the plugin does not know.
    let mut body = orrery_plugin_sdk::schema::PropertyMap::new();
    body.insert("request_id".into(), Value::from("r1"));
    body.insert("resource_type".into(), Value::from("Test::Sleepy"));
    body.insert(
        "properties".into(),
        Value::Map(PropertyMap::from([(
            "name".to_owned(),
            Value::from("newer"),
        )])),
    );
    body.insert("priority".into(), Value::from("urgent"));
    let envelope = Envelope::new(MessageKind::Create, &body).unwrap();
    link.send(&envelope).await;
    let event: ProgressEvent = link.next().await.body().unwrap();
    assert_eq!(event.status, OperationStatus::Success);
    assert_eq!(event.request_id, "r1");
}

#[tokio::test]
async fn wrong_protocol_major_is_refused_naming_both_versions() {
    let mut link = RawLink::start().await;
    let mut request = Request::Create(create("x", &[])).to_envelope().unwrap();
    request.protocol = 7;
    link.send(&request).await;
    let err: ProtocolError = link.next().await.body().unwrap();
    assert_eq!(err.code, ErrorCode::UnsupportedProtocol);
    assert!(
        err.message.contains('7') && err.message.contains('1'),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn cancel_reaches_the_handler() {
    let mut link = RawLink::start().await;
    let request = Request::Create(create("slow", &[("delay_ms", Value::from(60_000))]))
        .to_envelope()
        .unwrap();
    link.send(&request).await;
    let mut cancel = Envelope::new(
        MessageKind::Cancel,
        &Cancel {
            reason: "test".into(),
        },
    )
    .unwrap();
    cancel.correlation = Some(request.id);
    link.send(&cancel).await;
    let answer = link.next().await;
    assert_eq!(answer.correlation, Some(request.id));
    let event: ProgressEvent = answer.body().unwrap();
    assert_eq!(event.status, OperationStatus::Canceled);
    assert_eq!(event.error_code, Some(ErrorCode::Canceled));
}

#[tokio::test]
async fn closing_stdin_ends_serving_after_in_flight_requests_finish() {
    let mut link = RawLink::start().await;
    let request = Request::Create(create("last", &[("delay_ms", Value::from(50))]))
        .to_envelope()
        .unwrap();
    link.send(&request).await;
    link.to_plugin.shutdown().await.unwrap();
    let event: ProgressEvent = link.next().await.body().unwrap();
    assert_eq!(event.status, OperationStatus::Success);
    let served = tokio::time::timeout(Duration::from_secs(10), link.served).await;
    assert!(matches!(served, Ok(Ok(Ok(())))), "{served:?}");
}

#[tokio::test]
async fn a_panic_fails_only_its_own_request_and_deadlines_are_enforced() {
    let client = harness::start(Sleepy).await.unwrap();
    let timeout = Duration::from_secs(10);
    let slow = Request::Create(create("slow", &[("delay_ms", Value::from(300))]));
    let panics = Request::Create(create("bad", &[("panic", Value::Bool(true))]));
    let (slow, panics) = tokio::join!(
        client.request(&slow, timeout),
        client.request(&panics, timeout)
    );
    let Ok(Answer::Progress(slow)) = slow else {
        panic!("{slow:?}")
    };
    let Ok(Answer::Progress(panics)) = panics else {
        panic!("{panics:?}")
    };
    assert_eq!(slow.status, OperationStatus::Success);
    assert_eq!(panics.status, OperationStatus::Failure);
    assert_eq!(panics.error_code, Some(ErrorCode::InternalFailure));
    assert!(panics.message.unwrap().contains("boom in create"));

    let late = Request::Create(create("late", &[("delay_ms", Value::from(5_000))]));
    let envelope =
        late.to_envelope()
            .unwrap()
            .with_deadline_ms(Some(orrery_plugin_sdk::client::deadline_ms(
                Duration::from_millis(100),
            )));
    let answer = client.call(envelope, timeout).await.unwrap();
    let event: ProgressEvent = answer.body().unwrap();
    assert_eq!(event.error_code, Some(ErrorCode::DeadlineExceeded));
}

#[tokio::test]
async fn one_link_serves_many_requests_at_once() {
    let client = harness::start(Sleepy).await.unwrap();
    let started = std::time::Instant::now();
    let calls = (0..200).map(|i| {
        let client = client.clone();
        async move {
            let r = Request::Create(create(&format!("r{i}"), &[("delay_ms", Value::from(200))]));
            client.request(&r, Duration::from_secs(30)).await
        }
    });
    let answers = futures::future::join_all(calls).await;
    for (i, answer) in answers.into_iter().enumerate() {
        let Ok(Answer::Progress(event)) = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(
            event.native_id,
            Some(format!("r{i}")),
            "answers are correlated"
        );
    }
    // 200 sequential 200 ms handlers would take 40 s; concurrent ones well under the 30 s bound.
    assert!(started.elapsed() < Duration::from_secs(30));
}
