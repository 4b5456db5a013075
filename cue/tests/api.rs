//! Tests of the public API of `cue` (docs/design/render.md §1.3–§1.8): paths, filtered field iteration,
//! data in and out as `serde_json::Value`, decoding, diagnostic reports, and a render-shaped
//! workload on 8 threads at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use cue::{
    Config, DiagCode, Error, FieldConstraint, FieldFilter, Limit, Path, Runtime, Selector, Value,
};
use serde_json::json;
use std::time::Duration;

fn build(rt: &Runtime, src: &str) -> Value {
    rt.build_files(&[("in.cue".into(), src.into())])
        .unwrap_or_else(|d| panic!("{}", rt.render(&d)))
}

fn p(s: &str) -> Path {
    Path::parse(s).unwrap()
}

#[test]
fn diagnostic_paths_parse_back_to_the_failing_value() {
    let rt = Runtime::default();
    let v = build(
        &rt,
        "a: \"x-y\": list: [1, 2 & 3]\n#D: {b: int}\nd: #D & {b: \"s\"}\n_h: {c: 1 & 2}\n",
    );
    let diags = v.validate(false).unwrap_err();
    assert!(diags.len() >= 2, "{diags:?}");
    for d in &diags {
        let path = Path::parse(&d.path).unwrap();
        assert_eq!(d.value_path(), Some(path.clone()));
        assert_eq!(path.diagnostic_text(), d.path);
        assert_eq!(Path::parse(&path.to_string()).unwrap(), path);
        let at = v.lookup_path(&path).expect(&d.path);
        assert!(at.is_bottom(), "{} is not an error", d.path);
        assert_eq!(at.path(), d.path);
    }
    let paths: Vec<&str> = diags.iter().map(|d| d.path.as_str()).collect();
    assert!(paths.contains(&"a.\"x-y\".list.1"), "{paths:?}");
    // Reports carry the Path syntax, which parses back to the same path.
    let reports = rt.reports(&diags);
    assert!(
        reports.iter().any(|r| r.path == "a.\"x-y\".list[1]"),
        "{reports:?}"
    );
    assert!(paths.contains(&"d.b"), "{paths:?}");
    // Brackets select the same element.
    assert_eq!(
        v.lookup_path(&p("a.\"x-y\".list[0]"))
            .unwrap()
            .to_json_value()
            .unwrap(),
        json!(1)
    );
    // An index selects only in a list, a missing label nothing.
    assert!(v.lookup_path(&p("d.0")).is_none());
    assert!(v.lookup_path(&p("a.nope")).is_none());
    assert!(v.lookup_path(&Path::root()).is_some());
}

#[test]
fn fields_where_selects_by_class_and_constraint() {
    let rt = Runtime::default();
    let v = build(
        &rt,
        "r: 1\no?: 2\nq!: int\n#D: {x: 1}\n#E?: {y: 1}\n_h: 3\n_#H: {z: 1}\n\"x-y\": 4\n",
    );
    let sels = |f: FieldFilter| -> Vec<String> {
        v.fields_where(f)
            .into_iter()
            .map(|f| f.selector.to_string())
            .collect()
    };
    assert_eq!(sels(FieldFilter::data()), ["r", "\"x-y\""]);
    assert_eq!(sels(FieldFilter::definitions()), ["#D", "#E"]);
    assert_eq!(
        sels(FieldFilter::all()),
        ["r", "o", "q", "#D", "#E", "_h", "_#H", "\"x-y\""]
    );
    let hidden = v.fields_where(FieldFilter {
        hidden: true,
        ..FieldFilter::default()
    });
    assert_eq!(hidden.len(), 2);
    assert_eq!(hidden[0].selector, Selector::Hidden("_h".into()));
    assert_eq!(hidden[0].value.to_json_value().unwrap(), json!(3));
    let opt = v.fields_where(FieldFilter {
        fields: true,
        optional: true,
        required: true,
        ..FieldFilter::default()
    });
    let cons: Vec<FieldConstraint> = opt.iter().map(|f| f.constraint).collect();
    assert_eq!(
        cons,
        [
            FieldConstraint::Regular,
            FieldConstraint::Optional,
            FieldConstraint::Required,
            FieldConstraint::Regular
        ]
    );
    // List elements are regular fields with index selectors.
    let l = build(&rt, "l: [10, 20]\n").lookup_path(&p("l")).unwrap();
    let els = l.fields_where(FieldFilter::data());
    assert_eq!(els[1].selector, Selector::Index(1));
    assert_eq!(els[1].value.to_json_value().unwrap(), json!(20));
}

#[test]
fn fields_where_yields_pattern_constraints() {
    let rt = Runtime::default();
    let v = build(
        &rt,
        "m: {\n\t[string]: {replicas: int | *1}\n\t[=~\"^x-\"]: [N=_]: N\n\ta: {}\n}\n",
    );
    let m = v.lookup_path(&p("m")).unwrap();
    // Not yielded unless asked for.
    assert_eq!(m.fields_where(FieldFilter::data()).len(), 1);
    let all = m.fields_where(FieldFilter::all());
    let sels: Vec<String> = all.iter().map(|f| f.selector.to_string()).collect();
    assert_eq!(sels, ["a", "[string]", "[=~\"^x-\"]"]);
    let pat = &all[1];
    assert_eq!(pat.selector, Selector::Pattern("string".into()));
    assert_eq!(pat.constraint, FieldConstraint::Optional);
    // The constraint's value, defaults and all, as it applies to a field.
    assert_eq!(pat.value.to_json_value().unwrap(), json!({"replicas": 1}));
    assert_eq!(
        m.lookup_path(&p("a")).unwrap().to_json_value().unwrap(),
        json!({"replicas": 1})
    );
    // A pattern is not a place: looking it up finds nothing, filling it is an error.
    let at = Path::new(vec![Selector::Field("m".into()), pat.selector.clone()]);
    assert!(v.lookup_path(&at).is_none());
    assert!(v.fill_path(&at, &json!(1)).validate(false).is_err());
}

#[test]
fn data_goes_in_as_data_and_comes_out_in_field_order() {
    let rt = Runtime::default();
    // CUE syntax inside data is a string, never evaluated.
    let data = json!({"z": 1, "a": "\\(x)", "m": {"#d": true, "n": null}, "f": 1.5, "l": [3, 2]});
    let v = rt.value_from_json(&data);
    let out = v.to_json_value().unwrap();
    assert_eq!(out, data);
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["z", "a", "m", "f", "l"]);
    assert_eq!(v.lookup_path(&p("f")).unwrap().kind(), cue::K_FLOAT);
    assert_eq!(v.lookup_path(&p("z")).unwrap().kind(), cue::K_INT);
    // Field order is CUE's: declaration order, then data filled in later.
    let s = build(&rt, "b: int\na: string\n");
    let filled = s.fill_path(&Path::root(), &json!({"c": true, "a": "x", "b": 2}));
    assert_eq!(
        serde_json::to_string(&filled.to_json_value().unwrap()).unwrap(),
        r#"{"b":2,"a":"x","c":true}"#
    );
}

#[test]
fn fill_path_unifies_at_fields_definitions_and_indices() {
    let rt = Runtime::default();
    let v = build(
        &rt,
        "#In: {name: string, replicas: *1 | int}\nout: {n: #In.name, r: #In.replicas}\napp: #In\nl: [{a: 1}, {a: 2}]\n",
    );
    let f = v.fill_path(&p("#In"), &json!({"name": "web"}));
    assert_eq!(
        f.lookup_path(&p("out")).unwrap().to_json_value().unwrap(),
        json!({"n": "web", "r": 1})
    );
    // The receiver is unchanged.
    assert!(v.lookup_path(&p("out")).unwrap().to_json_value().is_err());
    // A field closed by a definition rejects data it does not allow (filling the definition
    // itself adds a conjunct to it, as in CUE).
    let bad = v.fill_path(&p("app"), &json!({"name": "web", "extra": 1}));
    let d = bad.validate(false).unwrap_err();
    assert_eq!(d[0].path, "app.extra");
    assert_eq!(d[0].code, DiagCode::NotAllowed);
    // Into a list element: the other elements stay.
    let l = v.fill_path(&p("l[1]"), &json!({"b": 3}));
    assert_eq!(
        l.lookup_path(&p("l")).unwrap().to_json_value().unwrap(),
        json!([{"a": 1}, {"a": 2, "b": 3}])
    );
    // A conflict at a filled path is reported at that path.
    let c = v.fill_path(&p("l.0.a"), &json!(5));
    let d = c.validate(false).unwrap_err();
    assert_eq!(d[0].path, "l.0.a");
    assert_eq!(d[0].code, DiagCode::Conflict);
}

/// The class of a diagnostic is the code the evaluator set where it raised the error: a user
/// error whose text reads like another class keeps its own class.
#[test]
fn error_classes_are_set_where_the_error_is_raised() {
    let rt = Runtime::default();
    let v = build(
        &rt,
        concat!(
            "#D: {a: int}\n",
            "notAllowed: #D & {a: 1, b: 2}\n",
            "conflict: {x: 1 & 2}\n",
            "required: {r!: int}\n",
            "incomplete: {i: int}\n",
            "undefined: {u: {}.missing}\n",
            "user: {e: error(\"field not allowed, required but not present\")}\n",
        ),
    );
    let class = |field: &str| -> Vec<(String, DiagCode)> {
        let d = v
            .lookup_path(&p(field))
            .unwrap()
            .validate(true)
            .unwrap_err();
        d.into_iter().map(|d| (d.path, d.code)).collect()
    };
    assert_eq!(
        class("notAllowed"),
        [("notAllowed.b".to_string(), DiagCode::NotAllowed)]
    );
    assert_eq!(
        class("conflict"),
        [("conflict.x".to_string(), DiagCode::Conflict)]
    );
    assert_eq!(
        class("required"),
        [("required.r".to_string(), DiagCode::RequiredMissing)]
    );
    assert_eq!(
        class("incomplete"),
        [("incomplete.i".to_string(), DiagCode::Incomplete)]
    );
    assert_eq!(
        class("undefined"),
        [("undefined.u".to_string(), DiagCode::Incomplete)]
    );
    assert_eq!(class("user"), [("user.e".to_string(), DiagCode::User)]);
}

#[derive(serde::Deserialize, Debug, PartialEq)]
struct Deployment {
    name: String,
    replicas: u32,
    ports: Vec<u16>,
}

#[test]
fn decode_into_types_and_report_both_failures() {
    let rt = Runtime::default();
    let v = build(&rt, "d: {name: \"web\", replicas: 2, ports: [80, 443]}\ne: {name: 1}\ni: int\nbig: 1180591620717411303424\nb: 'hi'\n");
    let d: Deployment = v.lookup_path(&p("d")).unwrap().decode().unwrap();
    assert_eq!(
        d,
        Deployment {
            name: "web".into(),
            replicas: 2,
            ports: vec![80, 443]
        }
    );
    let e = v.lookup_path(&p("e")).unwrap().decode::<Deployment>();
    assert!(matches!(e, Err(Error::Shape(_))), "{e:?}");
    let i = v.lookup_path(&p("i")).unwrap().decode::<u32>();
    assert!(matches!(i, Err(Error::Eval(_))), "{i:?}");
    let big = v
        .lookup_path(&p("big"))
        .unwrap()
        .to_json_value()
        .unwrap_err();
    assert_eq!(big[0].code, DiagCode::Limit);
    assert_eq!(big[0].path, "big");
    assert_eq!(
        v.lookup_path(&p("b")).unwrap().to_json_value().unwrap(),
        json!("aGk=")
    );
}

#[test]
fn reports_carry_positions_and_serialise_as_json() {
    let rt = Runtime::default();
    let v = build(&rt, "a: 1\na: 2\n");
    let diags = v.validate(false).unwrap_err();
    let reports = rt.reports(&diags);
    assert_eq!(reports.len(), diags.len());
    let r = &reports[0];
    assert_eq!(r.code, "conflict");
    assert_eq!(r.path, "a");
    let mut all: Vec<String> = r.primary.iter().map(|p| p.to_string()).collect();
    all.extend(r.related.iter().map(|p| p.to_string()));
    assert!(all.contains(&"in.cue:1:4".to_string()), "{all:?}");
    assert!(all.contains(&"in.cue:2:4".to_string()), "{all:?}");
    let j = serde_json::to_value(&reports).unwrap();
    assert_eq!(j[0]["code"], "conflict");
    assert!(j[0]["related"].is_array());
    let back: Vec<cue::DiagnosticReport> = serde_json::from_value(j).unwrap();
    assert_eq!(back, reports);
    // Syntax errors have positions too.
    let e = rt
        .build_files(&[("bad.cue".into(), "a: {\n".into())])
        .unwrap_err();
    let r = rt.reports(&e);
    assert_eq!(r[0].code, "syntax");
    assert_eq!(r[0].primary.as_ref().unwrap().file, "bad.cue");
}

/// A key the closed `#config` does not declare, checked as the kernel checks values
/// (`Value::check_unify`, the values written in another file): the report names the refused
/// field's position first, then the `#config` literal's, so a caller can point at both the
/// values and the schema (issue 28 E1). A plain `unify` + `validate` gives the same report.
#[test]
fn a_refused_field_names_the_closed_struct_that_refuses_it() {
    let rt = Runtime::default();
    let v = rt
        .build_files(&[
            (
                "module.cue".into(),
                "#module: {\n\t#config: {\n\t\tname: string\n\t\tport: {n: int}\n\t}\n}\n".into(),
            ),
            (
                "values.cue".into(),
                "values: {name: \"a\", colour: \"blue\", port: {n: 1, p: 2}}\n".into(),
            ),
        ])
        .unwrap_or_else(|d| panic!("{}", rt.render(&d)));
    let config = v.lookup_path(&p("#module.#config")).unwrap();
    let values = v.lookup_path(&p("values")).unwrap();
    let diags = config.check_unify(&values, false).unwrap_err();
    assert_eq!(diags, config.unify(&values).validate(false).unwrap_err());
    let reports = rt.reports(&diags);
    let at = |path: &str| {
        let r = reports
            .iter()
            .find(|r| r.path == path)
            .unwrap_or_else(|| panic!("{reports:?}"));
        assert_eq!(r.code, "not allowed");
        let mut all: Vec<String> = r.primary.iter().map(|p| p.to_string()).collect();
        all.extend(r.related.iter().map(|p| p.to_string()));
        all
    };
    assert_eq!(at("colour"), ["values.cue:1:29", "module.cue:2:11"]);
    // A nested closed struct names its own literal.
    assert_eq!(at("port.p"), ["values.cue:1:53", "module.cue:4:9"]);
}

const CATALOG: &str = r#"
#Meta: {name: string & =~"^[a-z][a-z0-9-]*$", namespace: *"default" | string}
#Container: {image: string, port?: int & >0 & <65536}
#WebApp: {
	#in: {meta: #Meta, container: #Container, replicas: *1 | int & >=1}
	out: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: {name: #in.meta.name, namespace: #in.meta.namespace}
		spec: {
			replicas: #in.replicas
			template: spec: containers: [{name: #in.meta.name, image: #in.container.image}]
		}
	}
}
#Service: {
	#in: {meta: #Meta, container: #Container}
	out: {
		apiVersion: "v1"
		kind:       "Service"
		metadata: name: #in.meta.name
		spec: ports: [{port: #in.container.port}]
	}
}
"#;

/// One render as the kernel does it: build the catalog, iterate its definitions, fill each
/// one's `#in` with data, look `out` up by path and export it to `serde_json::Value`.
fn render(n: usize) -> Vec<serde_json::Value> {
    let rt = Runtime::new(Config::default());
    let cat = build(&rt, CATALOG);
    let input = json!({
        "meta": {"name": format!("app-{n}")},
        "container": {"image": format!("reg/app:{n}"), "port": 8000 + n},
        "replicas": n % 3 + 1,
    });
    let mut out = Vec::new();
    for def in cat.fields_where(FieldFilter::definitions()) {
        let has_in = def
            .value
            .fields_where(FieldFilter::definitions())
            .iter()
            .any(|f| f.selector == Selector::Definition("#in".into()));
        if !has_in {
            continue;
        }
        let mut data = input.clone();
        if def.selector == Selector::Definition("#Service".into()) {
            data.as_object_mut().unwrap().remove("replicas");
        }
        let filled = def.value.fill_path(&p("#in"), &data);
        let res = filled
            .lookup_path(&p("out"))
            .unwrap()
            .to_json_value()
            .unwrap_or_else(|d| panic!("{}: {}", def.selector, rt.render(&d)));
        out.push(res);
    }
    out
}

#[test]
fn render_shaped_workload_on_8_threads() {
    let handles: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                (0..5)
                    .map(|k| {
                        let n = t * 10 + k;
                        (n, render(n))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for (n, objs) in h.join().unwrap() {
            assert_eq!(objs.len(), 2);
            assert_eq!(
                objs[0],
                json!({
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": format!("app-{n}"), "namespace": "default"},
                    "spec": {
                        "replicas": n % 3 + 1,
                        "template": {"spec": {"containers": [
                            {"name": format!("app-{n}"), "image": format!("reg/app:{n}")}
                        ]}}
                    }
                })
            );
            assert_eq!(
                objs[1],
                json!({
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": format!("app-{n}")},
                    "spec": {"ports": [{"port": 8000 + n}]}
                })
            );
        }
    }
}

/// A field whose evaluation takes many steps (a long comprehension).
const HEAVY: &str = "import \"list\"\nx: [for i in list.Range(0, N, 1) {i * 2}]\ny: [for i in list.Range(0, N, 1) {i * 3}]\n";

fn heavy(rt: &Runtime, n: usize) -> Value {
    build(rt, &HEAVY.replace('N', &n.to_string()))
}

#[test]
fn one_step_budget_per_runtime_is_not_reset_by_each_call() {
    // What one field costs, measured on a runtime of its own.
    let probe = Runtime::default();
    let v = heavy(&probe, 2000);
    assert!(v.lookup_path(&p("x")).unwrap().validate(true).is_ok());
    let one = probe.steps_used();
    assert!(one > 1000, "{one} steps");
    // Steps accumulate across calls.
    assert!(v.lookup_path(&p("y")).unwrap().validate(true).is_ok());
    assert!(probe.steps_used() > one);
    // A budget for one and a half fields: the first call fits, the second call runs out,
    // although each alone would fit.
    let rt = Runtime::new(Config {
        max_steps: one + one / 2,
        ..Config::default()
    });
    let v = heavy(&rt, 2000);
    assert!(v.lookup_path(&p("x")).unwrap().validate(true).is_ok());
    assert_eq!(rt.limit_exceeded(), None);
    let d = v.lookup_path(&p("y")).unwrap().validate(true).unwrap_err();
    assert!(d.iter().any(|d| d.code == DiagCode::Limit), "{d:?}");
    assert_eq!(rt.limit_exceeded(), Some(Limit::Steps));
    // And it stays spent, for values built later too: their root fails to evaluate, so a
    // lookup finds nothing and `limit_exceeded` says why.
    let again = build(&rt, "z: 1 + 1\n");
    assert!(again.lookup_path(&p("z")).is_none());
    let d = again.validate(true).unwrap_err();
    assert_eq!(d[0].code, DiagCode::Limit);
    assert_eq!(rt.limit_exceeded(), Some(Limit::Steps));
}

#[test]
fn the_deadline_counts_from_the_runtime_not_from_each_call() {
    let rt = Runtime::new(Config {
        max_wall_time: Duration::from_millis(30),
        ..Config::default()
    });
    let v = build(&rt, "a: 1 + 1\n");
    #[allow(
        clippy::disallowed_methods,
        reason = "the deadline is wall time: let it pass"
    )]
    std::thread::sleep(Duration::from_millis(60));
    let d = v.to_json_value().unwrap_err();
    assert_eq!(d[0].code, DiagCode::Limit);
    assert_eq!(rt.limit_exceeded(), Some(Limit::Deadline));
    assert!(rt.elapsed() >= Duration::from_millis(60));
    assert_eq!(rt.reports(&d)[0].code, "limit");
}

#[test]
fn cancellation_from_another_thread_stops_a_running_evaluation() {
    let rt = Runtime::new(Config {
        max_steps: u64::MAX,
        max_wall_time: Duration::from_secs(600),
        ..Config::default()
    });
    let v = heavy(&rt, 1_000_000);
    let handle = rt.cancel_handle();
    assert!(!handle.is_cancelled());
    let worker = std::thread::spawn(move || v.validate(true));
    // Let the evaluation start (cancelling before it starts stops it at its first step, so the
    // outcome does not depend on this wait).
    #[allow(
        clippy::disallowed_methods,
        reason = "lets the worker start; not a synchronisation"
    )]
    std::thread::sleep(Duration::from_millis(50));
    handle.cancel();
    let d = worker.join().unwrap().unwrap_err();
    assert!(d.iter().any(|d| d.code == DiagCode::Limit), "{d:?}");
    assert_eq!(rt.limit_exceeded(), Some(Limit::Cancelled));
    assert!(handle.is_cancelled());
    // Every later evaluation of the runtime fails the same way.
    let w = build(&rt, "w: 2 * 3\n");
    let d = w.to_json_value().unwrap_err();
    assert_eq!(d[0].code, DiagCode::Limit);
    assert!(w.lookup_path(&p("w")).is_none());
}

#[test]
fn depth_limits_are_typed_and_do_not_spend_the_runtime() {
    let rt = Runtime::new(Config {
        max_depth: 50,
        ..Config::default()
    });
    let mut src = String::from("a0: a1 + 1\n");
    for i in 1..200 {
        src.push_str(&format!("a{i}: a{} + 1\n", i + 1));
    }
    src.push_str("a200: 0\nok: 7\n");
    let v = build(&rt, &src);
    let d = v
        .lookup_path(&p("a0"))
        .unwrap()
        .to_json_value()
        .unwrap_err();
    assert_eq!(d[0].code, DiagCode::Limit, "{d:?}");
    assert_eq!(rt.limit_exceeded(), Some(Limit::Depth));
    // Depth is a property of one value: the next call evaluates normally.
    assert_eq!(
        v.lookup_path(&p("ok")).unwrap().to_json_value().unwrap(),
        json!(7)
    );
}

/// A reference chain evaluated recursively, deeper than a 2 MiB stack holds (without the
/// API growing the stack this aborts the test process with a stack overflow).
#[test]
fn deep_evaluation_on_a_2_mib_thread() {
    let n = 1500;
    let t = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let rt = Runtime::default();
            let mut src = String::new();
            for i in 0..n {
                src.push_str(&format!("a{i}: b: a{}.b + 1\n", i + 1));
            }
            src.push_str(&format!("a{n}: b: 0\n"));
            let v = build(&rt, &src);
            v.lookup_path(&p("a0.b")).unwrap().to_json_value()
        })
        .unwrap();
    assert_eq!(t.join().unwrap().unwrap(), json!(1500));
}

/// Two runtimes building the same module graph share the dependency's parsed files: the
/// catalog file is parsed once, and an error in it is positioned in both runtimes.
#[test]
fn two_runtimes_share_one_parse_of_a_dependency_module() {
    use cue::module::{MemFs, MemRegistry, ParseCache, Target};
    let reg = MemRegistry::default().with(
        "cache.test/catalog@v0",
        "v0.1.0",
        MemFs::new()
            .with(
                "cue.mod/module.cue",
                "module: \"cache.test/catalog@v0\"\nlanguage: version: \"v0.16.0\"\n",
            )
            .with(
                "catalog.cue",
                "package catalog\n#Web: {name: string, port: *80 | int, _kind: \"web\"}\nbad: 1 & 2\n",
            ),
    );
    let main = MemFs::new()
        .with(
            "cue.mod/module.cue",
            "module: \"cache.test/app@v0\"\nlanguage: version: \"v0.16.0\"\n\
             deps: \"cache.test/catalog@v0\": v: \"v0.1.0\"\n",
        )
        .with(
            "app.cue",
            "package app\nimport \"cache.test/catalog\"\nweb: catalog.#Web & {name: \"w\"}\nerr: catalog.bad\n",
        );
    let coord = "cache.test/catalog@v0.1.0";
    let before = ParseCache::global().parses_of(coord);
    for i in 0..2 {
        let rt = Runtime::default();
        if i == 1 {
            // A runtime with files of its own already registers the shared ones beside them.
            build(&rt, "x: 1\n");
        }
        let v = rt
            .build_module(&main, &Target::Dir(String::new()), Some(&reg))
            .unwrap_or_else(|d| panic!("{}", rt.render(&d)));
        assert_eq!(
            v.lookup_path(&p("web")).unwrap().to_json_value().unwrap(),
            json!({"name": "w", "port": 80})
        );
        // The catalog's hidden field is scoped to the catalog package: not addressable by a
        // Path (that is the main package's), but by package.
        let web = v.lookup_path(&p("web")).unwrap();
        assert!(web.lookup_path(&p("_kind")).is_none());
        let kind = web.lookup_hidden("_kind", "cache.test/catalog").unwrap();
        assert_eq!(kind.to_json_value().unwrap(), json!("web"));
        assert!(web.lookup_hidden("_kind", "cache.test/other").is_none());
        let d = v
            .lookup_path(&p("err"))
            .unwrap()
            .validate(false)
            .unwrap_err();
        let rendered = rt.render(&d);
        assert!(
            rendered.contains("cache.test/catalog@v0.1.0/catalog.cue:3:"),
            "{rendered}"
        );
    }
    // One file, parsed once for both runtimes (other tests never load this module).
    assert_eq!(ParseCache::global().parses_of(coord) - before, 1);
}

/// The text-addressed `Value` API beside the path-addressed one: text lookups, fields, defaults,
/// closedness, unification, the exports, expressions, and building from a loaded build.
#[test]
fn the_original_value_api_still_works() {
    let rt = Runtime::default();
    let v = build(
        &rt,
        "#D: {a: int, b?: string}\nx: #D & {a: 1}\nd: *\"dflt\" | string\n\"q-l\": [7]\n",
    );
    assert_eq!(v.lookup("x.a").unwrap().to_json().unwrap(), "1\n");
    assert_eq!(
        v.lookup("\"q-l\"").unwrap().to_json_value().unwrap(),
        json!([7])
    );
    assert_eq!(
        v.lookup_label("q-l")
            .unwrap()
            .lookup_label("0")
            .unwrap()
            .to_json_value()
            .unwrap(),
        json!(7)
    );
    let names: Vec<String> = v
        .lookup("#D")
        .unwrap()
        .fields(true, false)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        v.lookup("d").unwrap().default().to_json_value().unwrap(),
        json!("dflt")
    );
    let def = v.lookup("#D").unwrap();
    assert!(def.allows("a") && !def.allows("zz"));
    // Unification with a value of another runtime takes its data.
    let other = Runtime::default().value_from_json(&json!({"a": 2}));
    let u = def.unify(&other);
    assert_eq!(u.to_json_value().unwrap(), json!({"a": 2}));
    assert!(matches!(u.to_data().unwrap(), cue::Data::Struct(_)));
    assert_eq!(v.lookup("x").unwrap().to_yaml().unwrap(), "a: 1\n");
    assert!(v.lookup("#D").unwrap().to_cue().contains("b?: string"));
    let e = rt.compile_expr(&v, "x.a + 41").unwrap();
    assert_eq!(e.to_json_value().unwrap(), json!(42));
    // A loaded build, built by hand.
    let fs = cue::module::MemFs::new().with("a.cue", "package a\nn: 3 * 3\n");
    let loaded = cue::module::load(&fs, &cue::module::Target::Dir(String::new()), None);
    let rt2 = Runtime::default();
    let b = rt2.build_loaded(loaded).unwrap();
    assert_eq!(
        b.lookup_path(&p("n")).unwrap().to_json_value().unwrap(),
        json!(9)
    );
}

/// Issue 41: a value computed by nested comprehensions is refused by the runtime's memory
/// budget, naming the budget, the figure reached and the field being evaluated (typed, as
/// `Error::Memory`); what fits stays evaluable, and the budget stays spent for the runtime.
#[test]
fn a_memory_budget_refuses_a_multiplying_comprehension_and_names_the_field() {
    const SRC: &str = "import \"list\"\n_n: list.Range(0, 400, 1)\nsmall: [for i in _n {i}]\nbig: x: len([for a in _n for b in _n for c in _n {a + b + c}])\n";
    let budget = 8u64 << 20;
    let rt = Runtime::new(Config {
        max_memory_bytes: budget,
        max_steps: u64::MAX,
        max_wall_time: Duration::from_secs(600),
        ..Config::default()
    });
    let v = build(&rt, SRC);
    assert!(v.lookup_path(&p("small")).unwrap().validate(true).is_ok());
    let used = rt.memory_used();
    assert!(used > 0 && used < budget, "{used}");
    assert_eq!(rt.memory_exceeded(), None);
    let d = v
        .lookup_path(&p("big"))
        .unwrap()
        .to_json_value()
        .unwrap_err();
    assert!(d.iter().any(|d| d.code == DiagCode::Limit), "{d:?}");
    assert_eq!(rt.limit_exceeded(), Some(Limit::Memory));
    let m = rt.memory_exceeded().unwrap();
    assert_eq!(m.budget, budget);
    assert!(m.reached > budget && m.reached < 2 * budget, "{m:?}");
    assert_eq!(m.path, "big.x");
    assert!(
        d.iter().any(|d| d.message == m.to_string()),
        "the diagnostic says what the typed error says: {d:?}"
    );
    let text = Error::from(m.clone()).to_string();
    assert!(
        text.starts_with("evaluation memory budget (8.0 MiB) exceeded: 8.")
            && text.ends_with(" MiB allocated while evaluating big.x"),
        "{text}"
    );
    // Spent for the runtime: a later value fails as well.
    let again = build(&rt, "z: [for i in [1, 2, 3] {i}]\n");
    assert!(again.to_json_value().is_err());
}

#[test]
fn without_a_memory_budget_the_same_runtime_counts_but_never_refuses() {
    let rt = Runtime::default();
    let v = heavy(&rt, 2000);
    assert!(v.validate(true).is_ok());
    assert!(rt.memory_used() > 2 * 2000 * 64, "{}", rt.memory_used());
    assert_eq!(rt.memory_exceeded(), None);
}

/// `Value::same_sources` (the render matcher reuses a unify verdict on it): values made only of
/// references to the same definitions are one value wherever they are written, in any order,
/// through a pattern or read through a sharing field; a literal, an atom or another
/// definition among the conjuncts makes them different (which says nothing about equality).
#[test]
fn same_sources_are_values_made_of_references_to_the_same_definitions() {
    let rt = Runtime::default();
    let v = build(
        &rt,
        r#"
#A: {a: int}
#B: {b: string}
#C: {a: 1}
m: [string]: #A
m: x: #B
n: [string]: #A
n: x: #B
direct: #B & #A
swapped: #A & #B
holder: x: #B & #A
shared: holder
alias: direct
other: #A & #C
literal: #A & #B & {b: "s"}
atom: 1
atom2: 1
"#,
    );
    let at = |s: &str| v.lookup_path(&p(s)).unwrap_or_else(|| panic!("{s}"));
    let same = |a: &str, b: &str| at(a).same_sources(&at(b));
    assert!(same("m.x", "n.x"), "pattern + field in two maps");
    assert!(
        same("m.x", "direct"),
        "a pattern's reference counts as any other"
    );
    assert!(same("direct", "swapped"), "order does not matter");
    assert!(
        same("direct", "shared.x"),
        "a field read through a sharing value"
    );
    // A reference to a value made of references is not unfolded: equal values, and `false`.
    assert!(!same("direct", "alias"), "one level only");
    assert!(!same("direct", "other"), "another definition");
    assert!(!same("direct", "literal"), "a literal among the conjuncts");
    assert!(!same("atom", "atom2"), "atoms are not references");
    // A value of another runtime is never the same value.
    let rt2 = Runtime::default();
    let v2 = build(&rt2, "#A: {a: int}\n#B: {b: string}\ndirect: #B & #A\n");
    assert!(!at("direct").same_sources(&v2.lookup_path(&p("direct")).unwrap()));
}
