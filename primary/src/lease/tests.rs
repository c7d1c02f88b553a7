use std::time::Duration;

use super::*;
use crate::state::{self, Lease};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = state::open_dir(dir.path()).unwrap();
    (dir, store)
}

fn config(owner: OwnerId) -> LeaseConfig {
    LeaseConfig {
        owner,
        ttl: Duration::from_secs(30),
    }
}

/// Who holds `command_id`'s lease now, asked as a stranger would.
fn holder(store: &dyn StateStore, command_id: &str) -> Option<Lease> {
    let now = store.now_ms().unwrap();
    match store
        .acquire_lease(command_id, "stranger/x/1/probe", now, 1)
        .unwrap()
    {
        LeaseGrant::HeldBy(lease) => Some(lease),
        LeaseGrant::Granted => {
            store
                .release_lease(command_id, "stranger/x/1/probe")
                .unwrap();
            None
        }
    }
}

#[test]
fn a_stack_without_a_running_command_gets_a_new_leased_one() {
    let (_dir, store) = store();
    let me = config(OwnerId::current());
    assert_eq!(
        claim(store.as_ref(), "web", "new-1", &me).unwrap(),
        Claim::New("new-1".into())
    );
    assert_eq!(
        holder(store.as_ref(), "new-1").unwrap().owner,
        me.owner.to_string()
    );
    store.begin_command("old", "web", "apply").unwrap();
    store
        .finish_command("old", &CommandStatus::Completed)
        .unwrap();
    assert_eq!(
        claim(store.as_ref(), "web", "new-2", &me).unwrap(),
        Claim::New("new-2".into()),
        "the latest command finished"
    );
}

#[test]
fn an_interrupted_command_is_claimed_unless_a_live_primary_holds_it() {
    let (_dir, store) = store();
    store.begin_command("c1", "web", "apply").unwrap();
    let elsewhere = config(OwnerId::new("other-host", "other-boot:1", 42, "r"));
    assert_eq!(
        claim(store.as_ref(), "web", "unused", &elsewhere).unwrap(),
        Claim::Interrupted("c1".into())
    );
    let me = config(OwnerId::current());
    let err = claim(store.as_ref(), "web", "unused", &me).unwrap_err();
    assert!(
        matches!(&err, LeaseError::StackHeld { stack, owner, .. }
            if stack == "web" && *owner == elsewhere.owner.to_string()),
        "{err}"
    );
    assert!(err.to_string().contains("another command"), "{err}");
    // With the stack let go, the command's own lease still stops it.
    store
        .release_lease(&stack_key("web"), &elsewhere.owner.to_string())
        .unwrap();
    let err = claim(store.as_ref(), "web", "unused", &me).unwrap_err();
    assert!(
        matches!(&err, LeaseError::Held { command_id, .. } if command_id == "c1"),
        "{err}"
    );
    assert!(
        holder(store.as_ref(), &stack_key("web")).is_none(),
        "a failed claim lets the stack go"
    );
}

/// Issue 45, item 0: two processes starting a new command of one stack at
/// once. A new command's id is always free, so only the stack's own lease
/// keeps the second from planning and running the stack beside the first.
#[test]
fn two_new_commands_of_one_stack_cannot_both_be_claimed() {
    let (_dir, store) = store();
    let first = config(OwnerId::new("host-a", "boot-a:1", 41, "r"));
    let second = config(OwnerId::new("host-b", "boot-b:1", 42, "r"));
    assert_eq!(
        claim(store.as_ref(), "web", "a", &first).unwrap(),
        Claim::New("a".into())
    );
    let err = claim(store.as_ref(), "web", "b", &second).unwrap_err();
    assert!(
        matches!(&err, LeaseError::StackHeld { stack, owner, .. }
            if stack == "web" && *owner == first.owner.to_string()),
        "{err}"
    );
    assert!(holder(store.as_ref(), "b").is_none(), "b never claimed");
    // Another stack is free.
    assert_eq!(
        claim(store.as_ref(), "api", "c", &second).unwrap(),
        Claim::New("c".into())
    );
    // Once the first lets the stack go, the second may claim it.
    store.release_lease("a", &first.owner.to_string()).unwrap();
    store
        .release_lease(&stack_key("web"), &first.owner.to_string())
        .unwrap();
    assert_eq!(
        claim(store.as_ref(), "web", "b", &second).unwrap(),
        Claim::New("b".into())
    );
}

/// The race a server start meets: it listed `c1` running, then another
/// primary finished `c1` and let its lease go before this one took it.
#[test]
fn a_command_finished_after_the_listing_is_not_claimed_again() {
    let (_dir, store) = store();
    store.begin_command("c1", "web", "apply").unwrap();
    let listed = running_command(store.as_ref(), "web").unwrap();
    assert_eq!(listed.as_deref(), Some("c1"));
    store
        .finish_command("c1", &CommandStatus::Completed)
        .unwrap();
    let me = config(OwnerId::current());
    let claim = claim_listed(store.as_ref(), "web", listed, "new-1", &me).unwrap();
    assert_eq!(claim, Claim::New("new-1".into()));
    assert!(holder(store.as_ref(), "c1").is_none(), "c1's lease let go");
    assert_eq!(
        holder(store.as_ref(), "new-1").unwrap().owner,
        me.owner.to_string()
    );
}

/// The other side of it: nothing was running when listed, but a live
/// primary began a command since; a second command beside it would run the
/// stack twice.
#[test]
fn a_command_begun_after_the_listing_is_not_run_beside() {
    let (_dir, store) = store();
    let elsewhere = config(OwnerId::new("other-host", "other-boot:1", 42, "r"));
    let listed = running_command(store.as_ref(), "web").unwrap();
    assert_eq!(listed, None);
    assert_eq!(
        claim(store.as_ref(), "web", "c1", &elsewhere).unwrap(),
        Claim::New("c1".into())
    );
    store.begin_command("c1", "web", "apply").unwrap();
    let me = config(OwnerId::current());
    let err = claim_listed(store.as_ref(), "web", listed, "new-1", &me).unwrap_err();
    assert!(
        matches!(&err, LeaseError::Held { command_id, .. } if command_id == "c1"),
        "{err}"
    );
    assert!(
        holder(store.as_ref(), "new-1").is_none(),
        "new-1's lease let go"
    );
}

#[test]
fn a_dead_holder_on_this_machine_is_not_waited_for() {
    let (_dir, store) = store();
    let me = config(OwnerId::current());
    // A process of this machine and namespace that no longer exists.
    let dead_pid = (1..u32::MAX).rev().find(|p| !process_alive(*p)).unwrap();
    let dead = config(OwnerId::new(
        &me.owner.host,
        &me.owner.scope,
        dead_pid,
        "gone",
    ));
    acquire(store.as_ref(), "c1", &dead).unwrap();
    if me.owner.scope.is_empty() {
        // No /proc: nothing can be told; the lease must be waited out.
        assert!(acquire(store.as_ref(), "c1", &me).is_err());
        return;
    }
    acquire(store.as_ref(), "c1", &me).unwrap();
    assert_eq!(
        holder(store.as_ref(), "c1").unwrap().owner,
        me.owner.to_string()
    );
    // A live holder (pid 1 always runs) is waited for.
    let live = config(OwnerId::new(&me.owner.host, &me.owner.scope, 1, "live"));
    acquire(store.as_ref(), "c2", &live).unwrap();
    assert!(
        matches!(
            acquire(store.as_ref(), "c2", &me),
            Err(LeaseError::Held { .. })
        ),
        "pid 1 runs"
    );
}

#[tokio::test]
async fn the_keeper_renews_until_released_and_a_release_frees_the_lease() {
    let (_dir, store) = store();
    let me = LeaseConfig {
        ttl: Duration::from_secs(1),
        ..config(OwnerId::current())
    };
    acquire(store.as_ref(), "c1", &me).unwrap();
    let first = holder(store.as_ref(), "c1").unwrap().expires_ms;
    let keeper = Keeper::start(store.clone(), "c1", &me);
    assert_eq!(keeper.command_id(), "c1");
    orrery_testing::wait_until_async("the lease renewed", Duration::from_secs(10), || {
        let lease = holder(store.as_ref(), "c1").expect("still held");
        std::future::ready(lease.expires_ms > first)
    })
    .await;
    assert!(!*keeper.lost().borrow());
    keeper.release();
    assert_eq!(holder(store.as_ref(), "c1"), None, "free at once");
}

#[tokio::test]
async fn a_lease_taken_away_is_reported_lost_and_cancels() {
    let (_dir, store) = store();
    let me = LeaseConfig {
        ttl: Duration::from_secs(1),
        ..config(OwnerId::current())
    };
    acquire(store.as_ref(), "c1", &me).unwrap();
    let keeper = Keeper::start(store.clone(), "c1", &me);
    let (_cancel_tx, cancel_rx) = watch::channel(Stop::Run);
    let mut cancel = cancel_on_loss(cancel_rx, keeper.lost());
    assert_eq!(*cancel.borrow(), Stop::Run);
    // Another primary took it (as after an expiry).
    store.release_lease("c1", &me.owner.to_string()).unwrap();
    let now = store.now_ms().unwrap();
    assert_eq!(
        store
            .acquire_lease("c1", "thief/x/1/r", now, 60_000)
            .unwrap(),
        LeaseGrant::Granted
    );
    let mut lost = keeper.lost();
    tokio::time::timeout(Duration::from_secs(10), lost.wait_for(|l| *l))
        .await
        .expect("reported lost within 10 s")
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        cancel.wait_for(|c| *c == Stop::Graceful),
    )
    .await
    .expect("the command is canceled, gracefully")
    .unwrap();
    drop(keeper);
    assert_eq!(
        holder(store.as_ref(), "c1").unwrap().owner,
        "thief/x/1/r",
        "dropping a keeper releases only its own lease"
    );
}

#[tokio::test]
async fn cancel_on_loss_follows_either_signal_and_closes_with_both() {
    let (cancel_tx, cancel_rx) = watch::channel(Stop::Run);
    let (lost_tx, lost_rx) = watch::channel(false);
    let mut combined = cancel_on_loss(cancel_rx, lost_rx);
    cancel_tx.send(Stop::Graceful).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        combined.wait_for(|c| *c == Stop::Graceful),
    )
    .await
    .unwrap()
    .unwrap();
    // A lost lease after a graceful cancel asks no more; a force does,
    // and is never taken back.
    lost_tx.send(true).unwrap();
    cancel_tx.send(Stop::Force).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        combined.wait_for(|c| *c == Stop::Force),
    )
    .await
    .unwrap()
    .unwrap();
    let _ = cancel_tx.send(Stop::Run);
    assert_eq!(*combined.borrow(), Stop::Force);

    let (cancel_tx, cancel_rx) = watch::channel(Stop::Run);
    let (lost_tx, lost_rx) = watch::channel(false);
    let mut combined = cancel_on_loss(cancel_rx, lost_rx);
    drop(cancel_tx);
    drop(lost_tx);
    let closed = tokio::time::timeout(Duration::from_secs(10), combined.changed())
        .await
        .unwrap();
    assert!(closed.is_err(), "nobody can cancel any more");
    assert_eq!(*combined.borrow(), Stop::Run);
}
