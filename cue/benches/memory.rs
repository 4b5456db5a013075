//! Memory benchmark (issue 12, "Done when"): 1,000 evaluations of an OPM-shaped package in one
//! process, each in its own `Runtime`; resident memory after the last must be within 10 % of
//! resident memory after the tenth (a `Runtime`'s memory is freed when it is dropped, and the
//! shared parse cache does not grow once warm).
//!
//! The package: a catalog module (resources, traits, transformers as definitions) fetched from a
//! registry, and a module instance importing it with values filled in as data; each evaluation
//! builds it, fills values, iterates the transformer definitions, matches components and exports
//! every output to `serde_json::Value` — the render kernel's shape.
//!
//! Run by hand: `cargo bench -p cue --bench memory` (`CUE_MEM_RUNS` changes the 1,000,
//! `CUE_MEM_STACK_MIB` the stack of the thread the renders run on). Prints
//! RSS after run 10 and after the last, and exits non-zero when the growth exceeds 10 %.

use cue::module::{MemFs, MemRegistry, Target};
use cue::{FieldFilter, Path, Runtime, Selector};
use std::process::ExitCode;

const CATALOG: &str = r#"package catalog

#Metadata: {
	name!:      string & =~"^[a-z][a-z0-9-]*$"
	namespace:  *"default" | string
	labels?: [string]: string
}

#Container: {
	image!: string
	ports?: [...{name: string, containerPort: int & >0 & <65536}]
	env?: [string]: string
}

#Component: {
	metadata: #Metadata
	#resources: container: #Container
	#traits: {
		replicas?: int & >=0
		expose?: port: int
	}
}

#DeploymentTransformer: {
	#match: "container"
	#in: #Component
	out: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: {
			name:      #in.metadata.name
			namespace: #in.metadata.namespace
			labels: "app.kubernetes.io/name": #in.metadata.name
		}
		spec: {
			replicas: *#in.#traits.replicas | 1
			selector: matchLabels: "app.kubernetes.io/name": #in.metadata.name
			template: spec: containers: [{
				name:  #in.metadata.name
				image: #in.#resources.container.image
				if #in.#resources.container.env != _|_ {
					env: [for k, v in #in.#resources.container.env {name: k, value: v}]
				}
			}]
		}
	}
}

#ServiceTransformer: {
	#match: "expose"
	#in: #Component
	out: {
		apiVersion: "v1"
		kind:       "Service"
		metadata: name: #in.metadata.name
		spec: ports: [{port: #in.#traits.expose.port, targetPort: #in.#traits.expose.port}]
	}
}
"#;

const APP: &str = r#"package app

import "bench.test/catalog"

#config: {
	image:    string
	replicas: *2 | int
	port:     *8080 | int
	env: [string]: string
}

values: #config

#transformers: {
	deployment: catalog.#DeploymentTransformer
	service:    catalog.#ServiceTransformer
}

components: {
	web: catalog.#Component & {
		metadata: name: "web"
		#resources: container: {image: values.image, env: values.env}
		#traits: {replicas: values.replicas, expose: port: values.port}
	}
	worker: catalog.#Component & {
		metadata: name: "worker"
		#resources: container: image: values.image
	}
}
"#;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|x| x.parse().ok()))
        })
        .unwrap_or(0)
}

fn path(s: &str) -> Result<Path, String> {
    Path::parse(s).map_err(|e| e.to_string())
}

/// One render in its own runtime; returns the number of objects exported.
fn render(reg: &MemRegistry, main: &MemFs, n: usize) -> Result<usize, String> {
    let rt = Runtime::default();
    let pkg = rt
        .build_module(main, &Target::Dir(String::new()), Some(reg))
        .map_err(|d| rt.render(&d))?;
    let values = serde_json::json!({
        "image": format!("registry.test/app:{n}"),
        "env": {"RUN": n.to_string()},
    });
    let pkg = pkg.fill_path(&path("values")?, &values);
    let comps = pkg
        .lookup_path(&path("components")?)
        .ok_or("no components")?;
    let transformers = pkg
        .lookup_path(&path("#transformers")?)
        .ok_or("no #transformers")?;
    let mut objects = 0;
    for c in comps.fields_where(FieldFilter::data()) {
        for t in transformers.fields_where(FieldFilter::data()) {
            if !matches!(t.selector, Selector::Field(_)) {
                continue;
            }
            let matched = t
                .value
                .lookup_path(&path("#match")?)
                .and_then(|m| m.decode::<String>().ok())
                .ok_or("transformer without #match")?;
            let traits = c.value.lookup_path(&path("#traits")?);
            // A trait is present when it is a regular field (the schema declares it optional).
            let has = |sel: &str| {
                traits.as_ref().is_some_and(|t| {
                    t.fields_where(FieldFilter::data())
                        .iter()
                        .any(|f| f.selector == Selector::Field(sel.to_string()))
                })
            };
            if matched != "container" && !has(&matched) {
                continue;
            }
            let data = c.value.to_json_value().map_err(|d| rt.render(&d))?;
            let filled = t.value.fill_path(&path("#in")?, &data);
            // Hidden and definition fields of the component do not travel as data: fill them too.
            let res = c
                .value
                .lookup_path(&path("#resources")?)
                .ok_or("no #resources")?
                .to_json_value()
                .map_err(|d| rt.render(&d))?;
            let filled = filled.fill_path(&path("#in.#resources")?, &res);
            let filled = match traits.as_ref().map(|t| t.to_json_value()) {
                Some(Ok(tr)) => filled.fill_path(&path("#in.#traits")?, &tr),
                _ => filled,
            };
            let out = filled
                .lookup_path(&path("out")?)
                .ok_or("no out")?
                .to_json_value()
                .map_err(|d| rt.render(&d))?;
            if out.get("kind").is_none() {
                return Err(format!("object without kind: {out}"));
            }
            objects += 1;
        }
    }
    Ok(objects)
}

fn main() -> ExitCode {
    // `CUE_MEM_STACK_MIB=N` runs the renders on a thread with an N MiB stack (64: the API
    // never needs to grow it; 2: a `spawn_blocking` thread, every call on a grown segment).
    match std::env::var("CUE_MEM_STACK_MIB")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    {
        Some(mib) => std::thread::Builder::new()
            .stack_size(mib << 20)
            .spawn(run)
            .ok()
            .and_then(|h| h.join().ok())
            .unwrap_or(ExitCode::FAILURE),
        None => run(),
    }
}

fn run() -> ExitCode {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let runs: usize = std::env::var("CUE_MEM_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
        .max(11);
    let reg = MemRegistry::default().with(
        "bench.test/catalog@v0",
        "v0.1.0",
        MemFs::new()
            .with(
                "cue.mod/module.cue",
                "module: \"bench.test/catalog@v0\"\nlanguage: version: \"v0.16.0\"\n",
            )
            .with("catalog.cue", CATALOG),
    );
    let main = MemFs::new()
        .with(
            "cue.mod/module.cue",
            "module: \"bench.test/app@v0\"\nlanguage: version: \"v0.16.0\"\n\
             deps: \"bench.test/catalog@v0\": v: \"v0.1.0\"\n",
        )
        .with("app.cue", APP);
    let start = std::time::Instant::now();
    let mut at10 = 0;
    for n in 1..=runs {
        match render(&reg, &main, n) {
            Ok(3) => {}
            Ok(k) => {
                eprintln!("run {n}: {k} objects, want 3");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("run {n}: {e}");
                return ExitCode::FAILURE;
            }
        }
        if n == 10 {
            at10 = rss_kib();
        }
    }
    let last = rss_kib();
    let growth = (last as f64 - at10 as f64) / at10.max(1) as f64 * 100.0;
    println!(
        "memory: {runs} renders in {:.2?} ({:.2?}/render); RSS after run 10: {at10} KiB, after run {runs}: {last} KiB ({growth:+.1} %)",
        start.elapsed(),
        start.elapsed() / runs as u32,
    );
    if growth > 10.0 {
        eprintln!("memory grew more than 10 % between run 10 and run {runs}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
