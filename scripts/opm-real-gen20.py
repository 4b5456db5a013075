#!/usr/bin/env python3
"""opm-real-gen20.py WORKSPACE — generate the 20-component real-shaped module into WORKSPACE.

WORKSPACE is a directory made by the opm-real tool's assemble.sh (see scripts/opm-real.sh). The
module, WORKSPACE/gen_components20, is built from the real sources on disk, never committed here:

- its cue.mod (the vendored core and catalog), module metadata, `#config` and `debugValues` are
  web_app's (WORKSPACE/lib_web_app), renamed;
- its components scale web_app's two components — `web` (the StatelessWorkload blueprint with
  HttpRoute and Expose) eight times, `config` (ConfigMaps) four times — and add components on
  four more of the catalog's blueprints: three StatefulWorkload (volumes, Expose, env and
  resources hoisted to component level under guards, as the fleet modules write them), two
  DaemonWorkload, two TaskWorkload, one ScheduledTaskWorkload: 20 components;
- its harness (opm-synth-instance) is web_app's, pointed at this module;
- .opm_real_expect.tsv lists the (component, transformer) pairs upstream renders for it.

It is what memory and time on comprehension-heavy code are measured on (issue 43): a module the
size of a real application, on the real catalog. Idempotent: the directory is replaced.
"""
import os
import re
import shutil
import sys

NAME = "gen_components20"
MODULE_PATH = "testing.opmodel.dev/modules/gen_components20@v1"
WEB, CONFIG = 8, 4

STATEFUL = """
	{name}: {{
		bp.#StatefulWorkload
		tr.#Expose

		metadata: name: "{name}"

		// Hoisted guards over the component's own settings (the fleet's form).
		if _settings.env != _|_ {{
			spec: statefulWorkload: container: env: {{
				for k, v in _settings.env {{
					(k): {{
						name:  k
						value: v
					}}
				}}
			}}
		}}
		if _settings.resources != _|_ {{
			spec: statefulWorkload: container: resources: _settings.resources
		}}
		_settings: {{
			env: {{
				DB_NAME: "{name}"
				DB_PORT: "5432"
			}}
			resources: requests: {{cpu: "100m", memory: "256Mi"}}
		}}

		spec: {{
			statefulWorkload: {{
				scaling: count: 1
				restartPolicy: "Always"
				updateStrategy: type: "RollingUpdate"
				container: {{
					name:  "{name}"
					image: #config.image
					ports: db: {{
						name:       "db"
						targetPort: 5432
					}}
					volumeMounts: data: spec.statefulWorkload.volumes.data & {{
						mountPath: "/var/lib/data"
					}}
				}}
				volumes: data: {{
					name:     "data"
					readOnly: false
					persistentClaim: {{size: "1Gi", accessMode: "ReadWriteOnce", storageClass: "standard"}}
				}}
			}}
			expose: {{
				type: "ClusterIP"
				ports: db: {{
					name:       "db"
					targetPort: 5432
				}}
			}}
		}}
	}}
"""

DAEMON = """
	{name}: {{
		bp.#DaemonWorkload

		metadata: name: "{name}"

		spec: daemonWorkload: {{
			restartPolicy: "Always"
			updateStrategy: type: "RollingUpdate"
			container: {{
				name:  "{name}"
				image: #config.image
				args: ["--node", "$(NODE_NAME)"]
				ports: metrics: {{
					name:       "metrics"
					targetPort: 9100
				}}
			}}
		}}
	}}
"""

TASK = """
	{name}: {{
		bp.#TaskWorkload

		metadata: name: "{name}"

		spec: taskWorkload: {{
			restartPolicy: "OnFailure"
			container: {{
				name:  "{name}"
				image: #config.image
				command: ["/bin/migrate", "--step", "{index}"]
			}}
		}}
	}}
"""

CRON = """
	{name}: {{
		bp.#ScheduledTaskWorkload

		metadata: name: "{name}"

		spec: scheduledTaskWorkload: {{
			restartPolicy: "OnFailure"
			cronJobConfig: {{
				scheduleCron:      "0 3 * * *"
				concurrencyPolicy: "Forbid"
			}}
			container: {{
				name:  "{name}"
				image: #config.image
				command: ["/bin/backup"]
			}}
		}}
	}}
"""


def top_level_block(text, key):
    """The text of `\\tkey: {...}` inside #components (brace-matched), without the key line."""
    m = re.search(r"^\t" + re.escape(key) + r": \{\n", text, re.M)
    if not m:
        sys.exit(f"web_app's components.cue has no component {key!r}")
    depth, i = 1, m.end()
    while depth:
        c = text[i]
        depth += (c == "{") - (c == "}")
        i += 1
    return text[m.end():i - 1]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: opm-real-gen20.py WORKSPACE")
    ws = os.path.abspath(sys.argv[1])
    src = os.path.join(ws, "lib_web_app")
    dst = os.path.join(ws, NAME)
    if not os.path.isdir(src):
        sys.exit(f"{src} is missing: not a workspace made by assemble.sh")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(os.path.join(src, "cue.mod"), os.path.join(dst, "cue.mod"), symlinks=True)
    with open(os.path.join(dst, "cue.mod", "module.cue"), "w") as f:
        f.write(open(os.path.join(src, "cue.mod", "module.cue")).read()
                .replace("testing.opmodel.dev/modules/web_app@v1", MODULE_PATH))

    module = open(os.path.join(src, "module.cue")).read()
    module = module.replace("package web_app", f"package {NAME}")
    module = module.replace("testing.opmodel.dev/modules/web_app@v1", MODULE_PATH)
    module = re.sub(r'name:( +)"web_app"', rf'name:\1"{NAME}"', module)
    module = re.sub(r'description:( +)"[^"]*"',
                    r'description:\1"20 components on the real catalog, generated from web_app"', module)
    with open(os.path.join(dst, "module.cue"), "w") as f:
        f.write(module)

    comps = open(os.path.join(src, "components.cue")).read()
    head = comps[:comps.index("#components: {")]
    head = head.replace("package web_app", f"package {NAME}")
    web = top_level_block(comps, "web")
    config = top_level_block(comps, "config")
    out = [head, "#components: {\n"]
    expect = []
    for i in range(WEB):
        name = f"web-{i}"
        body = web.replace('name: "web"', f'name: "{name}"').replace('name:  "web"', f'name:  "{name}"')
        out.append(f'\t"{name}": {{\n{body}}}\n')
        expect += [f"{name}/deployment-transformer", f"{name}/service-transformer",
                   f"{name}/http-route-transformer"]
    for i in range(CONFIG):
        name = f"config-{i}"
        body = config.replace('name: "config"', f'name: "{name}"')
        out.append(f'\t"{name}": {{\n{body}}}\n')
        expect.append(f"{name}/configmap-transformer")
    for i in range(3):
        name = f"db{i}"
        out.append(STATEFUL.format(name=name))
        expect += [f"{name}/statefulset-transformer", f"{name}/service-transformer",
                   f"{name}/pvc-transformer"]
    for i in range(2):
        name = f"agent{i}"
        out.append(DAEMON.format(name=name))
        expect.append(f"{name}/daemonset-transformer")
    for i in range(2):
        name = f"migrate{i}"
        out.append(TASK.format(name=name, index=i))
        expect.append(f"{name}/job-transformer")
    out.append(CRON.format(name="backup"))
    expect.append("backup/cronjob-transformer")
    out.append("}\n")
    text = "".join(out)
    if "bp " not in head:
        sys.exit("web_app's components.cue no longer imports the blueprints as bp")
    with open(os.path.join(dst, "components.cue"), "w") as f:
        f.write(text)

    harness = os.path.join(dst, "opm-synth-instance")
    shutil.copytree(os.path.join(src, "opm-synth-instance"), harness)
    inst = os.path.join(harness, "instance.cue")
    with open(inst) as f:
        t = f.read().replace("testing.opmodel.dev/modules/web_app@v1", MODULE_PATH)
    t = t.replace('name:      "web-app"', 'name:      "gen-components20"')
    with open(inst, "w") as f:
        f.write(t)
    with open(os.path.join(dst, ".opm_real_expect.tsv"), "w") as f:
        f.writelines(f"{NAME}\t{p}\n" for p in expect)
    print(f"{dst}: {WEB + CONFIG + 8} components, {len(expect)} expected pairs")


if __name__ == "__main__":
    main()
