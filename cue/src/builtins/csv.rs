//! Package `encoding/csv` (upstream `pkg/encoding/csv`, Go's `encoding/csv` with its defaults).
//!
//! Rules:
//! - `Encode(rows)` writes each row of a list of lists; a string cell is written as is, any
//!   other cell as its JSON text. A cell is quoted when it contains `,`, `"`, `\r` or `\n`, starts
//!   with a Unicode space, or is `\.`; quotes inside are doubled. Lines end with `\n`.
//! - `Decode(data)` reads all records: quoted fields may contain commas, doubled quotes and line
//!   breaks; `\r\n` reads as `\n`; empty lines are skipped; every record must have as many fields
//!   as the first (`record on line N: wrong number of fields`); a bare `"` in an unquoted field
//!   is `parse error on line L, column C: bare " in non-quoted-field`.

use super::args::{builtin, fail, Bytes};
use super::{no_consts, Builtin, BuiltinError, Package, Val};

const P: &str = "encoding/csv";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts: no_consts,
};

static FUNCS: &[Builtin] = &[
    Builtin::f(P, "Encode", 1, encode),
    Builtin::f(P, "Decode", 1, decode),
];

fn needs_quotes(f: &str) -> bool {
    if f.is_empty() {
        return false;
    }
    f == "\\."
        || f.contains([',', '"', '\r', '\n'])
        || f.chars().next().is_some_and(char::is_whitespace)
}

builtin! {
    /// `Encode([["a", 1], ["b c", "x,y"]])` → `"a,1\nb c,\"x,y\"\n"`.
    fn encode(_, "csv.Encode", rows: &[Val]) {
        let mut out = String::new();
        for (r, row) in rows.iter().enumerate() {
            let Val::List(cells) = row else {
                fail!("csv.Encode: row {r}: expected list, found {}", super::args::kind_name(row));
            };
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let text = match cell {
                    Val::String(s) => s.clone(),
                    other => super::json::to_json(other)?,
                };
                if needs_quotes(&text) {
                    out.push('"');
                    out.push_str(&text.replace('"', "\"\""));
                    out.push('"');
                } else {
                    out.push_str(&text);
                }
            }
            out.push('\n');
        }
        Ok(Val::String(out))
    }
}

/// Go's `csv.Reader.ReadAll` with default settings.
fn read_all(text: &str) -> Result<Vec<Vec<String>>, BuiltinError> {
    let text = text.replace("\r\n", "\n");
    let chars: Vec<char> = text.chars().collect();
    let mut records: Vec<Vec<String>> = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1usize, 1usize);
    let mut expected: Option<usize> = None;
    while i < chars.len() {
        if chars[i] == '\n' {
            // An empty line.
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        let record_line = line;
        let mut record: Vec<String> = Vec::new();
        loop {
            let mut field = String::new();
            if chars.get(i) == Some(&'"') {
                i += 1;
                col += 1;
                loop {
                    match chars.get(i) {
                        None => fail!("record on line {record_line}; parse error on line {line}, column {col}: extraneous or missing \" in quoted-field"),
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            field.push('"');
                            i += 2;
                            col += 2;
                        }
                        Some('"') => {
                            i += 1;
                            col += 1;
                            match chars.get(i) {
                                None | Some(',') | Some('\n') => break,
                                Some(_) => fail!("record on line {record_line}; parse error on line {line}, column {col}: extraneous or missing \" in quoted-field"),
                            }
                        }
                        Some('\n') => {
                            field.push('\n');
                            i += 1;
                            line += 1;
                            col = 1;
                        }
                        Some(&c) => {
                            field.push(c);
                            i += 1;
                            col += 1;
                        }
                    }
                }
            } else {
                while let Some(&c) = chars.get(i) {
                    if c == ',' || c == '\n' {
                        break;
                    }
                    if c == '"' {
                        fail!(
                            "parse error on line {line}, column {col}: bare \" in non-quoted-field"
                        );
                    }
                    field.push(c);
                    i += 1;
                    col += 1;
                }
            }
            record.push(field);
            match chars.get(i) {
                Some(',') => {
                    i += 1;
                    col += 1;
                }
                Some('\n') => {
                    i += 1;
                    line += 1;
                    col = 1;
                    break;
                }
                _ => break,
            }
        }
        match expected {
            None => expected = Some(record.len()),
            Some(n) if n != record.len() => {
                fail!("record on line {record_line}: wrong number of fields")
            }
            _ => {}
        }
        records.push(record);
    }
    Ok(records)
}

builtin! {
    /// `Decode("a,b\n\"x,y\",\"q\"\"\"\n")` → `[["a", "b"], ["x,y", "q\""]]`.
    fn decode(_, "csv.Decode", data: Bytes) {
        let text = std::str::from_utf8(data.0).map_err(|_| BuiltinError::new("csv: input is not valid UTF-8"))?;
        let rows = read_all(text)?;
        Ok(Val::List(
            rows.into_iter()
                .map(|r| Val::List(r.into_iter().map(Val::String).collect()))
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::check_table;

    #[test]
    fn table() {
        check_table(
            "encoding/csv",
            &[
                (
                    r#"Encode([["a", 1], ["b c", "x,y"]])"#,
                    r#""a,1\nb c,\"x,y\"\n""#,
                ),
                (
                    r#"Encode([[" lead", "q\"", "", true, 1.5]])"#,
                    r#""\" lead\",\"q\"\"\",,true,1.5\n""#,
                ),
                (r#"Encode([1])"#, "!row 0: expected list"),
                (
                    r#"Decode("a,b\n\"x,y\",\"q\"\"\"\n")"#,
                    r#"[["a", "b"], ["x,y", "q\""]]"#,
                ),
                (
                    r#"Decode("a,b\r\n\nc,\"multi\nline\"")"#,
                    r#"[["a", "b"], ["c", "multi\nline"]]"#,
                ),
                (
                    r#"Decode("a,b\nc")"#,
                    "!record on line 2: wrong number of fields",
                ),
                (
                    r#"Decode("a,b\"c")"#,
                    r#"!parse error on line 1, column 4: bare " in non-quoted-field"#,
                ),
                (r#"Decode("")"#, "[]"),
            ],
        );
    }
}
