//! `orrery hub …` and `orrery plugin package`: the plugin hub from the
//! command line. The work is done by `orrery_hub`;
//! this module parses arguments and prints.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use orrery_hub::{
    self as hub, keys::public_path, lock::check_move, package, Hub, IndexEntry, LockFile,
    PublishOutcome, PublisherKey, Requirement, TrustedKeySpec, TrustedKeys,
};
use orrery_primary::nats::NatsAuth;

/// Where the hub is.
#[derive(clap::Args, Debug, Clone)]
pub struct HubLocation {
    /// NATS server of the hub (JetStream buckets orrery-hub-index and
    /// orrery-hub-artifacts).
    #[arg(long, env = "ORRERY_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    #[command(flatten)]
    nats_auth: NatsAuth,
    /// Use a directory-backed hub (embedded mode, air-gapped sites)
    /// instead of JetStream.
    #[arg(long, env = "ORRERY_HUB_DIR")]
    hub_dir: Option<PathBuf>,
}

impl HubLocation {
    async fn open(&self, create: bool) -> anyhow::Result<Hub> {
        if let Some(dir) = &self.hub_dir {
            return Ok(Hub::dir(dir)?);
        }
        let client = connect(&self.nats_url, &self.nats_auth).await?;
        Ok(if create {
            Hub::nats(client).await?
        } else {
            Hub::nats_existing(client).await?
        })
    }
}

/// Holding satellites' schemas to signed hub packages: `orrery primary`
/// and the commands that plan through satellites (`--nats-url`). The keys
/// and hub are given as to a satellite (`--trusted-key`, `--hub-url`,
/// `--hub-dir`), and verified by the same code (`orrery_hub`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct HubTrustArgs {
    /// A publisher public key file to trust, with the plugin names it may
    /// sign: FILE=local,acme-*. With one, a satellite describing such a
    /// plugin must name the hub package it installed, signed by such a
    /// key, and plans use that package's signed schema (docs/security.md,
    /// "Where schemas come from"). Repeat for several. Needs --nats-url.
    #[arg(
        long = "trusted-key",
        value_name = "FILE[=PLUGIN,...]",
        env = "ORRERY_TRUSTED_KEY"
    )]
    pub trusted_keys: Vec<TrustedKeySpec>,
    /// NATS URL of the hub the satellites install from, if not --nats-url
    /// (same credentials). Used with --trusted-key.
    #[arg(long, env = "ORRERY_HUB_URL", conflicts_with = "hub_dir")]
    pub hub_url: Option<String>,
    /// A directory-backed hub instead of JetStream. Used with
    /// --trusted-key.
    #[arg(long, env = "ORRERY_HUB_DIR")]
    pub hub_dir: Option<PathBuf>,
}

impl HubTrustArgs {
    /// The hub and the trusted keys, when keys are given; `nats` is the
    /// connection plans go through (`None`: plugins in-process, where no
    /// satellite describes anything and keys are refused as a mistake).
    pub async fn open(
        &self,
        nats: Option<&async_nats::Client>,
        auth: &NatsAuth,
    ) -> anyhow::Result<Option<std::sync::Arc<orrery_primary::service::hub_schemas::HubSchemas>>>
    {
        if self.trusted_keys.is_empty() {
            if self.hub_url.is_some() || self.hub_dir.is_some() {
                tracing::warn!(
                    "--hub-url and --hub-dir are used only with --trusted-key: satellites' \
                     schemas are not checked against the hub"
                );
            }
            return Ok(None);
        }
        let Some(nats) = nats else {
            anyhow::bail!(
                "--trusted-key holds satellites' schemas to their hub packages; it needs \
                 --nats-url (in-process plugins are the operator's own binaries)"
            );
        };
        let trusted = TrustedKeys::load_specs(&self.trusted_keys)?;
        let hub = match (&self.hub_dir, &self.hub_url) {
            (Some(dir), _) => {
                // Hub::dir creates a missing directory: a mistyped path
                // would refuse every package as not on the hub.
                anyhow::ensure!(
                    dir.is_dir(),
                    "--hub-dir {} is not a directory",
                    dir.display()
                );
                Hub::dir(dir)?
            }
            (None, Some(url)) => Hub::nats_existing(connect(url, auth).await?)
                .await
                .with_context(|| format!("cannot open the hub at {url}"))?,
            (None, None) => Hub::nats_existing(nats.clone())
                .await
                .context("cannot open the hub on --nats-url (give --hub-url or --hub-dir)")?,
        };
        Ok(Some(std::sync::Arc::new(
            orrery_primary::service::hub_schemas::HubSchemas::new(hub, trusted),
        )))
    }
}

async fn connect(url: &str, auth: &NatsAuth) -> anyhow::Result<async_nats::Client> {
    orrery_primary::nats::connect(url, "orrery", auth)
        .await
        .with_context(|| format!("connecting to NATS at {url}"))
}

#[derive(clap::Subcommand, Debug)]
pub enum HubCommand {
    /// Create an Ed25519 publisher key: KEYFILE (secret, mode 0600) and
    /// KEYFILE.pub (give this to operators to trust).
    Keygen(KeygenArgs),
    /// Publish a package directory (from `orrery plugin package`).
    Publish(PublishArgs),
    /// Find plugins whose name, summary, namespace or resource types
    /// contain TEXT.
    Search(SearchArgs),
    /// Show a plugin's newest (or a given) version: manifest, platforms,
    /// resource types.
    Info(InfoArgs),
    /// List a plugin's published versions.
    Versions(VersionsArgs),
    /// Yank a version with a signed statement: new installs skip it, pinned
    /// installs still get it.
    Yank(YankArgs),
    /// Resolve requirements against the hub and write a lock file pinning
    /// the versions and every platform's digests, to hand to a fleet.
    Lock(LockArgs),
    /// Copy every package of the hub into another (e.g. JetStream into a
    /// directory for an air-gapped site).
    Mirror(MirrorArgs),
}

#[derive(clap::Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the secret key (refuses to overwrite).
    #[arg(long)]
    out: PathBuf,
    /// A note stored in the public key file (who owns the key).
    #[arg(long, default_value = "")]
    comment: String,
}

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// The package directory.
    package: PathBuf,
    /// Sign (or re-sign) the package with this secret key before publishing.
    #[arg(long)]
    key: Option<PathBuf>,
    #[command(flatten)]
    hub: HubLocation,
}

#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Text to look for (empty lists every plugin).
    #[arg(default_value = "")]
    text: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    hub: HubLocation,
}

#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    /// NAME or NAME@VERSION.
    plugin: String,
    /// Print JSON (the manifest as published, plus the hub's flags).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    hub: HubLocation,
}

#[derive(clap::Args, Debug)]
pub struct VersionsArgs {
    /// The plugin.
    name: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    hub: HubLocation,
}

#[derive(clap::Args, Debug)]
pub struct YankArgs {
    /// NAME@VERSION.
    plugin: String,
    /// Why (shown by `info` and `versions`).
    #[arg(long, default_value = "")]
    reason: String,
    /// Un-yank instead (a signed un-yank, newer than the yank).
    #[arg(long)]
    undo: bool,
    /// The publisher's secret key that signs the statement. Satellites
    /// count it only if they trust this key for the plugin.
    #[arg(long)]
    key: PathBuf,
    #[command(flatten)]
    hub: HubLocation,
}

#[derive(clap::Args, Debug)]
pub struct LockArgs {
    /// NAME@REQ, one or more.
    #[arg(required = true)]
    requirements: Vec<String>,
    /// The lock file to write (entries for other plugins are kept).
    #[arg(long)]
    lock_file: PathBuf,
    /// Public key files to trust, FILE=PLUGIN,… (or a bare FILE: every
    /// name, warned): versions signed otherwise are skipped, and yank
    /// statements count only when signed by a key trusted for the plugin.
    #[arg(
        long = "trusted-key",
        required = true,
        value_name = "FILE[=PLUGIN,...]"
    )]
    trusted_keys: Vec<TrustedKeySpec>,
    /// Let the lock move a plugin to a lower or a yanked version (logged
    /// as a warning). Without it such a change is refused.
    #[arg(long)]
    allow_downgrade: bool,
    #[command(flatten)]
    hub: HubLocation,
}

#[derive(clap::Args, Debug)]
pub struct MirrorArgs {
    /// Copy into this directory hub.
    #[arg(long, conflicts_with = "to_nats_url")]
    to_dir: Option<PathBuf>,
    /// Copy into the hub on this NATS server.
    #[arg(long)]
    to_nats_url: Option<String>,
    #[command(flatten)]
    hub: HubLocation,
}

#[derive(clap::Args, Debug)]
pub struct PackageArgs {
    /// The plugin binary (run once to read its announcement).
    #[arg(long)]
    binary: PathBuf,
    /// The publisher's secret key; without it the package is unsigned and
    /// the hub refuses it until signed (`orrery hub publish --key`).
    #[arg(long)]
    key: Option<PathBuf>,
    /// The package directory to write.
    #[arg(long)]
    out: PathBuf,
    /// Platform of --binary (default: this host's, e.g. linux-x86_64).
    #[arg(long)]
    platform: Option<String>,
    /// Another platform's binary, PLATFORM=PATH (not run); repeatable.
    #[arg(long = "add", value_name = "PLATFORM=PATH")]
    extra: Vec<String>,
    /// Override the manifest's version (default: the announced one). For
    /// re-packaging and tests; the announced version is kept in the
    /// manifest as `announced_version`.
    #[arg(long)]
    version: Option<String>,
    /// SPDX license expression.
    #[arg(long, default_value = "")]
    license: String,
    /// One line about the plugin.
    #[arg(long, default_value = "")]
    summary: String,
    /// The oldest Orrery release that can run the plugin (default: this one).
    #[arg(long)]
    min_orrery: Option<String>,
}

pub async fn run(command: HubCommand) -> anyhow::Result<ExitCode> {
    match command {
        HubCommand::Keygen(args) => keygen(args),
        HubCommand::Publish(args) => publish(args).await,
        HubCommand::Search(args) => search(args).await,
        HubCommand::Info(args) => info(args).await,
        HubCommand::Versions(args) => versions(args).await,
        HubCommand::Yank(args) => yank(args).await,
        HubCommand::Lock(args) => lock(args).await,
        HubCommand::Mirror(args) => mirror(args).await,
    }
}

fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let key = PublisherKey::generate()?;
    let public = key.write(&args.out, &args.comment)?;
    println!("key id {}", key.key_id());
    println!("secret key: {} (keep it secret)", args.out.display());
    println!(
        "public key: {} (operators trust it with --trusted-key)",
        public.display()
    );
    debug_assert_eq!(public, public_path(&args.out));
    Ok(ExitCode::SUCCESS)
}

async fn publish(args: PublishArgs) -> anyhow::Result<ExitCode> {
    let mut package = package::Package::load(&args.package)?;
    if let Some(key) = &args.key {
        package.sign(&PublisherKey::load(key)?)?;
    }
    let hub = args.hub.open(true).await?;
    let label = package.manifest.manifest.label();
    let started = std::time::Instant::now();
    match hub.publish(&package).await? {
        PublishOutcome::Published => println!(
            "published {label} ({} platform(s), signed by {}) in {:.2?}",
            package.manifest.manifest.artifacts.len(),
            package.manifest.manifest.publisher.key_id,
            started.elapsed()
        ),
        PublishOutcome::AlreadyPublished => {
            println!("{label} is already published with this content; nothing to do")
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The yank state shown by listings, which have no trusted keys: what the
/// signed statements claim, each checked only against the key it carries.
fn yank_shown(entry: &IndexEntry) -> (bool, String) {
    match entry.claimed_yank() {
        Some(s) => (
            s.yanked,
            format!("{} (signed by {})", s.reason, s.publisher.key_id),
        ),
        None => (false, String::new()),
    }
}

fn entry_json(entry: &IndexEntry) -> serde_json::Value {
    let (yanked, _) = yank_shown(entry);
    let claimed = entry.claimed_yank();
    serde_json::json!({
        "manifest": entry.manifest.json(),
        "yanked": yanked,
        "yank_reason": claimed.map(|s| s.reason.clone()).unwrap_or_default(),
        "yanked_by": claimed.map(|s| s.publisher.key_id.clone()).unwrap_or_default(),
        "yanks": entry.yanks.iter().map(|y| y.json().clone()).collect::<Vec<_>>(),
        "unsigned_yanked_flag": entry.legacy_yanked,
        "published_ms": entry.published_ms,
    })
}

async fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let hub = args.hub.open(false).await?;
    let found = hub.search(&args.text).await?;
    if args.json {
        let all: Vec<_> = found.iter().map(entry_json).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        println!("no plugin matches `{}`", args.text);
        return Ok(ExitCode::from(1));
    }
    for entry in &found {
        let m = &entry.manifest.manifest;
        println!(
            "{:<20} {:<12} {:<12} {}",
            m.name,
            m.version,
            m.namespace,
            if m.summary.is_empty() {
                m.resource_types.join(", ")
            } else {
                m.summary.clone()
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn info(args: InfoArgs) -> anyhow::Result<ExitCode> {
    let hub = args.hub.open(false).await?;
    let entry = match args.plugin.split_once('@') {
        Some((name, version)) => hub.entry(name, version).await?,
        None => {
            let mut versions = hub.versions(&args.plugin).await?;
            match versions.iter().rposition(|e| !e.claims_yanked()) {
                Some(i) => versions.swap_remove(i),
                None => versions.pop().context("no versions")?,
            }
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&entry_json(&entry))?);
        return Ok(ExitCode::SUCCESS);
    }
    let m = &entry.manifest.manifest;
    println!("{}", m.label());
    if !m.summary.is_empty() {
        println!("  {}", m.summary);
    }
    let (yanked, reason) = yank_shown(&entry);
    if yanked {
        println!("  YANKED: {reason}");
    }
    if entry.legacy_yanked != yanked {
        println!(
            "  (the entry's unsigned yanked flag says {}; it is ignored)",
            entry.legacy_yanked
        );
    }
    println!("  namespace      {}", m.namespace);
    println!("  protocol       {}", m.protocol);
    println!("  min orrery     {}", m.min_orrery);
    println!(
        "  license        {}",
        if m.license.is_empty() {
            "(none given)"
        } else {
            &m.license
        }
    );
    if m.announced_version != m.version {
        println!(
            "  announces      {} (version overridden at packaging)",
            m.announced_version
        );
    }
    println!(
        "  publisher key  {}{}",
        m.publisher.key_id,
        if m.signature.is_empty() {
            " (UNSIGNED)"
        } else {
            ""
        }
    );
    println!("  platforms");
    for (platform, artifact) in &m.artifacts {
        println!(
            "    {platform:<16} {} bytes  sha256 {}",
            artifact.size, artifact.sha256
        );
    }
    println!("  resource types");
    match hub.schema(&entry).await {
        Ok(Some(announcement)) => {
            for resource in &announcement.resources {
                println!("    {:<28} {}", resource.type_name, resource.description);
            }
        }
        _ => {
            for t in &m.resource_types {
                println!("    {t}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn versions(args: VersionsArgs) -> anyhow::Result<ExitCode> {
    let hub = args.hub.open(false).await?;
    let versions = hub.versions(&args.name).await?;
    if args.json {
        let all: Vec<_> = versions.iter().map(entry_json).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    for entry in versions.iter().rev() {
        let m = &entry.manifest.manifest;
        let platforms: Vec<&str> = m.artifacts.keys().map(String::as_str).collect();
        println!(
            "{:<12} protocol {}  {}{}",
            m.version,
            m.protocol,
            platforms.join(","),
            match yank_shown(entry) {
                (true, reason) => format!("  (yanked: {reason})"),
                _ => String::new(),
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn yank(args: YankArgs) -> anyhow::Result<ExitCode> {
    let (name, version) = args
        .plugin
        .split_once('@')
        .context("expected NAME@VERSION, e.g. local@1.1.0")?;
    let key = PublisherKey::load(&args.key)?;
    let hub = args.hub.open(false).await?;
    hub.yank(name, version, !args.undo, &args.reason, &key)
        .await?;
    if args.undo {
        println!("{name}@{version} is no longer yanked");
    } else {
        println!(
            "yanked {name}@{version}: new installs skip it; installs that pin it still get it"
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn lock(args: LockArgs) -> anyhow::Result<ExitCode> {
    let hub = args.hub.open(false).await?;
    let trusted = TrustedKeys::load_specs(&args.trusted_keys)?;
    // What this lock has seen of the index is kept beside it, so a later
    // `orrery hub lock` refuses an index that went backwards (docs/hub.md).
    let mut seen = args.lock_file.clone().into_os_string();
    seen.push(".seen.json");
    let installer = hub::Installer::new(hub, trusted.clone(), std::env::temp_dir())
        .with_seen_file(Some(seen.into()));
    let mut lock = LockFile::load(&args.lock_file)?;
    for text in &args.requirements {
        let requirement: Requirement = text.parse()?;
        let entry = installer
            .resolve_with(&requirement, args.allow_downgrade)
            .await?;
        entry.manifest.verify(&trusted)?;
        let m = &entry.manifest.manifest;
        let yank = entry.yank_state(&trusted).filter(|s| s.yanked);
        let pinned = lock.get(&m.name).map(|p| p.version.clone());
        let downgrade = check_move(
            &m.name,
            pinned.as_deref(),
            &m.version,
            yank.map(|s| s.reason.as_str()),
            args.allow_downgrade,
        )?;
        if downgrade {
            eprintln!(
                "warning: {} moves from {} to {}, a lower or a yanked version (--allow-downgrade)",
                m.name,
                pinned.as_deref().unwrap_or_default(),
                m.version
            );
        }
        lock.upsert(hub::LockEntry {
            name: m.name.clone(),
            version: m.version.clone(),
            requirement: requirement.req.to_string(),
            sha256: m
                .artifacts
                .iter()
                .map(|(p, a)| (p.clone(), a.sha256.clone()))
                .collect(),
        });
        println!("{requirement} -> {}", m.label());
    }
    lock.save(&args.lock_file)?;
    println!("wrote {}", args.lock_file.display());
    Ok(ExitCode::SUCCESS)
}

async fn mirror(args: MirrorArgs) -> anyhow::Result<ExitCode> {
    let from = args.hub.open(false).await?;
    let to = match (&args.to_dir, &args.to_nats_url) {
        (Some(dir), _) => Hub::dir(dir)?,
        (None, Some(url)) => Hub::nats(connect(url, &args.hub.nats_auth).await?).await?,
        (None, None) => anyhow::bail!("give --to-dir DIR or --to-nats-url URL"),
    };
    let copied = from.mirror_to(&to).await?;
    println!("copied {copied} package version(s)");
    Ok(ExitCode::SUCCESS)
}

/// `orrery plugin package`.
pub async fn package_cmd(args: PackageArgs) -> anyhow::Result<ExitCode> {
    let mut options = package::PackageOptions::new(&args.binary);
    if let Some(platform) = args.platform {
        options.platform = platform;
    }
    for extra in &args.extra {
        let (platform, path) = extra
            .split_once('=')
            .with_context(|| format!("--add {extra}: expected PLATFORM=PATH"))?;
        options
            .extra_binaries
            .push((platform.to_owned(), PathBuf::from(path)));
    }
    options.version = args.version;
    options.license = args.license;
    options.summary = args.summary;
    options.min_orrery = args.min_orrery;
    let key = args.key.as_deref().map(PublisherKey::load).transpose()?;
    let built = package::build(&options, key.as_ref(), &args.out).await?;
    let m = &built.manifest.manifest;
    println!(
        "packaged {} ({} resource type(s), protocol {}) in {}",
        m.label(),
        m.resource_types.len(),
        m.protocol,
        args.out.display()
    );
    for (platform, artifact) in &m.artifacts {
        println!(
            "  {platform}: {} bytes, sha256 {}",
            artifact.size, artifact.sha256
        );
    }
    if key.is_some() {
        println!("  signed by {}", m.publisher.key_id);
    } else {
        println!("  UNSIGNED: sign with `orrery hub publish --key KEYFILE` or package with --key");
    }
    Ok(ExitCode::SUCCESS)
}
