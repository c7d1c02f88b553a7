//! Options come from a TOML file, overridden by the environment, then flags.

use crate::common;

use std::process::Command;

#[test]
fn the_config_file_sets_options_and_the_environment_overrides_it() {
    let scratch = common::Scratch::new();
    let from_file = scratch.path().join("from-file");
    let config = scratch.write(
        "orrery.toml",
        &format!(
            "data_dir = \"{}\"\nplugin_dir = \"{}\"\n",
            from_file.display(),
            orrery_testing::target_debug().display()
        ),
    );
    let stack = scratch.write(
        "s.yaml",
        "stack: cfg\ntargets:\n  - name: t\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n  - label: d\n    type: Local::Fs::Directory\n    target: t\n    properties: { path: d }\n",
    );
    let orrery = |verb: &str, extra_env: Option<(&str, &str)>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
        cmd.args([
            verb,
            stack.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ])
        .args(if verb == "apply" {
            &["--yes"][..]
        } else {
            &[][..]
        })
        .env_remove("ORRERY_DATA_DIR")
        .env_remove("ORRERY_PLUGIN_DIR");
        if let Some((k, v)) = extra_env {
            cmd.env(k, v);
        }
        common::Run::from(cmd.output().unwrap())
    };
    let run = orrery("apply", None);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        from_file.join("state.db").exists(),
        "the file's data_dir was used"
    );

    let from_env = scratch.path().join("from-env");
    let run = orrery(
        "plan",
        Some(("ORRERY_DATA_DIR", from_env.to_str().unwrap())),
    );
    assert_eq!(run.code, 2, "a fresh store plans the create again: {run:?}");
    assert!(
        from_env.join("state.db").exists(),
        "the environment overrides the file"
    );

    let bad = scratch.write("bad.toml", "data_dir = [1, 2]\n");
    let out = Command::new(env!("CARGO_BIN_EXE_orrery"))
        .args(["inventory", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`data_dir` must be a string"));
}

#[test]
fn the_nats_identity_comes_from_the_config_file_then_the_environment() {
    let scratch = common::Scratch::new();
    let from_file = scratch.path().join("from-file.nk");
    let config = scratch.write(
        "orrery.toml",
        &format!(
            "nats_url = \"nats://127.0.0.1:1\"\nnats_nkey = \"{}\"\n",
            from_file.display()
        ),
    );
    let stack = scratch.write(
        "s.yaml",
        "stack: cfg\ntargets:\n  - name: t\n    plugin: local\n    config: { root: \"${stack_dir}/site\" }\nresources: []\n",
    );
    // The seed is read before any connection is tried: a missing file
    // names itself, so which option won shows without a NATS server.
    let plan = |nkey_env: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
        cmd.args([
            "plan",
            stack.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ])
        .env("ORRERY_DATA_DIR", scratch.path().join("state"))
        .env_remove("ORRERY_NATS_URL")
        .env_remove("ORRERY_NATS_CREDS")
        .env_remove("ORRERY_NATS_NKEY");
        if let Some(path) = nkey_env {
            cmd.env("ORRERY_NATS_NKEY", path);
        }
        common::Run::from(cmd.output().unwrap())
    };
    let run = plan(None);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("reading nkey {}", from_file.display())),
        "the file's nats_nkey was used: {run:?}"
    );
    let from_env = scratch.path().join("from-env.nk");
    let run = plan(Some(from_env.to_str().unwrap()));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("reading nkey {}", from_env.display())),
        "ORRERY_NATS_NKEY overrides the file: {run:?}"
    );
}
