//! Several `orrery primary` processes on one PostgreSQL store (issue 45):
//! a target's rate limit holds across them, scheduled jobs run once per
//! fleet, and a primary that shuts down hands its commands to another.
//! Every create arrives at one provider (the testbed's cloud things in one
//! store file), so what the fleet did is counted in the plugin's world.
//! Skipped without `ORRERY_TEST_DATABASE_URL` (scripts/with-postgres.sh
//! sets it).

use std::time::Duration;

use orrery_testing::Wait;
use serde_json::{json, Value};

use crate::common::{self, server::Server, Scratch};

const RATE: f64 = 20.0;
const BURST: f64 = 4.0;
const THINGS: usize = 60;

fn document(stack: &str, world: &std::path::Path) -> String {
    common::cloud::stack(stack, world, THINGS, 0)
}

/// Two primaries on a fresh PostgreSQL database, each started with
/// `args` besides `--database-url`; `None` (the test is skipped) without
/// `ORRERY_TEST_DATABASE_URL`.
fn two_primaries(prefix: &str, args: &[&str]) -> Option<(Server, Server)> {
    let Some(db) = common::postgres::fresh_database(prefix) else {
        eprintln!(
            "skipped: ORRERY_TEST_DATABASE_URL is not set (run through scripts/with-postgres.sh)"
        );
        return None;
    };
    let primary = || {
        let mut all = vec!["--database-url".to_owned(), db.clone()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        Server::start_with(common::server::ServerOptions {
            args: all,
            ..Default::default()
        })
    };
    Some((primary(), primary()))
}

fn succeeded(command: &Value) -> usize {
    command["operations"].as_array().map_or(0, |ops| {
        ops.iter().filter(|o| o["status"] == "succeeded").count()
    })
}

/// Item 3: two primaries apply two stacks to one target at once; the
/// arrivals stay within burst + rate·t, plus one share period's lag when
/// the second joins. Without sharing each primary takes the whole rate and
/// the arrivals run at twice it.
#[test]
fn two_primaries_applying_to_one_target_share_its_rate_limit() {
    let limit = format!("Testbed/lab={RATE}:{BURST}");
    let Some((a, b)) = two_primaries("rates", &["--rate-limit", &limit]) else {
        return;
    };
    let scratch = Scratch::new();
    let world = scratch.path().join("cloud.sqlite");

    let (status, first) = a.post(
        "/v1/stacks/apply",
        &json!({ "document": document("ra", &world) }),
    );
    assert_eq!(status, 202, "{first}");
    let first = first["command_id"].as_str().unwrap().to_owned();
    let wait = Wait::new("the first primary under way", Duration::from_secs(60));
    wait.poll(|| {
        let (_, c) = a.get(&format!("/v1/commands/{first}"));
        if succeeded(&c) >= 5 {
            Ok(())
        } else {
            Err(c)
        }
    })
    .unwrap_or_else(|c| wait.fail(c));
    let (status, second) = b.post(
        "/v1/stacks/apply",
        &json!({ "document": document("rb", &world) }),
    );
    assert_eq!(status, 202, "{second}");
    let second = second["command_id"].as_str().unwrap().to_owned();
    for (server, id) in [(&a, &first), (&b, &second)] {
        let command = server.wait_command(id);
        assert_eq!(command["status"], "completed", "{command}");
    }

    let census = orrery_plugin_testbed::store::census(&world).unwrap();
    assert_eq!((census.rows.len(), census.duplicates()), (2 * THINGS, 0));
    let arrivals = orrery_plugin_testbed::store::cloud_ready_times(&world).unwrap();
    assert_eq!(arrivals.len(), 2 * THINGS);
    // The second's first burst, and the first's rate for as long as it
    // takes to learn of the second: one share period (250 ms) and, on a
    // loaded machine, as much again in scheduling and store round trips.
    // (Without sharing, the two run at 2 × RATE and cross this by 1 s.)
    let slack = BURST + RATE * 0.75;
    let t0 = arrivals[0];
    let mut worst = f64::MIN;
    for (k, at) in arrivals.iter().enumerate() {
        let allowed = BURST + RATE * (at - t0) as f64 / 1000.0 + slack;
        worst = worst.max((k + 1) as f64 - allowed);
        assert!(
            (k + 1) as f64 <= allowed,
            "request {} at {} ms: at most {allowed:.1} allowed ({RATE}/s, burst {BURST}, slack {slack})",
            k + 1,
            at - t0
        );
    }
    let span = (arrivals[arrivals.len() - 1] - t0) as f64 / 1000.0;
    eprintln!(
        "{} creates in {span:.2} s ({:.1}/s against {RATE}/s); closest to the bound: {worst:.1}",
        arrivals.len(),
        (arrivals.len() - 1) as f64 / span
    );
}

/// Issue 45, item 4: discovery on a schedule runs once per fleet, not once
/// per primary: of two primaries on one PostgreSQL store discovering every
/// second, one runs every discovery; when it stops, the other takes over.
#[test]
fn a_scheduled_discovery_runs_on_one_primary_of_the_fleet_and_moves_when_it_stops() {
    let Some((mut a, mut b)) = two_primaries("jobs", &["--discover-every", "1s"]) else {
        return;
    };
    // A recorded target gives discovery something to do.
    let (status, accepted) = a.post(
        "/v1/stacks/apply",
        &json!({ "document": common::slow_chain("jobs", 2, 0) }),
    );
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    assert_eq!(a.wait_command(&id)["status"], "completed");

    let runs = |s: &Server| s.log().matches("discovery done").count();
    let wait = Wait::new("four scheduled discoveries", Duration::from_secs(60))
        .every(Duration::from_millis(100));
    let (on_a, on_b) = wait
        .poll(|| match (runs(&a), runs(&b)) {
            (x, y) if x + y >= 4 => Ok((x, y)),
            seen => Err(seen),
        })
        .unwrap_or_else(|seen| wait.fail(format_args!("{seen:?}")));
    assert!(
        on_a == 0 || on_b == 0,
        "each discovery ran on one primary only: {on_a} on a, {on_b} on b"
    );
    // The one running them stops; the other takes the job over.
    let (holder, other) = if on_a > 0 { (&mut a, &b) } else { (&mut b, &a) };
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let wait = Wait::new("the other primary discovering", Duration::from_secs(60))
        .every(Duration::from_millis(100));
    wait.poll(|| {
        if runs(other) >= 2 {
            Ok(())
        } else {
            Err(runs(other))
        }
    })
    .unwrap_or_else(|n| wait.fail(format_args!("{n} runs")));
    eprintln!("before the stop: {on_a} discoveries on a, {on_b} on b");
}

/// Item 5: a primary shut down (SIGTERM) in the middle of a command does
/// not cancel it: after its grace it hands the command over (its records
/// stay `running`, its leases freed), another primary on the store resumes
/// it, and it completes with each thing created once.
#[test]
fn a_primary_shut_down_mid_command_hands_it_to_another_and_nothing_fails() {
    let args = [
        "--shutdown-grace",
        "1",
        "--lease-ttl",
        "2s",
        "--concurrency",
        "4",
    ];
    let Some((mut a, b)) = two_primaries("drain", &args) else {
        return;
    };
    let scratch = Scratch::new();
    let world = scratch.path().join("cloud.sqlite");
    let doc = document("drain", &world).replace("create_ms: 0", "create_ms: 400");
    let (status, accepted) = a.post("/v1/stacks/apply", &json!({ "document": doc }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    let wait = Wait::new("the command under way", Duration::from_secs(60));
    wait.poll(|| {
        let (_, c) = a.get(&format!("/v1/commands/{id}"));
        if succeeded(&c) >= 8 {
            Ok(())
        } else {
            Err(c)
        }
    })
    .unwrap_or_else(|c| wait.fail(c));

    let pid = a.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let wait = Wait::new("the first primary's exit", Duration::from_secs(30));
    let exit = wait
        .poll(|| a.child.try_wait().unwrap().ok_or(()))
        .unwrap_or_else(|()| wait.fail("still running"));
    assert!(exit.success(), "{exit}\n{}", a.log());
    assert!(a.log().contains("handed over at shutdown"), "{}", a.log());

    let command = b.wait_command(&id);
    assert_eq!(command["status"], "completed", "{command}\n{}", b.log());
    assert_eq!(succeeded(&command), THINGS, "{command}");
    let census = orrery_plugin_testbed::store::census(&world).unwrap();
    assert_eq!(
        (census.rows.len(), census.duplicates()),
        (THINGS, 0),
        "{census:?}"
    );
}
