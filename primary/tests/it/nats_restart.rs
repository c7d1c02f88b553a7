//! Issue 44, item 1, first row: nats-server restarted in the middle of an
//! apply through a satellite. Requests in flight when the connection drops
//! fail at once as retryable with their outcome unknown (their answers
//! would come back to a subscription the server forgot), and are sent
//! again after the reconnect under the same request ids: the apply goes on
//! within seconds of the server's return instead of waiting out the
//! 60 s request timeout, and each thing exists once at the provider.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use orrery_testing::{nats, Wait};

use crate::common::{self, crash, fleet, Scratch};

const THINGS: usize = 120;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_restart_mid_apply_does_not_stall_it_for_a_request_timeout() {
    let mut server = nats::NatsServer::start().await;
    let _satellite = fleet::testbed_satellite(&server).await;
    let scratch = Scratch::new();
    let world = scratch.path().join("cloud.sqlite");
    let doc = common::cloud::stack("restart", &world, THINGS, 200);
    let file = scratch.write("stack.yaml", &doc);
    let state = scratch.state();
    let mut apply = crash::Killed(
        Command::new(env!("CARGO_BIN_EXE_orrery"))
            .args([
                "apply",
                file.to_str().unwrap(),
                "--yes",
                "--concurrency",
                "16",
            ])
            .args(["--nats-url", &server.url])
            .env("ORRERY_DATA_DIR", &state)
            .env("ORRERY_PLUGIN_DIR", "/nonexistent")
            .env_remove("ORRERY_DATABASE_URL")
            .stdout(std::fs::File::create(scratch.path().join("apply.out")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let wait = Wait::new("creates under way", Duration::from_secs(60));
    let seen = wait
        .poll(|| {
            let seen = crash::look(&state);
            if seen.count("create", "succeeded") >= 20 && seen.count("create", "running") >= 1 {
                Ok(seen)
            } else {
                Err(seen)
            }
        })
        .unwrap_or_else(|seen| wait.fail(format_args!("{seen:?}")));
    server.restart(Duration::from_secs(1)).await;
    let back = Instant::now();
    // Well under the 60 s request timeout the requests in flight waited
    // out before.
    let wait = Wait::new("the apply's end", Duration::from_secs(40));
    let exit = wait
        .poll(|| apply.0.try_wait().unwrap().ok_or(()))
        .unwrap_or_else(|()| {
            wait.fail("still applying: requests in flight wait for their timeout")
        });
    let after = back.elapsed();
    let said = std::fs::read_to_string(scratch.path().join("apply.out")).unwrap();
    assert!(exit.success(), "{exit}\n{said}");
    let census = orrery_plugin_testbed::store::census(&world).unwrap();
    assert_eq!(
        (census.rows.len(), census.duplicates()),
        (THINGS, 0),
        "{census:?}"
    );
    eprintln!(
        "restart with {} in flight; the apply ended {} ms after the server was back",
        seen.count("create", "running"),
        after.as_millis()
    );
}
