//! The parsed-file cache: syntax trees of dependency-module files, parsed once per process and
//! shared read-only by every build and [`crate::Runtime`] (docs/design/render.md §2.3, docs/design/conventions.md §5:
//! sixteen concurrent renders must not hold sixteen copies of the catalogs' syntax trees).
//!
//! Rules:
//! - the key is the module coordinate (`path@version`, immutable once published) and the
//!   file's path in the module; an entry is reused only when the file's text is byte-equal to
//!   the cached text (a changed text replaces the entry), so a wrong key never yields a wrong
//!   tree;
//! - a cached file has a process-wide [`FileId`] (`source::new_shared_file`), so its spans
//!   resolve in every build that registers it; the tree is an `Arc<ast::File>`, never copied;
//! - files of the main module are never cached (they are the render's own input);
//! - the cache holds at most [`ParseCache::MAX_FILES`] files; when full it is emptied (builds
//!   holding trees keep them alive until they are dropped), so it never grows without bound.

use crate::ast::{self, ParseError};
use crate::parser::parse_file;
use crate::source::{new_shared_file, FileId, SourceFile};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One cached file.
#[derive(Clone)]
pub(crate) struct Cached {
    pub id: FileId,
    pub file: Arc<SourceFile>,
    pub text: Arc<str>,
    pub ast: Arc<ast::File>,
    pub errs: Vec<ParseError>,
}

#[derive(Default)]
struct State {
    files: HashMap<(String, String), Cached>,
    parses: HashMap<String, usize>,
}

/// The process-wide cache of parsed dependency-module files (see the module docs).
pub struct ParseCache {
    state: Mutex<State>,
}

impl ParseCache {
    /// Most files held at once.
    pub const MAX_FILES: usize = 20_000;

    /// The cache every build uses.
    pub fn global() -> &'static ParseCache {
        static CACHE: OnceLock<ParseCache> = OnceLock::new();
        CACHE.get_or_init(|| ParseCache {
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// How many times files of module `coordinate` (`path@version`) were parsed.
    pub fn parses_of(&self, coordinate: &str) -> usize {
        self.lock().parses.get(coordinate).copied().unwrap_or(0)
    }

    /// Number of files held.
    pub fn len(&self) -> usize {
        self.lock().files.len()
    }

    /// `true` if no file is held.
    pub fn is_empty(&self) -> bool {
        self.lock().files.is_empty()
    }

    /// Drops every entry (trees in use stay alive with their builds).
    pub fn clear(&self) {
        let mut g = self.lock();
        g.files.clear();
        g.parses.clear();
    }

    /// The tree of `path` in module `coordinate` with text `text`: cached, or parsed now under
    /// the display name `name` and cached. Parsing happens outside the lock.
    pub(crate) fn get_or_parse(
        &self,
        coordinate: &str,
        path: &str,
        name: &str,
        text: &str,
    ) -> Cached {
        let key = (coordinate.to_string(), path.to_string());
        if let Some(c) = self.lock().files.get(&key) {
            if &*c.text == text {
                return c.clone();
            }
        }
        let text: Arc<str> = Arc::from(text);
        let (id, file) = new_shared_file(name, text.clone());
        let (ast, errs) = parse_file(id, &text);
        let c = Cached {
            id,
            file,
            text,
            ast: Arc::new(ast),
            errs,
        };
        let mut g = self.lock();
        if g.files.len() >= Self::MAX_FILES {
            g.files.clear();
        }
        *g.parses.entry(coordinate.to_string()).or_default() += 1;
        g.files.insert(key, c.clone());
        c
    }
}
