//! The `cue` command line: where it reads from. Inputs may be absolute or reach up with `..`; the
//! main module is the nearest directory at or above the working directory holding `cue.mod`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

type R<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// A fresh directory under the system temp dir, removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(name: &str) -> R<Tmp> {
        let p = std::env::temp_dir().join(format!("cue-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p)?;
        Ok(Tmp(p))
    }
    fn write(&self, rel: &str, text: &str) -> R<PathBuf> {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().ok_or("no parent")?)?;
        std::fs::write(&p, text)?;
        Ok(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cue(cwd: &Path, args: &[&str]) -> R<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_cue"))
        .args(args)
        .current_dir(cwd)
        .output()?)
}

/// The exit code and stderr of a run expected to fail.
fn failure(o: R<Output>) -> R<(Option<i32>, String)> {
    let o = o?;
    Ok((
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// The JSON printed by a successful run, without white space.
fn stdout(o: R<Output>) -> R<String> {
    let o = o?;
    if !o.status.success() {
        return Err(format!("cue failed: {}", String::from_utf8_lossy(&o.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&o.stdout).replace([' ', '\n'], ""))
}

#[test]
fn absolute_and_parent_relative_files() -> R {
    let t = Tmp::new("abs")?;
    let f = t.write("a/x.cue", "x: 1 + 1\n")?;
    t.write("b/.keep", "")?;
    let abs = f.to_string_lossy().into_owned();
    assert_eq!(
        stdout(cue(&t.0.join("b"), &["export", &abs]))?,
        r#"{"x":2}"#
    );
    assert_eq!(
        stdout(cue(&t.0.join("b"), &["export", "../a/x.cue"]))?,
        r#"{"x":2}"#
    );
    assert_eq!(
        stdout(cue(&t.0.join("a"), &["export", "x.cue"]))?,
        r#"{"x":2}"#
    );
    Ok(())
}

#[test]
fn module_root_is_found_above_the_working_directory() -> R {
    let t = Tmp::new("mod")?;
    t.write(
        "cue.mod/module.cue",
        "module: \"example.test/m@v0\"\nlanguage: version: \"v0.9.0\"\n",
    )?;
    t.write("lib/lib.cue", "package lib\n\nname: \"lib\"\n")?;
    t.write(
        "app/app.cue",
        "package app\n\nimport \"example.test/m/lib\"\n\nout: lib.name\n",
    )?;
    assert_eq!(
        stdout(cue(&t.0.join("app"), &["export", "."]))?,
        r#"{"out":"lib"}"#
    );
    // A file outside the main module is refused with a message, not read.
    let other = Tmp::new("other")?;
    let f = other.write("y.cue", "y: 1\n")?;
    let (code, err) = failure(cue(&t.0.join("app"), &["export", &f.to_string_lossy()]))?;
    assert_ne!(code, Some(0));
    assert!(err.contains("outside the main module"));
    Ok(())
}

#[test]
fn errors_exit_non_zero_with_positions() -> R {
    let t = Tmp::new("err")?;
    t.write("e.cue", "a: 1\na: 2\n")?;
    let (code, err) = failure(cue(&t.0, &["export", "e.cue"]))?;
    assert_eq!(code, Some(1));
    assert!(err.contains("a: conflicting values"), "{err}");
    assert!(
        err.contains("e.cue:1:4") && err.contains("e.cue:2:4"),
        "{err}"
    );
    Ok(())
}

#[test]
fn eval_prints_cue_that_reads_back() -> R {
    let t = Tmp::new("eval")?;
    t.write(
        "c.cue",
        r#"#Config: {
	image!:   string
	replicas: *1 | int & >=1 & <=10
	port?:    int
	tags: [...string]
	mode: "a" | "b"
	_hidden: 1
}
v: #Config & {image: "nginx", tags: ["x"], mode: "a"}
n: {a: null, b: true, f: 1.5, s: "q\"", by: 'x\n'}
"#,
    )?;
    let o = cue(&t.0, &["eval", "c.cue"])?;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout)?;
    let want = r#"#Config: {
    image!: string
    replicas: *1 | int & >=1 & <=10
    port?: int
    tags: [...string]
    mode: "a" | "b"
}
v: {
    image: "nginx"
    replicas: *1 | int & >=1 & <=10
    port?: int
    tags: [
        "x",
    ]
    mode: "a"
}
n: {
    a: null
    b: true
    f: 1.5
    s: "q\""
    by: 'x\n'
}
"#;
    assert_eq!(text, want);
    // The printed value is CUE: exported, it gives what the original exports.
    t.write("printed/p.cue", &text)?;
    let a = stdout(cue(&t.0, &["export", "c.cue"]))?;
    let b = stdout(cue(&t.0, &["export", "printed/p.cue"]))?;
    assert_eq!(a, b);
    // `-e` prints one value; `--out json` asks for JSON instead.
    let r = cue(&t.0, &["eval", "-e", "v.replicas", "c.cue"])?;
    assert_eq!(String::from_utf8(r.stdout)?, "*1 | int & >=1 & <=10\n");
    assert_eq!(
        stdout(cue(
            &t.0,
            &["eval", "--out", "json", "-e", "v.tags", "c.cue"]
        ))?,
        r#"["x"]"#
    );
    Ok(())
}

#[test]
fn eval_fails_on_errors_and_concrete_asks_for_data() -> R {
    let t = Tmp::new("evalerr")?;
    t.write("e.cue", "a: 1 & 2\n")?;
    let (code, err) = failure(cue(&t.0, &["eval", "e.cue"]))?;
    assert_eq!(code, Some(1));
    assert!(err.contains("a: conflicting values"));
    t.write("i.cue", "a: int\n")?;
    assert_eq!(stdout(cue(&t.0, &["eval", "i.cue"]))?, "a:int");
    let (code, _) = failure(cue(&t.0, &["eval", "-c", "i.cue"]))?;
    assert_eq!(code, Some(1));
    Ok(())
}

#[test]
fn a_json_file_is_exported_alone_or_unified_with_cue_files() -> R {
    let t = Tmp::new("json")?;
    t.write("data.json", "{\"a\": 1, \"b\": [1, {\"c\": \"x\"}]}\n")?;
    t.write("list.json", "[1, 2]\n")?;
    t.write("schema.cue", "a: int\nn: a + 1\n")?;
    // One `.json` argument names a file, not a directory.
    assert_eq!(
        stdout(cue(&t.0, &["export", "data.json"]))?,
        r#"{"a":1,"b":[1,{"c":"x"}]}"#
    );
    assert_eq!(stdout(cue(&t.0, &["export", "list.json"]))?, "[1,2]");
    assert_eq!(
        stdout(cue(&t.0, &["export", "schema.cue", "data.json"]))?,
        r#"{"a":1,"n":2,"b":[1,{"c":"x"}]}"#
    );
    // A conflict between the data and the schema is an error.
    t.write("bad.json", "{\"a\": \"one\"}\n")?;
    let (code, err) = failure(cue(&t.0, &["export", "schema.cue", "bad.json"]))?;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("a:"), "{err}");
    Ok(())
}

#[test]
fn a_json_file_that_is_not_json_is_a_syntax_error_at_its_position() -> R {
    let t = Tmp::new("json-strict")?;
    // CUE syntax, not JSON: a comma left out at a line end, a bare field, an empty file.
    t.write(
        "x1.json",
        "{\n  \"foo\": true,\n  \"bar\": 2\n  \"baz\": false\n}\n",
    )?;
    t.write("x2.json", "\"baz\": false\n")?;
    t.write("x3.json", "")?;
    for (file, at) in [
        ("x1.json", "x1.json:4:3"),
        ("x2.json", "x2.json:1:6"),
        ("x3.json", "x3.json:1:1"),
    ] {
        let (code, err) = failure(cue(&t.0, &["export", file]))?;
        assert_eq!(code, Some(1), "{file}: {err}");
        assert!(
            err.contains("invalid JSON") && err.contains(at),
            "{file}: {err}"
        );
    }
    Ok(())
}

#[test]
fn a_directory_keeps_only_the_files_whose_build_constraint_holds() -> R {
    let t = Tmp::new("buildtags")?;
    // No tag is set: `A && B || C` is false, `!A` is true.
    t.write("a.cue", "@if(A && B || C)\npackage p\n\nx: 1\n")?;
    t.write("b.cue", "@if(!A)\npackage p\n\ny: 2\n")?;
    assert_eq!(stdout(cue(&t.0, &["export"]))?, r#"{"y":2}"#);
    // Every file left out is an error, not an empty package.
    std::fs::remove_file(t.0.join("b.cue"))?;
    let (code, err) = failure(cue(&t.0, &["export"]))?;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("build constraints exclude all CUE files"),
        "{err}"
    );
    Ok(())
}
