//! `sweep suite derive`: a sub-suite of a sweep's suite, from a coordinator or a database,
//! printed or written to a new file.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use sweep_domain::derive::{DeriveRequest, DeriveRule, Filter, Pick};

use super::{client, local};
use crate::cli::DeriveArgs;

/// Derives the suite and prints it, or writes it to `--out`; the counts go to stderr.
pub async fn derive(args: DeriveArgs) -> anyhow::Result<ExitCode> {
    let request = request_of(&args);
    let (text, summary) = match super::local_database(&args.source) {
        Some(db) => {
            let derived = local::derive(db, args.id, &request).await?;
            let summary = derived.summary();
            (derived.text, summary)
        }
        None => client::derive(&super::api(&args.source)?, args.id, &request).await?,
    };
    match &args.out {
        None => print!("{text}"),
        Some(path) => {
            write_suite(path, &text, args.force)?;
            eprintln!("wrote {}", path.display());
        }
    }
    eprintln!("sweep {}: {summary}", args.id);
    Ok(ExitCode::SUCCESS)
}

fn request_of(args: &DeriveArgs) -> DeriveRequest {
    // clap guarantees exactly one of the three, and --seed together with --random.
    let filter = if args.solved {
        Filter::Solved
    } else if args.unsolved {
        Filter::Unsolved
    } else {
        Filter::Any
    };
    let pick = match (args.first, args.random, args.seed) {
        (Some(n), _, _) => Pick::First(n),
        (None, Some(count), Some(seed)) => Pick::Random { count, seed },
        _ => Pick::All,
    };
    DeriveRequest {
        build: args.build.clone(),
        suite: args.suite.clone(),
        rule: DeriveRule {
            filter,
            min_nodes: args.min_nodes,
            max_nodes: args.max_nodes,
            pick,
        },
        partial: args.partial,
        limit: args.limit,
    }
}

/// Writes the file, refusing to replace an existing one unless `force`.
fn write_suite(path: &Path, text: &str, force: bool) -> anyhow::Result<()> {
    if path.extension().and_then(|e| e.to_str()) != Some("epd") {
        eprintln!(
            "warning: {} does not end in .epd, so a suites directory will not load it",
            path.display()
        );
    }
    let mut file = if force {
        std::fs::File::create(path)
    } else {
        // create_new fails atomically if the file exists, so nothing is ever clobbered.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
    }
    .or_else(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            bail!("{} exists; pass --force to overwrite it", path.display())
        }
        Err(e).with_context(|| format!("creating {}", path.display()))
    })?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
