//! `orrery plugin new NAME`: scaffolds a plugin crate outside the Orrery
//! workspace, one example type and its conformance fixture included, that
//! builds and passes `orrery plugin test` as it is.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};

/// The template files, `{{name}}`, `{{namespace}}` and `{{sdk}}` replaced.
const FILES: [(&str, &str); 6] = [
    (
        "Cargo.toml",
        include_str!("plugin_template/Cargo.toml.tmpl"),
    ),
    ("src/main.rs", include_str!("plugin_template/main.rs.tmpl")),
    (
        "conformance/note.json",
        include_str!("plugin_template/note.json.tmpl"),
    ),
    (
        "stack.yaml",
        include_str!("plugin_template/stack.yaml.tmpl"),
    ),
    ("README.md", include_str!("plugin_template/README.md.tmpl")),
    (".gitignore", include_str!("plugin_template/gitignore.tmpl")),
];

/// Longest plugin name (it becomes a NATS subject token and a file name).
const MAX_NAME: usize = 64;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plugin's name: lower-case letters, digits, `-` and `_`, starting
    /// with a letter. The crate and binary are `orrery-plugin-NAME`, the
    /// namespace is NAME in CamelCase.
    name: String,
    /// Directory to create (absent or empty); default ./NAME.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Depend on the SDK at this path; default: the SDK of the Orrery
    /// source tree this binary was built from.
    #[arg(long, conflicts_with = "sdk_version")]
    sdk_path: Option<PathBuf>,
    /// Depend on this version of `orrery-plugin-sdk` from the registry.
    #[arg(long)]
    sdk_version: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_name(&args.name)?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    check_empty(&dir)?;
    let (sdk, lock) = match args.sdk_version {
        Some(version) => (sdk_by_version(&version)?, None),
        None => {
            let path = sdk_path(args.sdk_path)?;
            (sdk_by_path(&path)?, workspace_lock(&path))
        }
    };
    let namespace = namespace_of(&args.name);
    for (file, template) in FILES {
        let text = template
            .replace("{{name}}", &args.name)
            .replace("{{namespace}}", &namespace)
            .replace("{{sdk}}", &sdk);
        write(&dir.join(file), text.as_bytes())?;
    }
    // The SDK's own workspace lock pins the new crate to the dependency
    // versions the SDK is built and tested with (cargo drops the rest), and
    // lets an offline build use what that tree already downloaded.
    if let Some(lock) = lock {
        let text = std::fs::read(&lock).with_context(|| format!("reading {}", lock.display()))?;
        write(&dir.join("Cargo.lock"), &text)?;
    }
    let d = dir.display();
    println!("created plugin `{}` ({namespace}::Note) in {d}", args.name);
    println!("next, in {d}:");
    println!("  cargo build");
    println!(
        "  orrery plugin test target/debug/orrery-plugin-{} --fixtures conformance",
        args.name
    );
    println!("  orrery apply stack.yaml --plugin-dir target/debug");
    Ok(ExitCode::SUCCESS)
}

/// A plugin name must also be a crate name and, in CamelCase, a namespace.
fn check_name(name: &str) -> anyhow::Result<()> {
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_';
    if name.is_empty() || name.len() > MAX_NAME {
        bail!("plugin name must be 1 to {MAX_NAME} characters");
    }
    if name.contains(['/', '\\']) || name.starts_with('.') {
        bail!("plugin name {name:?} is a path: give the name, and the directory with --dir");
    }
    if !name.as_bytes()[0].is_ascii_lowercase() || !name.bytes().all(allowed) {
        bail!(
            "plugin name {name:?}: use lower-case letters, digits, `-` and `_`, \
             starting with a letter"
        );
    }
    if name.ends_with(['-', '_']) || name.contains("--") || name.contains("__") {
        bail!("plugin name {name:?}: `-` and `_` only between letters or digits");
    }
    Ok(())
}

/// `acme-cloud` → `AcmeCloud`.
fn namespace_of(name: &str) -> String {
    name.split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Refuses to write into a directory that holds anything, or over a file.
fn check_empty(dir: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!("{} exists and is not empty", dir.display());
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("{} cannot be used", dir.display())),
    }
}

/// The SDK directory: the one given, else the one beside the primary crate
/// this binary was built from.
fn sdk_path(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let built_from = given.is_none();
    let path = given.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-sdk"));
    let found = path
        .canonicalize()
        .ok()
        .filter(|p| p.join("Cargo.toml").is_file());
    match found {
        Some(path) => Ok(path),
        None if built_from => bail!(
            "the Orrery source tree this binary was built from has no SDK at {}: \
             pass --sdk-path or --sdk-version",
            path.display()
        ),
        None => bail!(
            "{} is not the SDK's crate directory (no Cargo.toml)",
            path.display()
        ),
    }
}

fn sdk_by_path(path: &Path) -> anyhow::Result<String> {
    let Some(path) = path.to_str() else {
        bail!("SDK path {} is not UTF-8", path.display());
    };
    Ok(format!("{{ path = {} }}", toml::Value::from(path)))
}

fn sdk_by_version(version: &str) -> anyhow::Result<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ".-+^~=<>*, ".contains(c);
    if version.trim().is_empty() || !version.chars().all(allowed) {
        bail!("--sdk-version {version:?} is not a version requirement");
    }
    Ok(toml::Value::from(version).to_string())
}

/// The lock file of the workspace holding the SDK at `sdk`, if any.
fn workspace_lock(sdk: &Path) -> Option<PathBuf> {
    sdk.parent()
        .map(|root| root.join("Cargo.lock"))
        .filter(|lock| lock.is_file())
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_crates_and_plugins_pass() {
        for name in ["acme", "acme-cloud", "aws_ec2", "a1"] {
            assert!(check_name(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn names_that_are_paths_or_not_crates_are_refused() {
        for name in [
            "", "../x", "a/b", "a\\b", ".hidden", "Acme", "1acme", "-rf", "acme-", "a--b", "a b",
            "ünï",
        ] {
            assert!(check_name(name).is_err(), "{name:?} accepted");
        }
        assert!(check_name(&"a".repeat(MAX_NAME + 1)).is_err());
    }

    #[test]
    fn namespace_is_the_name_in_camel_case() {
        assert_eq!(namespace_of("acme"), "Acme");
        assert_eq!(namespace_of("acme-cloud_v2"), "AcmeCloudV2");
    }

    #[test]
    fn version_requirements_are_quoted_and_checked() {
        assert_eq!(sdk_by_version("0.1").unwrap(), "\"0.1\"");
        assert!(sdk_by_version("1\" }\n[x]").is_err());
        assert!(sdk_by_version(" ").is_err());
    }
}
