//! Fuzz target `parse`: any bytes (lossily decoded as UTF-8) must parse without panicking, looping
//! or overflowing the stack, and every error span must lie within the input.
#![no_main]

use cue::source::FileId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let (_file, errors) = cue::parser::parse_file(FileId(0), &src);
    for e in &errors {
        assert!(e.span.start <= e.span.end, "inverted span {e:?}");
        assert!(e.span.end as usize <= src.len(), "span past end {e:?}");
    }
    let (_expr, _errors) = cue::parser::parse_expr(FileId(0), &src);
});
