//! The real binary on a kernel without openat2, played by a seccomp filter
//! answering every openat2 with ENOSYS (no such call) or EPERM (what
//! container runtimes' filters tend to answer): every operation fails
//! closed, saying why, and touches nothing.

use std::process::Stdio;
use std::time::Duration;

use orrery_plugin_sdk::schema::{
    CreateRequest, ErrorCode, ListRequest, OperationStatus, Request, Target,
};
use orrery_plugin_sdk::{Answer, PluginClient};

use crate::common::{props, FILE};

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn without_openat2_nothing_runs() {
    for errno in [libc::ENOSYS, libc::EPERM] {
        let root = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_orrery-plugin-local"));
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let filter = deny_openat2(errno);
        // SAFETY: between fork and exec the closure only makes two prctl
        // calls, on memory allocated before the fork.
        unsafe {
            command.pre_exec(move || install(&filter));
        }
        let mut child = command.spawn().unwrap();
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = PluginClient::connect(stdout, stdin, TIMEOUT).await.unwrap();
        let target = Target {
            name: "kernel".into(),
            config: props([("root", root.path().to_str().unwrap().into())]),
            ..Default::default()
        };

        let create = Request::Create(CreateRequest {
            request_id: "create".into(),
            resource_type: FILE.into(),
            target: target.clone(),
            properties: props([("path", "f".into()), ("content", "x".into())]),
            ..Default::default()
        });
        let Answer::Progress(event) = client.request(&create, TIMEOUT).await.unwrap() else {
            panic!("not a progress event");
        };
        assert_eq!(event.status, OperationStatus::Failure, "{event:?}");
        assert_eq!(
            event.error_code,
            Some(ErrorCode::InternalFailure),
            "{event:?}"
        );
        let message = event.message.unwrap_or_default();
        assert!(message.contains("openat2"), "errno {errno}: {message}");

        let list = Request::List(ListRequest {
            request_id: "list".into(),
            resource_type: FILE.into(),
            target,
            ..Default::default()
        });
        let Answer::List(page) = client.request(&list, TIMEOUT).await.unwrap() else {
            panic!("not a list result");
        };
        assert_eq!(
            page.error_code,
            Some(ErrorCode::InternalFailure),
            "{page:?}"
        );
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }
}

/// A seccomp program failing openat2 with `errno` and allowing the rest.
/// (It does not check the architecture: enough for a test on this host.)
fn deny_openat2(errno: i32) -> Vec<libc::sock_filter> {
    let insn = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    vec![
        // The system call number, at offset 0 of `seccomp_data`.
        insn(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        insn(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            1,
            libc::SYS_openat2 as u32,
        ),
        insn(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | errno as u32,
        ),
        insn(libc::BPF_RET | libc::BPF_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

fn install(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `program` points at `filter`, alive for both calls.
    let failed = unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &program as *const libc::sock_fprog,
            ) != 0
    };
    if failed {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
