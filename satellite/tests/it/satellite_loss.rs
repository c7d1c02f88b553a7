//! SIGKILL on one of two satellite processes while operations flow: every
//! operation completes on the survivor after a caller retry, or returns a
//! defined retryable error; none hangs past its deadline.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{binary, NatsServer};
use futures::StreamExt;
use orrery_plugin_sdk::schema::{
    CreateRequest, OperationStatus, PropertyMap, Request, Target, Value,
};
use orrery_plugin_sdk::Answer;
use orrery_satellite::bus::{BusError, NatsBus};
use orrery_satellite::relay;
use orrery_testing::wait::{wait_for_async, Wait};

fn satellite(server: &NatsServer, id: &str) -> Child {
    Command::new(binary("orrery-satellite"))
        .args(["--nats-url", &server.url, "--id", id])
        .arg("--plugin")
        .arg(binary("orrery-plugin-testbed"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn wait_registered(server: &NatsServer, n: usize) {
    let client = &server.client().await;
    let what = format!("{n} satellites registered");
    wait_for_async(&what, Duration::from_secs(20), move || async move {
        let inbox = client.new_inbox();
        let mut sub = client.subscribe(inbox.clone()).await.unwrap();
        client
            .publish_with_reply(
                format!("$SRV.PING.{}", relay::SERVICE_NAME),
                inbox,
                "".into(),
            )
            .await
            .unwrap();
        let mut seen = 0;
        while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(300), sub.next()).await {
            seen += 1;
        }
        if seen >= n {
            Ok(())
        } else {
            Err(format!("{seen} answered"))
        }
    })
    .await;
}

fn create(i: usize) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("loss-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: format!("t{i}"),
        target: Target {
            name: "flow".into(),
            config: PropertyMap::from([("delay_ms".to_owned(), Value::from(20))]),
            ..Default::default()
        },
        properties: PropertyMap::from([("name".to_owned(), Value::from(format!("t{i}")))]),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_satellite_mid_flow_loses_no_operation_and_hangs_none() {
    let server = NatsServer::start().await;
    let mut victim = satellite(&server, "victim");
    let mut survivor = satellite(&server, "survivor");
    wait_registered(&server, 2).await;

    let bus = NatsBus::new(server.client().await);
    let timeout = Duration::from_secs(3);
    let done = Arc::new(AtomicUsize::new(0));
    let retried = Arc::new(AtomicUsize::new(0));
    let calls = futures::stream::iter(0..400)
        .map(|i| {
            let bus = bus.clone();
            let done = done.clone();
            let retried = retried.clone();
            async move {
                for attempt in 1..=5 {
                    let started = Instant::now();
                    let answer = bus.send("testbed", &create(i), timeout).await;
                    assert!(
                        started.elapsed() < timeout + Duration::from_secs(2),
                        "call {i} hung past its deadline"
                    );
                    let retryable = match answer {
                        Ok(Answer::Progress(e)) if e.status == OperationStatus::Success => {
                            done.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        Ok(Answer::Progress(e)) => {
                            e.error_code.clone().is_some_and(|c| c.is_retryable())
                        }
                        Ok(other) => panic!("unexpected answer {other:?}"),
                        Err(e @ (BusError::Timeout { .. } | BusError::NoSatellite { .. })) => {
                            e.code().is_retryable()
                        }
                        Err(e) => panic!("undefined failure: {e}"),
                    };
                    assert!(retryable, "call {i} attempt {attempt} failed terminally");
                    retried.fetch_add(1, Ordering::SeqCst);
                }
                panic!("call {i} did not complete in 5 attempts");
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>();
    let killer = async {
        Wait::new("100 calls done before the kill", Duration::from_secs(60))
            .every(Duration::from_millis(5))
            .until_async(|| std::future::ready(done.load(Ordering::SeqCst) >= 100))
            .await;
        victim.kill().unwrap();
        let _ = victim.wait();
    };
    tokio::join!(calls, killer);
    assert_eq!(
        done.load(Ordering::SeqCst),
        400,
        "every operation completed"
    );
    let _ = survivor.kill();
    let _ = survivor.wait();
}
