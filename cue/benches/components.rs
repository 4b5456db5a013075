//! Component-count benchmark (issue 11): renders a generated OPM-shaped module (our own schema,
//! not OPM's sources) with 10, 50 and 129 components and prints wall time and peak resident
//! memory for each, each size in a fresh process so peaks do not mix. Evaluation cost must grow
//! linearly in the component count.
//!
//! The schema has the shapes docs/design/render.md §3 lists as OPM's hot spots: primitives with a
//! `spec!: (name): _` dynamic field, `#Component` fragments embedded several times into each
//! component, `spec: close({_allFields})` built by comprehensions over the attached
//! primitives, a default disjunction over a regex type (`resourceName: *name | #NameType`),
//! `string | int | bool | [...]` label maps, and a render step that unifies every component
//! into each matching transformer's `#transform`.
//!
//! Run: `cargo bench -p cue --bench components` (release); `-- --one N` runs one size.

use std::process::{Command, ExitCode};
use std::time::Instant;

const SCHEMA: &str = r#"
#NameType: string & =~"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
#Labels: [string]: string | int | bool | [string | int | bool]
#Primitive: {
	metadata: {
		name!: #NameType
		fqn!:  string
	}
	matchLabels?: #Labels
	spec!: (metadata.name): _
}
#Component: {
	metadata: {
		name!:        #NameType
		resourceName: *name | #NameType
		labels?:      #Labels
	}
	#resources: [string]: #Primitive
	#traits?: [string]: #Primitive
	_allFields: {
		for _, r in #resources {
			if r.spec != _|_ {r.spec}
		}
		if #traits != _|_ {
			for _, t in #traits {
				if t.spec != _|_ {t.spec}
			}
		}
	}
	matchLabels: {
		for _, r in #resources {
			if r.matchLabels != _|_ {r.matchLabels}
		}
	}
	#names: {
		resourceName: metadata.resourceName
		dns: short: resourceName
	}
	spec: close({_allFields})
}
#Container: #Primitive & {
	metadata: {name: "container", fqn: "example.com/resources/container@v1"}
	matchLabels: "workload-type"!: "stateless" | "stateful"
	spec: container: {
		image!: string
		pullPolicy: *"IfNotPresent" | "Always" | "Never"
		ports?: [string]: {port!: int & >0 & <65536, protocol: *"TCP" | "UDP"}
	}
}
#Scaling: #Primitive & {
	metadata: {name: "scaling", fqn: "example.com/traits/scaling@v1"}
	spec: scaling: replicas: *1 | int & >=0
}
#Expose: #Primitive & {
	metadata: {name: "expose", fqn: "example.com/traits/expose@v1"}
	spec: expose: type: *"ClusterIP" | "NodePort" | "LoadBalancer"
}
#Stateless: #Primitive & {
	metadata: {name: "stateless", fqn: "example.com/blueprints/stateless@v1"}
	matchLabels: "workload-type": "stateless"
	spec: stateless: {}
}
#ContainerFragment: #Component & {#resources: (#Container.metadata.fqn): #Container}
#ScalingFragment: #Component & {#traits: (#Scaling.metadata.fqn): #Scaling}
#ExposeFragment: #Component & {#traits: (#Expose.metadata.fqn): #Expose}
#StatelessFragment: #Component & {#resources: (#Stateless.metadata.fqn): #Stateless}
#Transformer: {
	requiredLabels?: #Labels
	requiredResources: [string]: _
	#transform: {
		#component: _
		output: {...}
	}
}
transformers: {
	deployment: #Transformer & {
		requiredLabels: "workload-type": "stateless"
		requiredResources: (#Container.metadata.fqn): _
		#transform: {
			#component: _
			output: {
				kind: "Deployment"
				metadata: name: #component.#names.resourceName
				spec: {
					replicas: #component.spec.scaling.replicas
					template: spec: containers: [{
						name:            #component.metadata.name
						image:           #component.spec.container.image
						imagePullPolicy: #component.spec.container.pullPolicy
						if #component.spec.container.ports != _|_ {
							ports: [for n, p in #component.spec.container.ports {
								{name: n, containerPort: p.port, protocol: p.protocol}
							}]
						}
					}]
				}
			}
		}
	}
	service: #Transformer & {
		requiredResources: (#Container.metadata.fqn): _
		#transform: {
			#component: _
			output: {
				kind: "Service"
				metadata: name: #component.#names.dns.short
				spec: type: #component.spec.expose.type
			}
		}
	}
}
#Module: {
	#components: [Id=#NameType]: #Component & {metadata: name: string | *Id}
}
"#;

const RENDER: &str = r#"
rendered: {
	for cname, comp in module.#components
	for tname, tf in transformers {
		let _missing = [
			for k, v in tf.requiredLabels if comp.matchLabels[k] == _|_ || comp.matchLabels[k] != v {k},
			for f, _ in tf.requiredResources if comp.#resources[f] == _|_ {f},
		]
		if len(_missing) == 0 {
			"\(cname)/\(tname)": (tf.#transform & {#component: comp}).output
		}
	}
}
"#;

/// The module: `n` components, each made of four fragments plus its own values.
fn module(n: usize) -> String {
    let mut s = String::from("module: #Module & {\n\t#components: {\n");
    for i in 0..n {
        s.push_str(&format!(
            "\t\t\"app-{i}\": {{\n\t\t\t#ContainerFragment\n\t\t\t#ScalingFragment\n\
             \t\t\t#ExposeFragment\n\t\t\t#StatelessFragment\n\
             \t\t\tmetadata: labels: {{tier: \"web\", index: {i}, canary: false}}\n\
             \t\t\tspec: {{\n\t\t\t\tcontainer: {{\n\t\t\t\t\timage: \"registry.example/app:{i}\"\n\
             \t\t\t\t\tports: http: port: 8080\n\t\t\t\t}}\n\
             \t\t\t\tscaling: replicas: {r}\n\t\t\t\texpose: type: \"ClusterIP\"\n\
             \t\t\t\tstateless: {{}}\n\t\t\t}}\n\t\t}}\n",
            r = 1 + i % 3
        ));
    }
    s.push_str("\t}\n}\n");
    s
}

/// Peak resident memory of this process in KiB (`VmHWM`), if the platform reports it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Renders one module of `n` components; returns the number of rendered objects.
fn run_one(n: usize) -> Result<usize, String> {
    let src = format!("{SCHEMA}\n{}\n{RENDER}", module(n));
    let rt = cue::Runtime::new(cue::Config::default());
    let v = rt
        .build_files(&[("bench.cue".to_string(), src)])
        .map_err(|d| rt.render(&d))?;
    let r = v.lookup("rendered").ok_or("no rendered field")?;
    let json = r.to_json().map_err(|d| rt.render(&d))?;
    let objects = json.matches("\"kind\"").count();
    if objects != 2 * n {
        return Err(format!("rendered {objects} objects, expected {}", 2 * n));
    }
    Ok(objects)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--one") {
        let n: usize = args.get(pos + 1).and_then(|a| a.parse().ok()).unwrap_or(10);
        let h = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                let start = Instant::now();
                let r = run_one(n);
                (r, start.elapsed())
            });
        let (r, took) = match h.map(|h| h.join()) {
            Ok(Ok(x)) => x,
            _ => {
                eprintln!("components={n}: evaluator thread failed");
                return ExitCode::FAILURE;
            }
        };
        match r {
            Ok(objects) => println!(
                "components={n:<4} objects={objects:<4} time={:>8.3}s  peak_rss={:>8} KiB",
                took.as_secs_f64(),
                peak_rss_kib().map_or("?".to_string(), |k| k.to_string())
            ),
            Err(e) => {
                eprintln!("components={n}: {e}");
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot find the benchmark binary: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    for n in [10usize, 50, 129] {
        match Command::new(&exe).args(["--one", &n.to_string()]).status() {
            Ok(s) if s.success() => {}
            _ => failed = true,
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
