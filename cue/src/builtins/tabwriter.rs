//! Package `text/tabwriter` (upstream `pkg/text/tabwriter`, Go's `text/tabwriter` with minimum
//! width 0, tab width 4, padding 1, pad character `' '` and no flags).
//!
//! Rules (elastic tabstops, as Go's writer):
//! - `Write(data)` takes a string or bytes, or a list of them, each list element followed by a
//!   newline; any other kind is an error.
//! - The text is cut into lines at `\n` and `\f`, and lines into cells at `\t` and `\v`; a
//!   cell is *tab-terminated* text; the text after a line's last tab is its trailing cell and
//!   never counts for a column's width.
//! - A column is a block of consecutive lines that all have a tab-terminated cell at that
//!   index; its width is the widest of those cells (counted in runes) plus the padding, and
//!   every cell in the block is padded with spaces to it. Blocks nest: inside a column block,
//!   the next column is again cut into blocks of consecutive lines.
//! - A line with a single cell ends every open block (Go flushes there), and so does `\f`.
//! - Text between two `0xff` bytes (Go's `Escape`) is one opaque part of a cell: tabs and
//!   newlines in it do not cut, the escape bytes are kept in the output and do not count for
//!   the width.

use super::args::builtin;
use super::{no_consts, Builtin, BuiltinError, Package, Val};

const P: &str = "text/tabwriter";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[Builtin::f(P, "Write", 1, write)];

const PADDING: usize = 1;
const ESCAPE: u8 = 0xff;

#[derive(Clone, Copy, Default)]
struct Cell {
    /// Bytes of the cell's text.
    size: usize,
    /// Width in runes.
    width: usize,
}

/// Go's `tabwriter.Writer`, reduced to the fixed settings above.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
    /// Start of the text not yet counted in `cell.width`.
    pos: usize,
    cell: Cell,
    /// Inside an escaped section.
    escaped: bool,
    lines: Vec<Vec<Cell>>,
    widths: Vec<usize>,
    out: Vec<u8>,
}

impl Writer {
    fn new() -> Writer {
        Writer {
            lines: vec![Vec::new()],
            ..Writer::default()
        }
    }

    fn append(&mut self, text: &[u8]) {
        self.buf.extend_from_slice(text);
        self.cell.size += text.len();
    }

    fn update_width(&mut self) {
        self.cell.width += rune_count(&self.buf[self.pos..]);
        self.pos = self.buf.len();
    }

    fn terminate_cell(&mut self) -> usize {
        let cell = std::mem::take(&mut self.cell);
        let Some(line) = self.lines.last_mut() else {
            return 0;
        };
        line.push(cell);
        line.len()
    }

    fn write(&mut self, data: &[u8]) {
        let mut n = 0;
        for (i, &ch) in data.iter().enumerate() {
            if self.escaped {
                if ch == ESCAPE {
                    self.append(&data[n..=i]);
                    n = i + 1;
                    self.update_width();
                    // The two escape bytes do not count.
                    self.cell.width = self.cell.width.saturating_sub(2);
                    self.escaped = false;
                }
                continue;
            }
            match ch {
                b'\t' | b'\x0b' | b'\n' | b'\x0c' => {
                    self.append(&data[n..i]);
                    self.update_width();
                    n = i + 1;
                    let cells = self.terminate_cell();
                    if ch == b'\n' || ch == b'\x0c' {
                        self.lines.push(Vec::new());
                        if ch == b'\x0c' || cells == 1 {
                            self.flush();
                        }
                    }
                }
                ESCAPE => {
                    self.append(&data[n..i]);
                    self.update_width();
                    n = i;
                    self.escaped = true;
                }
                _ => {}
            }
        }
        self.append(&data[n..]);
    }

    fn flush(&mut self) {
        if self.cell.size > 0 {
            if self.escaped {
                self.update_width();
                self.cell.width = self.cell.width.saturating_sub(2);
                self.escaped = false;
            }
            self.terminate_cell();
        }
        let n = self.lines.len();
        self.format(0, 0, n);
        self.buf.clear();
        self.pos = 0;
        self.cell = Cell::default();
        self.lines = vec![Vec::new()];
        self.widths.clear();
    }

    /// Formats lines `line0..line1` from text position `pos`, for the column `widths.len()`.
    fn format(&mut self, mut pos: usize, mut line0: usize, line1: usize) -> usize {
        let column = self.widths.len();
        let mut this = line0;
        while this < line1 {
            if column + 1 >= self.lines[this].len() {
                this += 1;
                continue;
            }
            // A cell in this column: the lines before it are done at this level.
            pos = self.write_lines(pos, line0, this);
            line0 = this;
            let mut width = 0;
            while this < line1 && column + 1 < self.lines[this].len() {
                width = width.max(self.lines[this][column].width + PADDING);
                this += 1;
            }
            self.widths.push(width);
            pos = self.format(pos, line0, this);
            self.widths.pop();
            line0 = this;
        }
        self.write_lines(pos, line0, line1)
    }

    fn write_lines(&mut self, mut pos: usize, line0: usize, line1: usize) -> usize {
        for i in line0..line1 {
            for (j, c) in self.lines[i].iter().enumerate() {
                if c.size > 0 {
                    self.out.extend_from_slice(&self.buf[pos..pos + c.size]);
                    pos += c.size;
                }
                if let Some(&w) = self.widths.get(j) {
                    self.out
                        .extend(std::iter::repeat_n(b' ', w.saturating_sub(c.width)));
                }
            }
            if i + 1 == self.lines.len() {
                // The last buffered line has no newline: write what is left of it.
                let end = pos + self.cell.size;
                self.out.extend_from_slice(&self.buf[pos..end]);
                pos = end;
            } else {
                self.out.push(b'\n');
            }
        }
        pos
    }
}

/// Go's `utf8.RuneCount`: every invalid byte counts as one rune.
fn rune_count(b: &[u8]) -> usize {
    let mut n = 0;
    let mut rest = b;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => return n + s.chars().count(),
            Err(e) => {
                let (ok, bad) = rest.split_at(e.valid_up_to());
                n += std::str::from_utf8(ok).map_or(0, |s| s.chars().count());
                let skip = e.error_len().unwrap_or(bad.len()).max(1);
                n += skip;
                rest = &bad[skip..];
            }
        }
    }
    n
}

fn text(v: &Val) -> Result<&[u8], BuiltinError> {
    match v {
        Val::String(s) => Ok(s.as_bytes()),
        Val::Bytes(b) => Ok(b),
        other => Err(BuiltinError::new(format!(
            "cannot use value of type {} as bytes",
            super::args::kind_name(other)
        ))),
    }
}

builtin! {
    /// `Write("a\tb\naaa\tbb")` → `"a   b\naaa bb"`; `Write(["a\tb", "aaa\tbb"])` ends with a
    /// newline.
    fn write(_, "tabwriter.Write", data: &Val) {
        let mut w = Writer::new();
        match data {
            Val::List(items) => {
                for item in items {
                    w.write(text(item)?);
                    w.write(b"\n");
                }
            }
            Val::String(_) | Val::Bytes(_) => w.write(text(data)?),
            other => {
                return Err(BuiltinError::new(format!(
                    "tabwriter.Write: unsupported type {}",
                    super::args::kind_name(other)
                )))
            }
        }
        w.flush();
        Ok(Val::String(String::from_utf8_lossy(&w.out).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tw(s: &str) -> String {
        let mut w = Writer::new();
        w.write(s.as_bytes());
        w.flush();
        String::from_utf8_lossy(&w.out).into_owned()
    }

    #[test]
    fn columns_are_blocks_of_consecutive_lines() {
        assert_eq!(tw("a\tb\tc\naaa\tbb\tvv"), "a   b  c\naaa bb vv");
        // The trailing cell never widens a column.
        assert_eq!(tw("a\tbbbbbb\naa\tb\n"), "a  bbbbbb\naa b\n");
        // A line without a tab ends the block: the columns after it start afresh.
        assert_eq!(tw("a\tb\nxxxxxx\naaaa\tb\n"), "a b\nxxxxxx\naaaa b\n");
        // Nested blocks: column 1 is cut again inside column 0's block.
        assert_eq!(
            tw("a\tb\tc\naa\tx\nb\tbbb\tc\n"),
            "a  b c\naa x\nb  bbb c\n"
        );
        // Widths count runes, not bytes; empty cells are padded.
        assert_eq!(tw("é\tx\n\ty\n"), "é x\n  y\n");
    }

    #[test]
    fn escaped_text_is_opaque() {
        assert_eq!(rune_count(b"a\xffb"), 3);
        let mut w = Writer::new();
        w.write(b"\xffa\tb\xff\tc\nd\te\n");
        w.flush();
        assert_eq!(w.out, b"\xffa\tb\xff c\nd   e\n");
    }
}
