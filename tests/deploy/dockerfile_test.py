"""The Dockerfile: lint-clean, and what it relies on holds.

There is no Docker engine on our machines, so the image is not built here;
instead CI runs the very scripts its RUN steps call (scripts/setup.sh,
scripts/build.sh, scripts/install.sh: install_test.sh and
runtime_packages_test.py). This test:

- lints it with dockerfilelint (npm; FAILS when dockerfilelint is missing:
  scripts/setup.sh installs it, and scripts/test.sh runs that first);
- checks its shape: a build stage FROM debian:bookworm that runs
  scripts/setup.sh, scripts/build.sh and scripts/install.sh; a final stage
  FROM debian:bookworm-slim that installs its packages only with
  `scripts/install.sh --runtime-packages`, copies only the installed
  prefix from the build stage, runs as a numeric non-root USER, EXPOSEs
  slackswapd's default gRPC and metrics ports (from `slackswapd --help`),
  has a HEALTHCHECK running `slackswap health` against the exposed gRPC
  port, and starts slackswapd;
- checks the build context: every COPY source exists and is not excluded
  by .dockerignore, which does exclude .git and the build directories.

  /usr/bin/python3 tests/deploy/dockerfile_test.py \
      --slackswapd build/server/slackswapd
"""

import argparse
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_util as du  # noqa: E402

DOCKERFILELINT_VERSION = "1.8.0"


def find_dockerfilelint():
    """$SLACKSWAP_DOCKERFILELINT, scripts/setup.sh's cache, PATH."""
    env = os.environ.get("SLACKSWAP_DOCKERFILELINT")
    if env:
        return env if os.access(env, os.X_OK) else None
    tools = os.environ.get("SLACKSWAP_TOOLS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or
        os.path.join(os.path.expanduser("~"), ".cache"), "slackswap-tools")
    cached = os.path.join(tools, f"dockerfilelint-{DOCKERFILELINT_VERSION}",
                          "node_modules", ".bin", "dockerfilelint")
    if os.access(cached, os.X_OK):
        return cached
    return shutil.which("dockerfilelint")


def parse_dockerfile(path):
    """[(instruction, arguments, line number)], continuations joined."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        start = i
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.rstrip().endswith("\\") and i < len(lines):
            line = line.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
        word, _, rest = line.strip().partition(" ")
        out.append((word.upper(), rest.strip(), start + 1))
    return out


def dockerignore_patterns():
    path = os.path.join(du.REPO, ".dockerignore")
    du.check(os.path.exists(path), ".dockerignore is missing")
    pats = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                pats.append(line)
    return pats


def ignored(rel, patterns):
    """Docker's rules, simplified: the last matching pattern wins; a pattern
    matches a path or any of its parent directories."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    result = False
    for pat in patterns:
        neg = pat.startswith("!")
        p = pat[1:] if neg else pat
        p = p.strip("/")
        if p.startswith("**/"):
            hit = any(fnmatch.fnmatch(x.split("/")[-1], p[3:]) or
                      fnmatch.fnmatch(x, p[3:]) for x in prefixes)
        else:
            hit = any(fnmatch.fnmatch(x, p) for x in prefixes)
        if hit:
            result = not neg
    return result


def json_or_shell(args):
    args = args.strip()
    if args.startswith("["):
        return json.loads(args)
    return shlex.split(args)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswapd", required=True)
    args = parser.parse_args()
    dockerfile = os.path.join(du.REPO, "Dockerfile")
    du.check(os.path.exists(dockerfile), "no Dockerfile at the root")

    # --- lint ---------------------------------------------------------------
    lint = find_dockerfilelint()
    du.check(lint is not None, f"dockerfilelint not found: run `bash "
             f"scripts/setup.sh` (npm, dockerfilelint@"
             f"{DOCKERFILELINT_VERSION}; scripts/test.sh does), or set "
             f"SLACKSWAP_DOCKERFILELINT")
    r = subprocess.run([lint, "--output", "json", dockerfile],
                       capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    try:
        report = json.loads(r.stdout)
    except ValueError:
        du.fail(f"dockerfilelint printed no JSON ({r.returncode}):\n"
                f"{r.stdout}{r.stderr}")
    issues = [i for f in report.get("files", []) for i in f.get("issues", [])]
    du.check(r.returncode == 0 and not issues,
             "dockerfilelint found issues:\n" + "\n".join(
                 f"  line {i.get('line')}: {i.get('title')}: "
                 f"{i.get('description')}" for i in issues))
    print(f"ok: dockerfilelint ({lint}) finds no issue")

    # --- shape --------------------------------------------------------------
    instructions = parse_dockerfile(dockerfile)
    stages = []
    for word, rest, line in instructions:
        if word == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            du.check(m is not None, f"line {line}: FROM {rest}")
            stages.append({"image": m.group(1), "name": m.group(2),
                           "ins": []})
        else:
            du.check(stages, f"line {line}: {word} before FROM")
            stages[-1]["ins"].append((word, rest, line))
    du.check(len(stages) == 2, f"want two stages (build, runtime), found "
             f"{len(stages)}")
    build, runtime = stages
    du.check(build["image"] == "debian:bookworm" and build["name"],
             f"the build stage is FROM {build['image']}: want a named "
             f"debian:bookworm stage")
    du.check(runtime["image"] == "debian:bookworm-slim",
             f"the runtime stage is FROM {runtime['image']}: want "
             f"debian:bookworm-slim")

    def runs(stage):
        return " ; ".join(r for w, r, _ in stage["ins"] if w == "RUN")
    build_runs = runs(build)
    for script in ("scripts/setup.sh", "scripts/build.sh",
                   "scripts/install.sh"):
        du.check(re.search(rf"bash {re.escape(script)}\b", build_runs),
                 f"the build stage does not run {script} (CI's scripts)")
    du.check(re.search(r"build\.sh[^;]*--target slackswapd slackswap",
                       build_runs), "the build stage should build only "
             "slackswapd and slackswap")
    m = re.search(r"install\.sh (?:--strip )?(/\S+)", build_runs)
    du.check(m is not None, "the build stage's install.sh has no prefix")
    prefix = m.group(1)

    runtime_runs = runs(runtime)
    du.check(re.search(r"install\.sh --runtime-packages", runtime_runs),
             "the runtime stage does not install its packages with "
             "install.sh --runtime-packages")
    du.check("apt-get install" not in runtime_runs,
             "the runtime stage installs packages other than "
             "scripts/runtime-packages.txt's")
    du.check("rm -rf /var/lib/apt/lists" in runtime_runs,
             "the runtime stage keeps apt's lists")
    from_build = [r for w, r, _ in runtime["ins"]
                  if w == "COPY" and "--from=" in r]
    du.check(len(from_build) == 1 and
             f"--from={build['name']}" in from_build[0] and
             json_or_shell(from_build[0])[1].rstrip("/") == prefix,
             f"the runtime stage should copy only {prefix} from the build "
             f"stage: {from_build}")

    def last(stage, word):
        found = [r for w, r, _ in stage["ins"] if w == word]
        du.check(found, f"the runtime stage has no {word}")
        return found[-1]
    user = last(runtime, "USER")
    du.check(re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", user),
             f"USER {user}: want a numeric non-root UID[:GID] (so "
             f"runAsNonRoot can verify it)")
    defaults = du.slackswapd_flags(args.slackswapd)
    exposed = sorted(int(p.split("/")[0])
                     for p in last(runtime, "EXPOSE").split())
    want = sorted([int(defaults["port"]), int(defaults["metrics_port"])])
    du.check(exposed == want, f"EXPOSE {exposed}; slackswapd's default "
             f"--port and --metrics_port are {want}")
    hc = last(runtime, "HEALTHCHECK")
    m = re.fullmatch(r"((?:--\S+\s+)*)CMD\s+(.*)", hc)
    du.check(m is not None, f"HEALTHCHECK {hc}")
    argv = json_or_shell(m.group(2))
    du.check(argv[:2] == ["slackswap", "health"], f"HEALTHCHECK runs "
             f"{argv}: want `slackswap health`")
    server = argv[argv.index("--server") + 1]
    du.check(server.rsplit(":", 1)[1] == defaults["port"],
             f"HEALTHCHECK checks {server}, slackswapd serves on "
             f"{defaults['port']}")
    entry = json_or_shell(last(runtime, "ENTRYPOINT"))
    du.check(entry == ["slackswapd"], f"ENTRYPOINT {entry}")
    print(f"ok: {build['image']} build stage runs setup/build/install.sh; "
          f"{runtime['image']} runtime as USER {user}, EXPOSE {exposed}, "
          f"HEALTHCHECK `{' '.join(argv)}`")

    # --- build context ------------------------------------------------------
    patterns = dockerignore_patterns()
    for must in (".git", "build", "build-asan/CMakeCache.txt"):
        du.check(ignored(must, patterns),
                 f".dockerignore does not exclude {must}")
    for stage in stages:
        for word, rest, line in stage["ins"]:
            if word not in ("COPY", "ADD") or "--from=" in rest:
                continue
            srcs = [a for a in json_or_shell(rest) if not a.startswith("--")]
            for src in srcs[:-1]:
                if src == ".":
                    continue
                du.check(os.path.exists(os.path.join(du.REPO, src)),
                         f"line {line}: COPY source {src} does not exist")
                du.check(not ignored(src.rstrip("/"), patterns),
                         f"line {line}: COPY source {src} is excluded by "
                         f".dockerignore")
    for needed in ("scripts/setup.sh", "scripts/build.sh",
                   "scripts/install.sh", "scripts/runtime-packages.txt",
                   "CMakeLists.txt", "server/slackswapd_main.cc"):
        du.check(not ignored(needed, patterns),
                 f".dockerignore excludes {needed}, which the build needs")
    print("ok: every COPY source exists in the build context")
    print("PASS")


if __name__ == "__main__":
    main()
