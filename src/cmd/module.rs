//! `opm-operator module ...`: publish, list versions, fetch, and tidy CUE modules; sign and
//! verify them, and generate signing keys (`sign`).
//!
//! Every command takes the registry mapping from `--registry` or `CUE_REGISTRY` (syntax in
//! `mapping`), or `--layout DIR` to use one OCI image-layout directory for every module (it wins
//! over the mapping). Credentials come from the docker config file (see `auth`). Output goes to
//! stdout; errors are returned to `main`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::registry::cache::Cache;
use crate::registry::client::{ModuleRegistry, RegistryConfig};
use crate::registry::mapping::{Location, Mapping};
use crate::registry::{zipfile, Error};
use cue::module::ModuleFile;

mod sign;

/// Registry selection shared by the subcommands.
#[derive(clap::Args, Debug, Clone)]
pub struct RegistryArgs {
    /// Registry mapping, CUE_REGISTRY syntax (`prefix=host/repo[+insecure],host/repo`).
    #[arg(long, env = "CUE_REGISTRY", default_value = "")]
    pub registry: String,
    /// Use this OCI image-layout directory for every module instead of the mapping.
    #[arg(long)]
    pub layout: Option<PathBuf>,
    /// Module cache directory (default: $OPM_CACHE_DIR, else the user cache directory).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Do not use the on-disk module cache.
    #[arg(long)]
    pub no_cache: bool,
    /// Overall deadline of each registry operation, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
}

/// `opm-operator module ...` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ModuleCommand {
    /// Publish the module in DIR as VERSION (the major must match the module path's @vN).
    Publish {
        /// The module directory (containing cue.mod/module.cue).
        dir: PathBuf,
        /// The version to publish, e.g. v0.1.0.
        version: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// List the published versions of PATH@vN, ascending.
    Versions {
        /// Module path with major suffix, e.g. fixtures.test/schema@v0.
        path: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Fetch PATH@VERSION, verify it, and write its files into --out.
    Fetch {
        /// Module coordinate, e.g. fixtures.test/schema@v0.1.0.
        coordinate: String,
        /// Output directory (created; must be empty if it exists).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Print the tidy cue.mod/module.cue of the module in DIR (its deps closed under minimal
    /// version selection).
    Tidy {
        /// The module directory.
        dir: PathBuf,
        /// Rewrite DIR/cue.mod/module.cue instead of printing.
        #[arg(long)]
        write: bool,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Sign the published PATH@VERSION as cosign does (the signature goes to the tag
    /// sha256-<digest>.sig of the module's repository). The key is a PEM private key: cosign's
    /// encrypted key (password from COSIGN_PASSWORD), PKCS#8 or SEC1.
    Sign {
        /// Module coordinate, e.g. fixtures.test/modules/demo@v0.1.0.
        coordinate: String,
        /// The private key file (cosign.key).
        #[arg(long)]
        key: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Verify that PATH@VERSION is signed with the public key(s) of --key, and that it passes
    /// every fetch check.
    Verify {
        /// Module coordinate.
        coordinate: String,
        /// A PEM public key file (cosign.pub); repeat for several (any one may have signed).
        #[arg(long, required = true)]
        key: Vec<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Write a new ECDSA P-256 key pair as cosign does: PREFIX.key (encrypted with
    /// COSIGN_PASSWORD) and PREFIX.pub.
    GenerateKeyPair {
        /// Output prefix (default: cosign).
        #[arg(long, default_value = "cosign")]
        output_key_prefix: PathBuf,
    },
}

fn build(args: &RegistryArgs, use_cache: bool) -> Result<ModuleRegistry, Error> {
    let mapping = match &args.layout {
        Some(dir) => Mapping::single(Location::Layout { dir: dir.clone() }),
        None => Mapping::parse(&args.registry).map_err(|message| Error::Mapping {
            spec: args.registry.clone(),
            message,
        })?,
    };
    let mut cfg = RegistryConfig::new(mapping).with_docker_config()?;
    cfg.timeouts.deadline = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|d| !d.is_zero() && *d <= Duration::from_secs(24 * 3600))
        .ok_or_else(|| {
            Error::Usage(format!(
                "--timeout must be a number of seconds in (0, 86400], got {}",
                args.timeout
            ))
        })?;
    if use_cache && !args.no_cache {
        cfg.cache_dir = args.cache_dir.clone().or_else(Cache::default_root);
    }
    ModuleRegistry::new(cfg)
}

fn out(line: &str) -> Result<(), Error> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").map_err(|e| Error::Io {
        path: PathBuf::from("<stdout>"),
        source: e,
    })
}

/// Runs a `module` subcommand.
pub fn run_module_command(cmd: ModuleCommand) -> Result<(), Error> {
    match cmd {
        ModuleCommand::Publish {
            dir,
            version,
            registry,
        } => {
            let reg = build(&registry, false)?;
            let p = reg.publish(&dir, &version)?;
            out(&format!(
                "{} {} {}:{} {}",
                if p.created { "published" } else { "unchanged" },
                p.module,
                p.location,
                p.module.version,
                p.manifest_digest
            ))
        }
        ModuleCommand::Versions { path, registry } => {
            let reg = build(&registry, false)?;
            for v in reg.list_versions(&path)? {
                out(&v)?;
            }
            Ok(())
        }
        ModuleCommand::Fetch {
            coordinate,
            out: dir,
            registry,
        } => {
            let m = cue::module::parse_coordinate(&coordinate)
                .map_err(|e| Error::Usage(e.to_string()))?;
            let reg = build(&registry, true)?;
            let f = reg.fetch_module(&m)?;
            write_tree(&dir, &f.files)?;
            out(&format!(
                "fetched {} ({} files, zip {}) into {}",
                m,
                f.files.len(),
                f.meta.zip_digest,
                dir.display()
            ))
        }
        ModuleCommand::Sign {
            coordinate,
            key,
            registry,
        } => sign::sign(&coordinate, &key, &build(&registry, false)?),
        ModuleCommand::Verify {
            coordinate,
            key,
            registry,
        } => sign::verify(&coordinate, &key, &build(&registry, false)?),
        ModuleCommand::GenerateKeyPair { output_key_prefix } => {
            sign::generate_key_pair(&output_key_prefix)
        }
        ModuleCommand::Tidy {
            dir,
            write,
            registry,
        } => {
            let path = dir.join(zipfile::MODULE_FILE);
            let bytes = std::fs::read(&path).map_err(|e| Error::Io {
                path: path.clone(),
                source: e,
            })?;
            let main = ModuleFile::parse(&bytes).map_err(|message| Error::ModuleFile {
                path: path.clone(),
                message,
            })?;
            let reg = build(&registry, true)?;
            let tidy = cue::module::tidy(&main, &reg)?;
            let text = tidy.to_cue();
            if write {
                std::fs::write(&path, text).map_err(|e| Error::Io { path, source: e })
            } else {
                let mut stdout = std::io::stdout().lock();
                stdout.write_all(text.as_bytes()).map_err(|e| Error::Io {
                    path: PathBuf::from("<stdout>"),
                    source: e,
                })
            }
        }
    }
}

/// Writes extracted module files under `dir`, which must not exist or be empty.
pub fn write_tree(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), Error> {
    let io = |path: &Path, e: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        source: e,
    };
    if dir.exists() {
        let mut rd = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
        if rd.next().is_some() {
            return Err(Error::Usage(format!(
                "output directory {} is not empty",
                dir.display()
            )));
        }
    }
    for (p, data) in files {
        zipfile::check_entry_path(p).map_err(|e| Error::Usage(format!("{p}: {e}")))?;
        let target = dir.join(p);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        std::fs::write(&target, data).map_err(|e| io(&target, e))?;
    }
    Ok(())
}
