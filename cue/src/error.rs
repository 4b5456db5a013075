//! The crate's one error type, [`Error`] (docs/design/conventions.md §6.1), and which error type goes where.
//!
//! - CUE errors are values: building, validating and exporting report [`Diagnostic`]s (module
//!   `diagnostics`), never an [`Error`].
//! - A failure is typed where it arises, as plain data saying what went wrong: [`PathError`]
//!   (path text), [`FsError`] and [`RegistryError`] (the two I/O seams: implementations outside
//!   the crate return them, callers clone and compare them), [`LoadError`] (the loader's
//!   collected problems) and [`ModuleFileError`] (a position in `cue.mod/module.cue`, carried by
//!   a `LoadError`), [`MemoryExceeded`] (an evaluation's memory budget spent: the budget, the
//!   figure reached, the path being evaluated). Each implements `Display`, the text callers and goldens see, and none is a
//!   `std::error::Error`.
//! - [`Error`] is the crate's one `std::error::Error`: [`crate::Value::decode`] returns it, and
//!   every detail converts into it (`From`) where a caller needs an error to carry as a source or
//!   to pass on with `?`. A variant's text is its detail's text, byte for byte; a caller matches
//!   on the variant and its detail, never on the text.

use crate::diagnostics::{Diagnostic, MemoryExceeded};
use crate::module::{FsError, LoadError, ModuleFileError, RegistryError};
use crate::path::PathError;

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can fail in the crate outside evaluation (see the module docs).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A path text does not parse ([`crate::Path::parse`]).
    #[error("{0}")]
    Path(PathError),
    /// [`crate::Value::decode`]: the value has errors or is not concrete.
    #[error("value does not export: {}", .0.first().map_or("", |d| d.message.as_str()))]
    Eval(Vec<Diagnostic>),
    /// [`crate::Value::decode`]: the data does not have the shape of the target type.
    #[error("value does not decode: {0}")]
    Shape(#[source] serde_json::Error),
    /// A [`crate::module::FileSystem`] could not read a file or directory.
    #[error("{0}")]
    Fs(FsError),
    /// A [`crate::module::Registry`] could not provide a module.
    #[error("{0}")]
    Registry(RegistryError),
    /// Loading a package or one of its imports failed ([`crate::module::load`]).
    #[error("{0}")]
    Load(LoadError),
    /// A `cue.mod/module.cue` is invalid.
    #[error("{0}")]
    ModuleFile(ModuleFileError),
    /// An evaluation ran out of its memory budget ([`crate::Runtime::memory_exceeded`]).
    #[error("{0}")]
    Memory(MemoryExceeded),
}

impl From<MemoryExceeded> for Error {
    fn from(e: MemoryExceeded) -> Self {
        Error::Memory(e)
    }
}

impl From<PathError> for Error {
    fn from(e: PathError) -> Self {
        Error::Path(e)
    }
}

impl From<FsError> for Error {
    fn from(e: FsError) -> Self {
        Error::Fs(e)
    }
}

impl From<RegistryError> for Error {
    fn from(e: RegistryError) -> Self {
        Error::Registry(e)
    }
}

impl From<LoadError> for Error {
    fn from(e: LoadError) -> Self {
        Error::Load(e)
    }
}

impl From<ModuleFileError> for Error {
    fn from(e: ModuleFileError) -> Self {
        Error::ModuleFile(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Span;

    /// The one error type shows each detail's own text, so messages and goldens do not move.
    #[test]
    fn an_error_shows_its_details_text() {
        let details: Vec<(Error, &str)> = vec![
            (
                PathError::Empty {
                    path: "a..b".into(),
                    at: 2,
                }
                .into(),
                "path \"a..b\": empty selector at byte 2",
            ),
            (
                FsError::NotFound("x.cue".into()).into(),
                "x.cue: no such file or directory",
            ),
            (
                RegistryError::NotFound {
                    module: "m@v0".into(),
                    available: Vec::new(),
                }
                .into(),
                "m@v0: not found (available versions: none)",
            ),
            (
                LoadError::ImportCycle {
                    cycle: vec!["a".into(), "b".into(), "a".into()],
                    span: Span::default(),
                }
                .into(),
                "import cycle not allowed: a imports b imports a",
            ),
            (
                ModuleFileError {
                    span: Span::default(),
                    message: "module: missing".into(),
                }
                .into(),
                "module: missing",
            ),
            (
                MemoryExceeded {
                    budget: 256 << 20,
                    reached: (256 << 20) + (1 << 19),
                    path: "a.b[3]".into(),
                }
                .into(),
                "evaluation memory budget (256.0 MiB) exceeded: 256.5 MiB allocated while evaluating a.b[3]",
            ),
        ];
        for (e, text) in details {
            assert_eq!(e.to_string(), text, "{e:?}");
        }
    }
}
