//! Source positions: files are identified by a [`FileId`]; a [`Span`] is a byte range in one file.
//! Line and column are computed only when a diagnostic is rendered, by [`SourceMap::line_col`]
//! from a line index built lazily per file.
//!
//! Shared files: a file parsed once and shared read-only by many builds (the parse cache of
//! `module::ParseCache`) gets a process-wide id at or above [`SHARED_FILE_BASE`], so its syntax
//! tree's spans mean the same in every [`SourceMap`] that registers it with
//! [`SourceMap::add_shared`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The first id of shared files; ids below it are dense per [`SourceMap`].
pub const SHARED_FILE_BASE: u32 = 1 << 31;

static NEXT_SHARED: AtomicU32 = AtomicU32::new(SHARED_FILE_BASE);

/// Identifies one source file within a build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range `[start, end)` in one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// The file the range is in.
    pub file: FileId,
    /// First byte offset.
    pub start: u32,
    /// One past the last byte offset.
    pub end: u32,
}

impl Span {
    /// A span covering `start..end` in `file`.
    pub fn new(file: FileId, start: u32, end: u32) -> Self {
        Span { file, start, end }
    }

    /// The smallest span covering both (same file assumed; the first file wins otherwise).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// One file of a [`SourceMap`]; shared files are held by `Arc` in every map that uses them.
#[derive(Debug)]
pub struct SourceFile {
    name: String,
    text: std::sync::Arc<str>,
    /// Byte offsets of line starts, computed on first use.
    lines: std::sync::OnceLock<Vec<u32>>,
}

/// A line and column, both 1-based; the column counts characters (Unicode scalar values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LineCol {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
}

/// The files of a build: names and contents by [`FileId`]. The line index of a file is built the
/// first time a position in it is asked for.
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
    shared: HashMap<u32, Arc<SourceFile>>,
}

/// A new shared file with a process-wide id (see the module docs).
pub fn new_shared_file(
    name: impl Into<String>,
    text: impl Into<Arc<str>>,
) -> (FileId, Arc<SourceFile>) {
    let id = NEXT_SHARED.fetch_add(1, Ordering::Relaxed);
    let f = SourceFile {
        name: name.into(),
        text: text.into(),
        lines: std::sync::OnceLock::new(),
    };
    (FileId(id), Arc::new(f))
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file and returns its id (ids are dense, in insertion order).
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<std::sync::Arc<str>>) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile {
            name: name.into(),
            text: text.into(),
            lines: std::sync::OnceLock::new(),
        });
        id
    }

    /// Registers a shared file under its process-wide id.
    pub fn add_shared(&mut self, id: FileId, file: Arc<SourceFile>) {
        self.shared.insert(id.0, file);
    }

    /// The shared file registered under `id`, if any.
    pub fn shared(&self, id: FileId) -> Option<Arc<SourceFile>> {
        self.shared.get(&id.0).cloned()
    }

    fn file(&self, id: FileId) -> Option<&SourceFile> {
        if id.0 >= SHARED_FILE_BASE {
            self.shared.get(&id.0).map(|f| f.as_ref())
        } else {
            self.files.get(id.0 as usize)
        }
    }

    /// Number of files (own and shared).
    pub fn len(&self) -> usize {
        self.files.len() + self.shared.len()
    }

    /// `true` if no file was added.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.shared.is_empty()
    }

    /// The name of a file (`""` for an unknown id).
    pub fn name(&self, file: FileId) -> &str {
        self.file(file).map_or("", |f| &f.name)
    }

    /// The contents of a file (`""` for an unknown id).
    pub fn text(&self, file: FileId) -> &str {
        self.file(file).map_or("", |f| &f.text)
    }

    /// The source text a span covers (`""` if out of range).
    pub fn snippet(&self, span: Span) -> &str {
        self.text(span.file)
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
    }

    /// `(file name, line, byte column)` of a span's start, 1-based, as `cue` prints positions
    /// (Go's `token.Position` counts columns in bytes); `None` for an unknown file.
    pub fn position(&self, span: Span) -> Option<(&str, usize, usize)> {
        let f = self.file(span.file)?;
        let offset = (span.start as usize).min(f.text.len());
        let lines = self.lines(f);
        let line = lines.partition_point(|&s| s as usize <= offset).max(1);
        let start = lines.get(line - 1).copied().unwrap_or(0) as usize;
        Some((&f.name, line, offset - start + 1))
    }

    fn lines<'a>(&self, f: &'a SourceFile) -> &'a [u32] {
        f.lines.get_or_init(|| {
            let mut v = vec![0u32];
            v.extend(
                f.text
                    .bytes()
                    .enumerate()
                    .filter(|(_, b)| *b == b'\n')
                    .map(|(i, _)| i as u32 + 1),
            );
            v
        })
    }

    /// The line and column of a span's start. Offsets past the end clamp to the end of the file.
    pub fn line_col(&self, span: Span) -> LineCol {
        self.offset_line_col(span.file, span.start)
    }

    /// The line and column of byte `offset` in `file`.
    pub fn offset_line_col(&self, file: FileId, offset: u32) -> LineCol {
        let Some(f) = self.file(file) else {
            return LineCol { line: 1, col: 1 };
        };
        let lines = self.lines(f);
        let mut offset = (offset as usize).min(f.text.len());
        while !f.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = lines.partition_point(|&s| s as usize <= offset).max(1);
        let start = lines.get(line - 1).copied().unwrap_or(0) as usize;
        let col = f.text.get(start..offset).map_or(0, |s| s.chars().count());
        LineCol {
            line: line as u32,
            col: col as u32 + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_is_one_based_and_counts_chars() {
        let mut m = SourceMap::new();
        let a = m.add("a.cue", "x: 1\nyé: 2\n");
        let b = m.add("b.cue", "");
        assert_eq!(m.name(a), "a.cue");
        assert_eq!(m.len(), 2);
        assert_eq!(m.line_col(Span::new(a, 0, 1)), LineCol { line: 1, col: 1 });
        assert_eq!(m.line_col(Span::new(a, 5, 6)), LineCol { line: 2, col: 1 });
        // `é` is two bytes but one column.
        assert_eq!(m.line_col(Span::new(a, 8, 9)), LineCol { line: 2, col: 3 });
        assert_eq!(
            m.line_col(Span::new(a, 13, 13)),
            LineCol { line: 3, col: 1 }
        );
        assert_eq!(
            m.line_col(Span::new(a, 999, 999)),
            LineCol { line: 3, col: 1 }
        );
        assert_eq!(m.line_col(Span::new(b, 0, 0)), LineCol { line: 1, col: 1 });
        assert_eq!(m.snippet(Span::new(a, 0, 4)), "x: 1");
        assert_eq!(
            m.line_col(Span::new(FileId(9), 0, 0)),
            LineCol { line: 1, col: 1 }
        );
    }
}
