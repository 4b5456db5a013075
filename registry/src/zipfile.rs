//! Module zips: safe extraction of a downloaded zip, and creation from a module directory
//! (docs/design/render.md §2.2, CUE's `mod/modzip`).
//!
//! Extraction refuses, with a message naming the entry:
//! - more than [`ZipLimits::max_entries`] entries, a total uncompressed size above
//!   [`ZipLimits::max_total_size`] (counted on the bytes actually inflated, not on the sizes the zip
//!   declares), a zip blob above [`ZipLimits::max_zip_size`], and an entry whose uncompressed size
//!   exceeds [`ZipLimits::max_ratio`] times its compressed size once past 1 MiB (a zip bomb);
//! - absolute paths, `..` or `.` elements, empty elements, backslashes, NUL and other control
//!   characters;
//! - symlinks and any other non-regular entry;
//! - two names equal under Unicode case folding;
//! - `cue.mod/local-module.cue`, and any `cue.mod` directory other than the top-level one;
//! - a missing `cue.mod/module.cue`.
//!
//! Directory entries are skipped; permissions and timestamps are ignored.
//!
//! Creation (for publish) includes the regular files of the module directory, sorted by path,
//! with fixed timestamps so the same tree always gives the same zip and digest. It leaves out VCS
//! directories (`.git`, `.hg`, `.svn`, `.bzr`), nested modules (subdirectories with their own
//! `cue.mod`), and everything in `cue.mod/` except `module.cue` (so `local-module.cue` and the
//! legacy `pkg`/`gen`/`usr` trees are never published). Symlinks and other irregular files are an
//! error, as in CUE.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;

/// Limits applied when extracting a module zip.
#[derive(Clone, Debug)]
pub struct ZipLimits {
    /// Maximum size of the zip blob itself.
    pub max_zip_size: u64,
    /// Maximum total uncompressed size.
    pub max_total_size: u64,
    /// Maximum number of entries.
    pub max_entries: usize,
    /// Maximum uncompressed/compressed ratio of one entry larger than 1 MiB.
    pub max_ratio: u64,
}

impl Default for ZipLimits {
    fn default() -> Self {
        ZipLimits {
            max_zip_size: 500 << 20,
            max_total_size: 500 << 20,
            max_entries: 20_000,
            max_ratio: 200,
        }
    }
}

/// The path of the module file inside a module.
pub const MODULE_FILE: &str = "cue.mod/module.cue";

/// Extracts a module zip into `(path, contents)` pairs, sorted by path.
pub fn extract(zip: &[u8], limits: &ZipLimits) -> Result<Vec<(String, Vec<u8>)>, String> {
    if zip.len() as u64 > limits.max_zip_size {
        return Err(format!(
            "zip is {} bytes, over the limit of {} bytes",
            zip.len(),
            limits.max_zip_size
        ));
    }
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip))
        .map_err(|e| format!("not a valid zip: {e}"))?;
    if archive.len() > limits.max_entries {
        return Err(format!(
            "zip has {} entries, over the limit of {}",
            archive.len(),
            limits.max_entries
        ));
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut total: u64 = 0;
    let mut out = Vec::new();
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| format!("zip entry {i}: {e}"))?;
        let name = std::str::from_utf8(entry.name_raw())
            .map_err(|_| format!("zip entry {i}: name is not valid UTF-8"))?
            .to_string();
        let is_dir = name.ends_with('/');
        let path = name.trim_end_matches('/');
        check_entry_path(path).map_err(|e| format!("zip entry {name:?}: {e}"))?;
        if entry.is_symlink() {
            return Err(format!("zip entry {name:?} is a symlink"));
        }
        if let Some(mode) = entry.unix_mode() {
            let kind = mode & 0o170000;
            if kind != 0 && kind != 0o100000 && kind != 0o040000 {
                return Err(format!(
                    "zip entry {name:?} is not a regular file (mode {mode:o})"
                ));
            }
        }
        if !seen.insert(fold(path)) {
            return Err(format!(
                "zip has two entries named {path:?} (compared ignoring case)"
            ));
        }
        if is_dir {
            continue;
        }
        if path == "cue.mod/local-module.cue" {
            return Err("zip contains cue.mod/local-module.cue, which may not be published".into());
        }
        let budget = limits.max_total_size.saturating_sub(total);
        let declared = entry.size();
        if declared > budget {
            return Err(format!(
                "zip entry {name:?} ({declared} bytes) takes the module over the size limit of {} bytes",
                limits.max_total_size
            ));
        }
        let compressed = entry.compressed_size().max(1);
        if declared > (1 << 20) && declared / compressed > limits.max_ratio {
            return Err(format!(
                "zip entry {name:?} has a compression ratio over {} (possible zip bomb)",
                limits.max_ratio
            ));
        }
        let mut data = Vec::new();
        (&mut entry)
            .take(declared.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| format!("zip entry {name:?}: {e}"))?;
        if data.len() as u64 != declared {
            return Err(format!(
                "zip entry {name:?} inflates to more or fewer bytes than declared"
            ));
        }
        total += data.len() as u64;
        out.push((path.to_string(), data));
    }
    if !out.iter().any(|(p, _)| p == MODULE_FILE) {
        return Err(format!("zip has no {MODULE_FILE}"));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Unicode case folding, close enough for collision checks.
fn fold(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// Checks a relative, `/`-separated path for use as a module file path.
pub fn check_entry_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("empty path".into());
    }
    if path.starts_with('/') || path.contains('\\') || path.contains(':') && is_drive(path) {
        return Err("absolute path".into());
    }
    if path.chars().any(|c| c.is_control()) {
        return Err("control character in path".into());
    }
    let elems: Vec<&str> = path.split('/').collect();
    for (i, e) in elems.iter().enumerate() {
        if e.is_empty() || *e == "." || *e == ".." {
            return Err(format!("invalid path element {e:?}"));
        }
        if *e == "cue.mod" && i != 0 {
            return Err("nested cue.mod directory".into());
        }
    }
    Ok(())
}

fn is_drive(path: &str) -> bool {
    let b = path.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// Files of a module directory as they are published: `(relative path, contents)`, sorted.
pub fn collect_module_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    walk(dir, "", &mut out)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn walk(root: &Path, rel: &str, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), String> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let rd = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut entries = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| format!("{}: {e}", dir.display()))?;
        entries.push(ent);
    }
    entries.sort_by_key(|e| e.file_name());
    for ent in entries {
        let name = ent
            .file_name()
            .into_string()
            .map_err(|n| format!("{}: file name {n:?} is not UTF-8", dir.display()))?;
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let ft = ent
            .file_type()
            .map_err(|e| format!("{}: {e}", ent.path().display()))?;
        if ft.is_symlink() {
            return Err(format!("{path}: symlinks cannot be published in a module"));
        }
        if ft.is_dir() {
            if matches!(name.as_str(), ".git" | ".hg" | ".svn" | ".bzr") {
                continue;
            }
            if rel.is_empty() && name == "cue.mod" {
                let mf = ent.path().join("module.cue");
                if mf.is_file() {
                    let data = std::fs::read(&mf).map_err(|e| format!("{}: {e}", mf.display()))?;
                    out.push((MODULE_FILE.to_string(), data));
                }
                continue;
            }
            if ent.path().join("cue.mod").exists() {
                // A nested module is published on its own.
                continue;
            }
            walk(root, &path, out)?;
        } else if ft.is_file() {
            check_entry_path(&path).map_err(|e| format!("{path}: {e}"))?;
            let data = std::fs::read(ent.path()).map_err(|e| format!("{path}: {e}"))?;
            out.push((path, data));
        } else {
            return Err(format!("{path}: not a regular file"));
        }
    }
    Ok(())
}

/// Builds a deterministic zip from `(path, contents)` pairs.
pub fn create(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (path, data) in files {
        check_entry_path(path).map_err(|e| format!("{path}: {e}"))?;
        w.start_file(path.as_str(), opts)
            .map_err(|e| format!("{path}: {e}"))?;
        w.write_all(data).map_err(|e| format!("{path}: {e}"))?;
    }
    let cursor = w.finish().map_err(|e| e.to_string())?;
    Ok(cursor.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        list.iter()
            .map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))
            .collect()
    }

    fn raw_zip(build: impl FnOnce(&mut zip::ZipWriter<std::io::Cursor<Vec<u8>>>)) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        build(&mut w);
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn create_then_extract_round_trips_deterministically() {
        let f = files(&[
            ("cue.mod/module.cue", "module: \"a.b/c@v0\""),
            ("x.cue", "package c\nx: 1"),
            ("sub/y.cue", "package sub"),
        ]);
        let z1 = create(&f).unwrap();
        let z2 = create(&f).unwrap();
        assert_eq!(z1, z2);
        let out = extract(&z1, &ZipLimits::default()).unwrap();
        let mut want = f.clone();
        want.sort();
        assert_eq!(out, want);
    }

    #[test]
    fn unsafe_entries_are_refused() {
        let opts = zip::write::SimpleFileOptions::default();
        let mf = |w: &mut zip::ZipWriter<std::io::Cursor<Vec<u8>>>| {
            w.start_file("cue.mod/module.cue", opts).unwrap();
            w.write_all(b"module: \"a.b/c@v0\"").unwrap();
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                raw_zip(|w| {
                    mf(w);
                    w.start_file("../evil.cue", opts).unwrap();
                }),
                "invalid path element",
            ),
            (
                raw_zip(|w| {
                    mf(w);
                    w.start_file("/etc/passwd", opts).unwrap();
                }),
                "absolute path",
            ),
            (
                raw_zip(|w| {
                    mf(w);
                    w.add_symlink("link.cue", "/etc/passwd", opts).unwrap();
                }),
                "symlink",
            ),
            (
                raw_zip(|w| {
                    mf(w);
                    w.start_file("cue.mod/local-module.cue", opts).unwrap();
                }),
                "local-module.cue",
            ),
            (
                raw_zip(|w| {
                    mf(w);
                    w.start_file("A.cue", opts).unwrap();
                    w.start_file("a.cue", opts).unwrap();
                }),
                "two entries",
            ),
            (
                raw_zip(|w| {
                    w.start_file("x.cue", opts).unwrap();
                }),
                "no cue.mod/module.cue",
            ),
            (
                raw_zip(|w| {
                    mf(w);
                    w.start_file("sub/cue.mod/module.cue", opts).unwrap();
                }),
                "nested cue.mod",
            ),
        ];
        for (z, want) in cases {
            let e = extract(&z, &ZipLimits::default()).unwrap_err();
            assert!(e.contains(want), "want {want:?}, got {e}");
        }
    }

    #[test]
    fn limits_are_enforced() {
        let big = vec![b'a'; 4 << 20];
        let z = create(&[
            (
                "cue.mod/module.cue".to_string(),
                b"module: \"a.b/c@v0\"".to_vec(),
            ),
            ("big.cue".to_string(), big),
        ])
        .unwrap();
        let small = ZipLimits {
            max_total_size: 1 << 20,
            ..ZipLimits::default()
        };
        assert!(extract(&z, &small).unwrap_err().contains("size limit"));
        let strict_ratio = ZipLimits {
            max_ratio: 10,
            ..ZipLimits::default()
        };
        assert!(extract(&z, &strict_ratio)
            .unwrap_err()
            .contains("compression ratio"));
        let few = ZipLimits {
            max_entries: 1,
            ..ZipLimits::default()
        };
        assert!(extract(&z, &few).unwrap_err().contains("entries"));
        let tiny_zip = ZipLimits {
            max_zip_size: 10,
            ..ZipLimits::default()
        };
        assert!(extract(&z, &tiny_zip).unwrap_err().contains("zip is"));
    }

    #[test]
    fn collect_skips_vcs_nested_modules_and_cue_mod_extras() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("cue.mod/pkg/x")).unwrap();
        std::fs::write(p.join("cue.mod/module.cue"), "module: \"a.b/c@v0\"").unwrap();
        std::fs::write(p.join("cue.mod/local-module.cue"), "deps: {}").unwrap();
        std::fs::write(p.join("cue.mod/pkg/x/x.cue"), "").unwrap();
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::write(p.join(".git/HEAD"), "").unwrap();
        std::fs::create_dir_all(p.join("nested/cue.mod")).unwrap();
        std::fs::write(p.join("nested/cue.mod/module.cue"), "").unwrap();
        std::fs::write(p.join("nested/n.cue"), "").unwrap();
        std::fs::create_dir_all(p.join("pkg")).unwrap();
        std::fs::write(p.join("pkg/p.cue"), "package pkg").unwrap();
        std::fs::write(p.join("top.cue"), "package c").unwrap();
        let got: Vec<String> = collect_module_files(p)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(got, ["cue.mod/module.cue", "pkg/p.cue", "top.cue"]);
    }
}
