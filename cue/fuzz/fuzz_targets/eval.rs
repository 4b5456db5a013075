//! Fuzz target `eval`: parse, then evaluate and export. Until the evaluator's API is merged this
//! target exercises the parser and the source map only.
#![no_main]

use cue::source::{FileId, SourceMap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let mut map = SourceMap::new();
    let id: FileId = map.add("fuzz.cue", src.as_ref());
    let (_file, errors) = cue::parser::parse_file(id, &src);
    for e in &errors {
        let _ = map.line_col(e.span);
    }
});
