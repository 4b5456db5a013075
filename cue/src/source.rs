//! Source positions: files are identified by a [`FileId`]; a [`Span`] is a byte range in one file.
//! Line and column are computed only when a diagnostic is rendered.

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
