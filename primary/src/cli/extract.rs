//! `orrery extract`: a stack document of recorded (or discovered,
//! unmanaged) resources, to adopt or reproduce them (the pure part is
//! `orrery_core::extract`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use orrery_primary::state;

#[derive(clap::Args, Debug)]
pub struct ExtractArgs {
    /// The stack whose recorded resources to write.
    #[arg(long, required_unless_present = "unmanaged")]
    pub stack: Option<String>,
    /// Discovered resources no stack manages instead (`orrery discover`).
    #[arg(long, conflicts_with = "stack")]
    pub unmanaged: bool,
    /// Only resources on this target. Repeatable.
    #[arg(long = "target", value_name = "T")]
    pub targets: Vec<String>,
    /// Only resources whose type matches, `*` matching any text (e.g.
    /// `Local::Fs::*`).
    #[arg(long = "type", value_name = "PATTERN")]
    pub type_pattern: Option<String>,
    /// The document's `stack:` (default: the stack's name, else `adopted`).
    #[arg(long)]
    pub name: Option<String>,
    /// Write the document to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The plugins' schemas (see `orrery validate --schemas`). Default:
    /// <data-dir>/schemas.json.
    #[arg(long, value_name = "FILE")]
    pub schemas: Option<PathBuf>,
    /// Directory of the embedded state store.
    #[arg(long, env = "ORRERY_DATA_DIR", default_value = ".orrery")]
    pub data_dir: PathBuf,
    /// PostgreSQL URL of the state store, instead of --data-dir's.
    #[arg(long, env = "ORRERY_DATABASE_URL")]
    pub database_url: Option<String>,
}

/// Whether `text` matches `pattern`, where `*` matches any text.
fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

pub fn extract_cmd(args: ExtractArgs) -> anyhow::Result<ExitCode> {
    use orrery_primary::discovery::core::is_discovered;
    let store = match &args.database_url {
        Some(url) => state::open(url)?,
        None => state::open_dir(&args.data_dir)?,
    };
    let (catalog, _) = super::schema_cache::catalog(args.schemas.as_deref(), &args.data_dir)?;
    let resources: Vec<_> = store
        .resources(args.stack.as_deref())?
        .into_iter()
        .filter(|r| is_discovered(r) == args.unmanaged)
        .filter(|r| args.targets.is_empty() || args.targets.contains(&r.target))
        .filter(|r| {
            args.type_pattern
                .as_deref()
                .is_none_or(|p| matches(p, &r.resource_type))
        })
        .collect();
    let used: BTreeSet<&str> = resources.iter().map(|r| r.target.as_str()).collect();
    let stacks = match &args.stack {
        Some(s) => vec![s.clone()],
        // Discovered resources are on targets some stack declares.
        None => store.command_stacks()?,
    };
    let mut targets = Vec::new();
    for s in &stacks {
        for t in store.targets(s)? {
            let wanted =
                used.contains(t.name.as_str()) || (args.stack.is_some() && args.targets.is_empty());
            if wanted
                && !targets
                    .iter()
                    .any(|k: &orrery_primary::stack::TargetDecl| k.name == t.name)
            {
                targets.push(t);
            }
        }
    }
    let name = args
        .name
        .clone()
        .or_else(|| args.stack.clone())
        .unwrap_or_else(|| "adopted".to_owned());
    let text = orrery_core::extract::extract(&name, &targets, &resources, &catalog)?;
    match &args.output {
        Some(file) => std::fs::write(file, &text)
            .with_context(|| format!("cannot write {}", file.display()))?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn type_patterns() {
        use super::matches;
        assert!(matches("Local::Fs::*", "Local::Fs::File"));
        assert!(matches("*::File", "Local::Fs::File"));
        assert!(matches("Local::*::File", "Local::Fs::File"));
        assert!(!matches("Local::*::Dir", "Local::Fs::File"));
        assert!(matches("Local::Fs::File", "Local::Fs::File"));
        assert!(!matches("Local::Fs", "Local::Fs::File"));
    }
}
