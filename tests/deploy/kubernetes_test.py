"""deploy/kubernetes/, rendered by `kubectl kustomize`, agrees with itself,
with slackswapd's flags, with the image and with the Prometheus config.

Renders the kustomization with the real kubectl and checks the objects:

- exactly one each of Namespace, ConfigMap (the generated flag file),
  two Secrets (the generated Redis password and fleet secret),
  HorizontalPodAutoscaler,
  PodDisruptionBudget and NetworkPolicy, two Deployments (slackswapd,
  redis) and three Services; everything namespaced lives in the one
  namespace;
- the flag file: every flag is one of slackswapd's (`slackswapd --help`);
  the real slackswapd starts with it (ports overridden to free loopback
  ones) and reports its threads, queue and cache; its gRPC and metrics
  ports are the container's named ports; it listens on 0.0.0.0;
  --threads equals the CPU request and limit; the memory limit holds the
  worst case of the memory flags (and the shared tier's buffers); it is
  mounted where the container's --flagfile points, from the ConfigMap
  kustomize generated;
- the shared tier: --shared_store names the Redis Service (its DNS name in
  this namespace, its port) with no password in the URL;
  --shared_store_password_file is mounted from the Secret whose key Redis
  reads for --requirepass; --shared_store_secret_file from a Secret of its
  own (at least 32 bytes) that no other Deployment reads; a real redis-server started with the Redis
  container's arguments (the Secret's password substituted, loopback and a
  free port) is a password-protected, non-persistent LRU cache of
  --maxmemory, answers the probes' command (and the probes fail without
  the password); the real slackswapd started with the flag file (the
  Redis address made that server's, the password and secret files the
  Secrets') connects to it (slackswap_shared_store_up 1) and seals with a
  MAC; the Redis Deployment is
  one replica, non-root, read-only, pinned, with requests, limits above
  --maxmemory and exec probes; the NetworkPolicy lets only slackswapd's
  pods reach Redis's port;
- probes: native gRPC readiness and liveness probes on the gRPC port; the
  readiness probe's service name and the liveness probe's "" are SERVING
  on the real slackswapd (grpc.health.v1.Health/Check over the wire);
- shutdown: terminationGracePeriodSeconds covers the preStop sleep plus
  --grace_s plus a margin;
- security: non-root (the Dockerfile's USER is the same UID), read-only
  root filesystem, no privilege escalation, every capability dropped,
  RuntimeDefault seccomp; requests and limits for CPU and memory;
- Services: the gRPC one headless, the metrics and Redis ones ClusterIP,
  selectors match the pod labels, target ports name container ports and
  the port numbers agree;
- HPA: targets the Deployment, minReplicas >= 2 (the PDB can then always
  evict one), CPU utilisation (which needs the CPU request); the
  Deployment leaves replicas to the HPA; PDB: selects the pods;
- Prometheus (deploy/prometheus/): the DNS discovery name is the headless
  Service in this namespace, on the metrics port; the queue alert's
  threshold is 75% of --max_queue.

  /usr/bin/python3 tests/deploy/kubernetes_test.py \
      --slackswapd build/server/slackswapd --kubectl /usr/bin/kubectl

redis-server and redis-cli (Debian's redis-server, the test tier of
scripts/setup.sh) are taken from PATH unless --redis-server and
--redis-cli name them.
"""

import argparse
import base64
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_util as du  # noqa: E402

PRESTOP_MARGIN_S = 3

# Memory of slackswapd's process beside what its flags bound.
PROCESS_MIB = 40
# The shared tier's queue of writes waiting for Redis, MiB: a constant of
# slackswapd, SharedStoreOptions.max_queued_write_bytes
# (server/shared_store.h), not a flag.
SHARED_WRITE_QUEUE_MIB = 64
# Redis's memory limit must leave this share above --maxmemory
# (fragmentation, client buffers, the process).
REDIS_LIMIT_OVER_MAXMEMORY = 1.25
# --shared_store: redis[s]://[user[:password]@]host[:port][/db].
REDIS_URL = re.compile(r"(rediss?)://(?:([^:@/]*)(?::([^@/]*))?@)?"
                       r"(\[[^\]]+\]|[^:/\[\]]+)(?::(\d+))?(?:/(\d+))?")


def render(kubectl):
    d = os.path.join(du.REPO, "deploy", "kubernetes")
    r = subprocess.run([kubectl, "kustomize", d], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    du.check(r.returncode == 0, f"kubectl kustomize {d} failed "
             f"({r.returncode}):\n{r.stderr}")
    return du.load_yaml_docs(r.stdout)


def one(objects, kind, **match):
    found = [o for o in objects if o["kind"] == kind and all(
        o["metadata"].get(k) == v for k, v in match.items())]
    du.check(len(found) == 1, f"expected one {kind} {match or ''}, found "
             f"{len(found)}")
    return found[0]


def cpu_cores(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def mem_bytes(q):
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 1e3, "M": 1e6,
             "G": 1e9}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]i?)?", str(q))
    du.check(m is not None, f"memory quantity {q!r}")
    return float(m.group(1)) * units.get(m.group(2), 1)


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def health_check(target, service):
    """grpc.health.v1.Health/Check over the wire; returns the status enum."""
    import grpc  # python3-grpcio
    name = service.encode("utf-8")
    # HealthCheckRequest{string service = 1}, encoded by hand.
    request = (b"\x0a" + bytes([len(name)]) + name) if name else b""
    with grpc.insecure_channel(target) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        response = check(request, timeout=10)
    # HealthCheckResponse{ServingStatus status = 1}: 0x08 <varint>.
    if not response:
        return 0  # UNKNOWN: the default, encoded as nothing
    du.check(response[0] == 0x08, f"unexpected health response {response!r}")
    return response[1]


def dockerfile_user():
    with open(os.path.join(du.REPO, "Dockerfile"), encoding="utf-8") as f:
        users = re.findall(r"^USER\s+(\S+)", f.read(), re.M)
    du.check(users, "the Dockerfile sets no USER")
    return users[-1]


def check_security(what, pod, c):
    """The restricted profile: returns the container's UID."""
    psc = pod.get("securityContext", {})
    csc = c.get("securityContext", {})
    du.check(psc.get("runAsNonRoot") or csc.get("runAsNonRoot"),
             f"{what}: runAsNonRoot is not set")
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    du.check(uid is not None and uid != 0,
             f"{what}: runAsUser must be a non-zero UID")
    du.check(csc.get("readOnlyRootFilesystem") is True,
             f"{what}: readOnlyRootFilesystem is not true")
    du.check(csc.get("allowPrivilegeEscalation") is False,
             f"{what}: allowPrivilegeEscalation is not false")
    du.check(csc.get("capabilities", {}).get("drop") == ["ALL"],
             f"{what}: capabilities are not all dropped")
    du.check((psc.get("seccompProfile") or csc.get("seccompProfile") or {})
             .get("type") == "RuntimeDefault",
             f"{what}: no RuntimeDefault seccomp")
    du.check(pod.get("automountServiceAccountToken") is False,
             f"{what}: the service account token is mounted")
    return uid


def check_resources(what, c):
    res = c.get("resources", {})
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            du.check(r in res.get(kind, {}), f"{what}: no {r} {kind}")
    du.check(cpu_cores(res["requests"]["cpu"]) <=
             cpu_cores(res["limits"]["cpu"]), f"{what}: CPU request above "
             f"limit")
    du.check(mem_bytes(res["requests"]["memory"]) <=
             mem_bytes(res["limits"]["memory"]),
             f"{what}: memory request above limit")
    return res


def check_image(what, image):
    du.check(re.fullmatch(r"[^:@\s]+(:[\w.-]+|@sha256:[0-9a-f]{64})", image)
             and not image.endswith(":latest"),
             f"{what}: container image {image!r}: want a pinned tag or "
             f"digest")


def secret_value(objects, name, key):
    secret = one(objects, "Secret", name=name)
    if key in secret.get("stringData", {}):
        return secret["stringData"][key]
    du.check(key in secret.get("data", {}), f"Secret {name} has no key {key}")
    return base64.b64decode(secret["data"][key]).decode("utf-8")


def container_env(objects, c):
    """{name: value} of a container's env, Secret references resolved."""
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
            continue
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        du.check(ref, f"env {e['name']}: only values and secretKeyRef are "
                 f"understood here")
        env[e["name"]] = secret_value(objects, ref["name"], ref["key"])
    return env


def expand(arg, env):
    """Kubernetes' $(VAR) expansion of a container argument."""
    def one_var(m):
        du.check(m.group(1) in env, f"argument {arg!r} names $({m.group(1)}),"
                 f" which the container's env does not set")
        return env[m.group(1)]
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one_var, arg)


def option_pairs(args):
    """{option: value} of `--name value` arguments (redis-server's)."""
    out = {}
    i = 0
    while i < len(args):
        du.check(args[i].startswith("--"), f"argument {args[i]!r} is not "
                 f"--name followed by its value")
        du.check(i + 1 < len(args) and not args[i + 1].startswith("--"),
                 f"option {args[i]} has no value")
        du.check(args[i][2:] not in out, f"option {args[i]} is given twice")
        out[args[i][2:]] = args[i + 1]
        i += 2
    return out


def redis_cli(cli, port, args, password=None):
    env = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
    if password is not None:
        env["REDISCLI_AUTH"] = password
    r = subprocess.run([cli, "-h", "127.0.0.1", "-p", str(port)] + args,
                       capture_output=True, text=True, timeout=10, env=env,
                       stdin=subprocess.DEVNULL)
    return r.stdout.strip()


def probe_passes(command, cli, port, password):
    """Runs an exec probe's command against the local Redis; exit 0?"""
    local = []
    for a in command:  # redis-cli as an argument, or in a shell's script
        if a == "redis-cli":
            local += [cli, "-h", "127.0.0.1", "-p", str(port)]
        else:
            local.append(a.replace("redis-cli",
                                   f"{cli} -h 127.0.0.1 -p {port}"))
    env = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
    env["REDISCLI_AUTH"] = password
    r = subprocess.run(local, capture_output=True, text=True, timeout=10,
                       env=env, stdin=subprocess.DEVNULL)
    return r.returncode == 0


def scrape_value(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswapd", required=True)
    parser.add_argument("--kubectl", default="/usr/bin/kubectl")
    parser.add_argument("--redis-server",
                        default=shutil.which("redis-server") or
                        "/usr/bin/redis-server")
    parser.add_argument("--redis-cli", default=shutil.which("redis-cli") or
                        "/usr/bin/redis-cli")
    args = parser.parse_args()
    du.check(os.access(args.kubectl, os.X_OK), f"{args.kubectl} not found "
             f"(kubectl renders deploy/kubernetes with `kubectl kustomize`)")
    for tool in (args.redis_server, args.redis_cli):
        du.check(os.access(tool, os.X_OK), f"{tool} not found (Debian's "
                 f"redis-server, scripts/setup.sh's test tier)")

    objects = render(args.kubectl)
    kinds = sorted(o["kind"] for o in objects)
    du.check(kinds == sorted(["Namespace", "ConfigMap", "Secret", "Secret",
                              "Deployment", "Deployment",
                              "HorizontalPodAutoscaler",
                              "PodDisruptionBudget", "NetworkPolicy",
                              "Service", "Service", "Service"]),
             f"rendered kinds: {kinds}")
    namespace = one(objects, "Namespace")["metadata"]["name"]
    for o in objects:
        if o["kind"] != "Namespace":
            du.check(o["metadata"].get("namespace") == namespace,
                     f"{o['kind']} {o['metadata']['name']} is not in "
                     f"namespace {namespace}")
    print(f"ok: rendered {len(objects)} objects in namespace {namespace}")

    deploy = one(objects, "Deployment", name="slackswapd")
    spec = deploy["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"]["labels"]
    du.check(selects(spec["selector"]["matchLabels"], pod_labels),
             "the Deployment's selector does not match its pod labels")
    containers = pod["containers"]
    du.check(len(containers) == 1, "expected one container")
    c = containers[0]
    check_image("slackswapd", c["image"])
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    du.check(set(ports) == {"grpc", "metrics"},
             f"container ports {ports}: want grpc and metrics")

    # --- the flag file ------------------------------------------------------
    flagfile_args = [a for a in c.get("args", []) + c.get("command", [])
                     if a.startswith("--flagfile=")]
    du.check(len(flagfile_args) == 1, f"container args {c.get('args')}: "
             f"want one --flagfile=")
    flagfile = flagfile_args[0].split("=", 1)[1]
    mount_dir, key = os.path.split(flagfile)
    mounts = [m for m in c["volumeMounts"] if m["mountPath"] == mount_dir]
    du.check(len(mounts) == 1, f"nothing mounted at {mount_dir}")
    volumes = {v["name"]: v for v in pod["volumes"]}
    volume = volumes.get(mounts[0]["name"])
    du.check(volume and "configMap" in volume,
             f"{mount_dir} is not a ConfigMap volume")
    cm = one(objects, "ConfigMap", name=volume["configMap"]["name"])
    du.check(cm["metadata"]["name"].startswith("slackswapd-flags-"),
             "the flag ConfigMap is not the generated (hashed) one")
    du.check(key in cm["data"], f"ConfigMap has no key {key}")
    flag_text = cm["data"][key]
    flags = du.parse_flagfile(flag_text)
    known = du.slackswapd_flags(args.slackswapd)
    unknown = [n for n, _ in flags if n not in known]
    du.check(not unknown, f"flags slackswapd does not have: {unknown}")
    f = dict(flags)
    du.check(len(f) == len(flags), "a flag is set twice in the flag file")
    eff = {n: f.get(n, known[n]) for n in known}  # what slackswapd will use
    du.check(int(eff["port"]) == ports["grpc"],
             f"--port={eff['port']}, container port grpc={ports['grpc']}")
    du.check(int(eff["metrics_port"]) == ports["metrics"],
             f"--metrics_port={eff['metrics_port']}, container port "
             f"metrics={ports['metrics']}")
    du.check(eff["host"] == "0.0.0.0" and eff["metrics_host"] == "0.0.0.0",
             "slackswapd must listen on the pod's addresses (0.0.0.0) for "
             "probes and Services to reach it")
    res = check_resources("slackswapd", c)
    threads = int(eff["threads"])
    du.check(threads >= 1, "--threads must be set: 0 counts the node's "
             "cores, not the container's")
    du.check(threads == cpu_cores(res["requests"]["cpu"]) ==
             cpu_cores(res["limits"]["cpu"]),
             f"--threads={threads} but CPU request/limit "
             f"{res['requests']['cpu']}/{res['limits']['cpu']}")
    # Memory: every worker planning its largest request, the requests held,
    # the cache, the graph store and the built workloads' graphs, beside the
    # process itself, stay under
    # the limit; with a shared store, also its queue of writes and a value
    # read back by every worker.
    shared_mib = 0
    if eff["shared_store"]:
        shared_mib = (SHARED_WRITE_QUEUE_MIB +
                      threads * int(eff["shared_store_max_entry_mb"]))
    worst_mib = (threads * int(eff["max_request_mb"]) +
                 int(eff["max_queued_mb"]) + int(eff["cache_mb"]) +
                 int(eff["graph_store_mb"]) + int(eff["workload_graphs_mb"]) +
                 shared_mib + PROCESS_MIB)
    limit_mib = mem_bytes(res["limits"]["memory"]) / (1 << 20)
    du.check(worst_mib <= limit_mib,
             f"--threads={threads} x --max_request_mb={eff['max_request_mb']}"
             f" + --max_queued_mb={eff['max_queued_mb']} + --cache_mb="
             f"{eff['cache_mb']} + --graph_store_mb={eff['graph_store_mb']}"
             f" + --workload_graphs_mb={eff['workload_graphs_mb']}"
             + (f" + the shared tier's {SHARED_WRITE_QUEUE_MIB} MiB of "
                f"writes + {threads} x --shared_store_max_entry_mb="
                f"{eff['shared_store_max_entry_mb']}" if shared_mib else "")
             + f" + {PROCESS_MIB} MiB = {worst_mib} MiB, above the memory "
             f"limit {res['limits']['memory']}")
    print(f"ok: flag file {key} ({len(flags)} flags, all slackswapd's) "
          f"agrees with ports {ports}, {threads} CPUs and a worst case of "
          f"{worst_mib} MiB under {limit_mib:.0f} MiB")

    # --- the shared tier: Redis -------------------------------------------
    m = REDIS_URL.fullmatch(eff["shared_store"])
    du.check(m is not None, f"--shared_store={eff['shared_store']!r} is not "
             f"redis://host[:port][/db]")
    scheme, _, _, host, url_port, db = m.groups()
    du.check("@" not in eff["shared_store"], "--shared_store carries a "
             "password: it would sit in the ConfigMap; put it in the Secret "
             "(--shared_store_password_file)")
    du.check(scheme == "redis", "the Redis of redis.yaml speaks no TLS: "
             "--shared_store must be redis://")
    svc_name = host.split(".")[0]
    du.check(host == f"{svc_name}.{namespace}.svc.cluster.local",
             f"--shared_store host {host}: want a Service of this namespace, "
             f"SERVICE.{namespace}.svc.cluster.local")
    redis_svc = one(objects, "Service", name=svc_name)
    redis_port = int(url_port or 6379)
    db = int(db or 0)
    rdeploys = [d for d in objects if d["kind"] == "Deployment" and
                selects(redis_svc["spec"]["selector"],
                        d["spec"]["template"]["metadata"]["labels"])]
    du.check(len(rdeploys) == 1 and rdeploys[0] is not deploy,
             f"Service {svc_name} should select the Redis Deployment's pods")
    rdeploy = rdeploys[0]
    rspec = rdeploy["spec"]
    rpod = rspec["template"]["spec"]
    rpod_labels = rspec["template"]["metadata"]["labels"]
    du.check(selects(rspec["selector"]["matchLabels"], rpod_labels),
             "the Redis Deployment's selector does not match its pod labels")
    du.check(not selects(rspec["selector"]["matchLabels"], pod_labels) and
             not selects(spec["selector"]["matchLabels"], rpod_labels),
             "the slackswapd and Redis Deployments select each other's pods")
    du.check(rspec.get("replicas", 1) == 1, "Redis: want one replica (each "
             "replica of a cache would hold keys of its own)")
    du.check(len(rpod["containers"]) == 1, "Redis: expected one container")
    rc = rpod["containers"][0]
    check_image("Redis", rc["image"])
    rports = {p["name"]: p["containerPort"] for p in rc.get("ports", [])}
    du.check(redis_svc["spec"].get("type", "ClusterIP") == "ClusterIP" and
             redis_svc["spec"].get("clusterIP") != "None",
             f"Service {svc_name} should be a ClusterIP Service")
    sports = redis_svc["spec"]["ports"]
    du.check(len(sports) == 1 and sports[0]["port"] == redis_port,
             f"Service {svc_name} ports {sports}: want one, {redis_port} "
             f"(--shared_store's)")
    target = sports[0].get("targetPort", redis_port)
    du.check(target in rports or target in rports.values(),
             f"Service {svc_name} targets {target!r}, not a port of the Redis "
             f"container {rports}")
    container_redis_port = rports.get(target, target)

    def secret_file(flag, what):
        """(Secret name, key, value) mounted where --flag names a file."""
        path = eff[flag]
        du.check(path, f"--{flag} is not set: {what}")
        directory, name = os.path.split(path)
        mounts = [mt for mt in c["volumeMounts"]
                  if mt["mountPath"] == directory]
        du.check(len(mounts) == 1, f"nothing mounted at {directory} (the "
                 f"directory of --{flag})")
        volume = volumes.get(mounts[0]["name"])
        du.check(volume and "secret" in volume,
                 f"{directory} is not a Secret volume")
        secret = volume["secret"]["secretName"]
        items = {i["path"]: i for i in volume["secret"].get("items", [])}
        item = items.get(name) if items else {"key": name}
        du.check(item, f"Secret volume {mounts[0]['name']} has no {name}")
        mode = item.get("mode", volume["secret"].get("defaultMode", 0o644))
        du.check(not mode & 0o007, f"--{flag} is readable by all (mode "
                 f"{mode:o}): give it to the pod's fsGroup (0440)")
        du.check(mode & 0o040 and
                 pod.get("securityContext", {}).get("fsGroup"),
                 f"--{flag} (mode {mode:o}) is not readable by the pod's "
                 f"fsGroup: slackswapd (not root) could not read it")
        value = secret_value(objects, secret, item["key"])
        du.check(value.strip(), f"Secret {secret} key {item['key']} is "
                 f"empty")
        return secret, item["key"], value

    # slackswapd's password file is the Secret key Redis requires.
    secret_name, secret_key, password = secret_file(
        "shared_store_password_file", "Redis requires a password")
    # The fleet's secret is slackswapd's alone, in a Secret of its own.
    fleet_secret_name, fleet_secret_key, fleet_secret = secret_file(
        "shared_store_secret_file", "a client of the Redis could forge "
        "answers")
    du.check(fleet_secret_name != secret_name, f"the fleet secret shares "
             f"Secret {secret_name} with Redis's password")
    du.check(len(fleet_secret.strip()) >= 32, f"Secret {fleet_secret_name} "
             f"key {fleet_secret_key} is under 32 bytes: slackswapd refuses "
             f"it")
    for o in objects:
        if o["kind"] != "Deployment" or o is deploy:
            continue
        mounted = {v.get("secret", {}).get("secretName") for v in
                   o["spec"]["template"]["spec"].get("volumes", [])}
        refs = {e.get("valueFrom", {}).get("secretKeyRef", {}).get("name")
                for ct in o["spec"]["template"]["spec"]["containers"]
                for e in ct.get("env", [])}
        du.check(fleet_secret_name not in mounted | refs, f"Deployment "
                 f"{o['metadata']['name']} reads the fleet secret")
    du.check(rc.get("command") == ["redis-server"], f"Redis container "
             f"command {rc.get('command')}: want [redis-server]")
    raw_options = option_pairs(rc.get("args", []))
    ref = re.fullmatch(r"\$\((\w+)\)", raw_options.get("requirepass", ""))
    du.check(ref is not None, "Redis: --requirepass should be $(VAR), an env "
             "var from the Secret")
    env_refs = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef", {})
                for e in rc.get("env", [])}
    du.check(env_refs.get(ref.group(1)) == {"name": secret_name,
                                            "key": secret_key},
             f"Redis's --requirepass $({ref.group(1)}) is not Secret "
             f"{secret_name} key {secret_key}, which slackswapd reads")
    renv = container_env(objects, rc)
    options = option_pairs([expand(a, renv) for a in rc["args"]])
    du.check(int(options.get("port", 6379)) == container_redis_port,
             f"Redis listens on {options.get('port', 6379)}, the container "
             f"port is {container_redis_port}")
    for k, want in (("maxmemory-policy", "allkeys-lru"), ("save", ""),
                    ("appendonly", "no")):
        du.check(options.get(k) == want, f"Redis --{k} {options.get(k)!r}: "
                 f"want {want!r} (a cache: evicts, never persists)")
    mm = re.fullmatch(r"(\d+)(gb|mb|kb|g|m|k|b)?", options.get("maxmemory",
                                                            "").lower())
    du.check(mm is not None and int(mm.group(1)) > 0,
             "Redis needs --maxmemory (else it grows to the memory limit "
             "and is killed instead of evicting)")
    maxmemory = int(mm.group(1)) * {
        None: 1, "b": 1, "k": 1000, "kb": 1024, "m": 10**6, "mb": 1 << 20,
        "g": 10**9, "gb": 1 << 30}[mm.group(2)]
    rres = check_resources("Redis", rc)
    du.check(mem_bytes(rres["limits"]["memory"]) >=
             REDIS_LIMIT_OVER_MAXMEMORY * maxmemory,
             f"Redis memory limit {rres['limits']['memory']} is not "
             f"{REDIS_LIMIT_OVER_MAXMEMORY} x --maxmemory "
             f"{options['maxmemory']}")
    redis_uid = check_security("Redis", rpod, rc)
    redis_probes = {}
    for name in ("readinessProbe", "livenessProbe"):
        probe = rc.get(name)
        du.check(probe and "exec" in probe, f"Redis {name} is not an exec "
                 f"probe")
        du.check(probe.get("timeoutSeconds", 1) < probe.get(
            "periodSeconds", 10), f"Redis {name}: timeout not below period")
        redis_probes[name] = probe["exec"]["command"]
        du.check(any("redis-cli" in a for a in redis_probes[name]),
                 f"Redis {name} does not run redis-cli")

    # Only slackswapd's pods reach Redis.
    policy = one(objects, "NetworkPolicy")
    du.check(selects(policy["spec"]["podSelector"].get("matchLabels", {}),
                     rpod_labels) and
             policy["spec"]["podSelector"].get("matchLabels"),
             "the NetworkPolicy does not select the Redis pods")
    du.check("Ingress" in policy["spec"].get("policyTypes", ["Ingress"]),
             "the NetworkPolicy does not restrict ingress")
    rules = policy["spec"].get("ingress", [])
    du.check(rules, "the NetworkPolicy lets nothing in, not even slackswapd")
    for rule in rules:
        froms = rule.get("from", [])
        du.check(froms and all(
            set(f) == {"podSelector"} and
            f["podSelector"].get("matchLabels") and
            selects(f["podSelector"]["matchLabels"], pod_labels)
            for f in froms), f"NetworkPolicy rule {rule}: want only "
            f"slackswapd's pods")
        redis_port_names = {container_redis_port} | {
            n for n, v in rports.items() if v == container_redis_port}
        allowed = [pt.get("port") for pt in rule.get("ports", [])]
        du.check(allowed and set(allowed) <= redis_port_names,
                 f"NetworkPolicy rule {rule}: want Redis's port only")
    print(f"ok: --shared_store is Service {svc_name}:{redis_port} (Redis "
          f"{rc['image']}, {options['maxmemory']} "
          f"{options['maxmemory-policy']}, no persistence); the password "
          f"file is Secret {secret_name} key {secret_key}, Redis's "
          f"--requirepass; only slackswapd's pods reach it")

    # The real slackswapd takes the rendered file (ports made free and
    # loopback for the test) and serves with its settings; its health
    # service answers the probes' service names.
    work = tempfile.TemporaryDirectory(prefix="slackswap-k8s-")
    rendered = os.path.join(work.name, key)
    with open(rendered, "w", encoding="utf-8") as out:
        out.write(flag_text)
    probe_services = {}
    for name in ("readinessProbe", "livenessProbe"):
        probe = c.get(name)
        du.check(probe and "grpc" in probe, f"{name} is not a native gRPC "
                 f"probe")
        du.check(probe["grpc"]["port"] == ports["grpc"],
                 f"{name} port {probe['grpc']['port']} is not the gRPC port "
                 f"{ports['grpc']}")
        du.check(probe.get("timeoutSeconds", 1) < probe.get(
            "periodSeconds", 10), f"{name}: timeout not below period")
        probe_services[name] = probe["grpc"].get("service", "")
    du.check(probe_services["readinessProbe"] == "slackswap.v1.Planner",
             "readiness should watch the Planner service, which turns "
             "NOT_SERVING on SIGTERM")
    # A real redis-server with the Redis container's arguments (the
    # Secret's password substituted), on loopback and a free port.
    rport = du.free_port()
    redis_cmd = [args.redis_server]
    for k, v in options.items():
        redis_cmd += [f"--{k}", str(rport) if k == "port" else v]
    redis_cmd += ["--bind", "127.0.0.1"] + (
        [] if "port" in options else ["--port", str(rport)])
    redis_log = open(os.path.join(work.name, "redis.log"), "w",
                     encoding="utf-8")
    redis = subprocess.Popen(redis_cmd, cwd=work.name, stdout=redis_log,
                             stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)

    def redis_log_text():
        redis_log.flush()
        with open(redis_log.name, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-3000:]
    try:
        du.wait_until(
            "redis-server (with the Redis container's arguments) to answer",
            lambda: redis.poll() is None and
            redis_cli(args.redis_cli, rport, ["ping"], password) == "PONG",
            10, detail=redis_log_text)
        du.check(redis_cli(args.redis_cli, rport, ["ping"]).startswith(
            "NOAUTH"), "Redis answers without the password")
        for k, want in (("maxmemory", str(maxmemory)),
                        ("maxmemory-policy", "allkeys-lru"), ("save", ""),
                        ("appendonly", "no")):
            got = redis_cli(args.redis_cli, rport, ["config", "get", k],
                            password).split("\n")
            du.check(got[1:] == [want] or (want == "" and got == [k]),
                     f"Redis CONFIG GET {k}: {got[1:]}, want {want!r}")
        for name, command in redis_probes.items():
            du.check(probe_passes(command, args.redis_cli, rport, password),
                     f"Redis {name} {command} fails on a healthy Redis")
            du.check(not probe_passes(command, args.redis_cli, rport,
                                      password + "-wrong"),
                     f"Redis {name} {command} passes with a wrong password: "
                     f"it cannot tell an error reply from PONG")
        print(f"ok: redis-server {shlex.join(rc['args'])} (password from the "
              f"Secret) requires it, evicts LRU at {maxmemory} bytes, "
              f"persists nothing; its probes pass, and fail on an error "
              f"reply")

        # Later flags win: the file's settings, then loopback and free
        # ports, and the shared store made the local Redis, its password
        # file the Secret's.
        local_pw = os.path.join(work.name, "redis-password")
        with open(os.open(local_pw, os.O_WRONLY | os.O_CREAT, 0o600), "w",
                  encoding="utf-8") as out:
            out.write(password)
        local_secret = os.path.join(work.name, "fleet-secret")
        with open(os.open(local_secret, os.O_WRONLY | os.O_CREAT, 0o600),
                  "w", encoding="utf-8") as out:
            out.write(fleet_secret)
        local_store = f"redis://127.0.0.1:{rport}/{db}"
        srv = du.Server(args.slackswapd, [
            f"--flagfile={rendered}", "--host=127.0.0.1", "--port=0",
            "--metrics_host=127.0.0.1", "--metrics_port=0", "--grace_s=5",
            f"--shared_store={local_store}",
            f"--shared_store_password_file={local_pw}",
            f"--shared_store_secret_file={local_secret}"])
        with srv:
            for k in ("threads", "max_queue", "cache_mb"):
                du.check(str(srv.serving.get(k)) == str(eff[k]),
                         f"slackswapd with the flag file serves {k}="
                         f"{srv.serving.get(k)}, the file says {eff[k]}")
            du.check(srv.serving.get("shared_store_seal") == "mac",
                     f"slackswapd seals shared answers with "
                     f"{srv.serving.get('shared_store_seal')!r}, want 'mac' "
                     f"(the fleet secret)")
            want_store = f"redis://:***@127.0.0.1:{rport}/{db}"
            du.check(srv.serving.get("shared_store") == want_store,
                     f"slackswapd serves with shared_store="
                     f"{srv.serving.get('shared_store')!r}, want "
                     f"{want_store!r}")
            for name, service in probe_services.items():
                status = health_check(srv.target, service)
                du.check(status == 1, f"{name}: health of {service!r} is "
                         f"{status}, not SERVING (1)")
            du.wait_until(
                "slackswapd to connect to Redis (slackswap_shared_store_up 1)",
                lambda: scrape_value(srv.scrape(),
                                     "slackswap_shared_store_up") == 1,
                10, detail=srv.log_text)
            code = srv.stop()
            du.check(code == 0, f"slackswapd exited {code}\n{srv.log_text()}")
    finally:
        if redis.poll() is None:
            redis.terminate()
            try:
                redis.wait(10)
            except subprocess.TimeoutExpired:
                redis.kill()
                redis.wait(10)
        redis_log.close()
    work.cleanup()
    print(f"ok: slackswapd serves with the flag file; probes "
          f"{probe_services} answer SERVING; it connects to Redis with the "
          f"Secret's password")

    # --- shutdown -----------------------------------------------------------
    pre = c.get("lifecycle", {}).get("preStop", {})
    cmd = pre.get("exec", {}).get("command", [])
    if "sleep" in pre:
        pre_s = int(pre["sleep"]["seconds"])
    else:
        du.check(len(cmd) == 2 and cmd[0] == "sleep", f"preStop {pre}: want "
                 f"a sleep, so endpoints go before SIGTERM")
        pre_s = int(cmd[1])
    grace = float(eff["grace_s"])
    tgps = pod["terminationGracePeriodSeconds"]
    du.check(tgps >= pre_s + grace + PRESTOP_MARGIN_S,
             f"terminationGracePeriodSeconds {tgps} < preStop {pre_s} + "
             f"--grace_s {grace} + {PRESTOP_MARGIN_S}: the kubelet would "
             f"SIGKILL a draining slackswapd")
    print(f"ok: termination grace {tgps} s >= preStop {pre_s} s + drain "
          f"{grace:g} s + {PRESTOP_MARGIN_S} s")

    # --- security -----------------------------------------------------------
    uid = check_security("slackswapd", pod, c)
    image_user = dockerfile_user().split(":")[0]
    du.check(image_user == str(uid), f"the Dockerfile's USER {image_user} "
             f"is not the Deployment's runAsUser {uid}")
    print(f"ok: non-root UID {uid} (= the image's USER), read-only root "
          f"filesystem, no capabilities (Redis: the same, UID {redis_uid})")

    # --- Services -----------------------------------------------------------
    services = {s["metadata"]["name"]: s for s in objects
                if s["kind"] == "Service"}
    headless = [s for s in services.values()
                if s["spec"].get("clusterIP") == "None"]
    du.check(len(headless) == 1, "want one headless Service (gRPC)")
    grpc_svc = headless[0]
    du.check(not grpc_svc["spec"].get("publishNotReadyAddresses"),
             "the headless Service must publish only ready pods")
    metrics_svcs = [s for s in services.values() if s is not grpc_svc and
                    selects(s["spec"]["selector"], pod_labels)]
    du.check(len(metrics_svcs) == 1, "want one more Service of slackswapd's "
             "pods (metrics)")
    metrics_svc = metrics_svcs[0]
    du.check(metrics_svc["spec"].get("type", "ClusterIP") == "ClusterIP" and
             metrics_svc["spec"].get("clusterIP") != "None",
             "the metrics Service should be a ClusterIP Service")
    for svc, port_name in ((grpc_svc, "grpc"), (metrics_svc, "metrics")):
        name = svc["metadata"]["name"]
        du.check(selects(svc["spec"]["selector"], pod_labels),
                 f"Service {name}'s selector does not match the pods")
        sports = svc["spec"]["ports"]
        du.check(len(sports) == 1, f"Service {name}: want one port")
        sp = sports[0]
        du.check(sp.get("name") == port_name and
                 sp.get("targetPort") in (port_name, ports[port_name]) and
                 sp["port"] == ports[port_name],
                 f"Service {name} port {sp} does not match container port "
                 f"{port_name}={ports[port_name]}")
    print(f"ok: Services {grpc_svc['metadata']['name']} (headless, grpc) "
          f"and {metrics_svc['metadata']['name']} (ClusterIP, metrics)")

    # --- HPA and PDB --------------------------------------------------------
    hpa = one(objects, "HorizontalPodAutoscaler")
    ref = hpa["spec"]["scaleTargetRef"]
    du.check(ref["kind"] == "Deployment" and
             ref["name"] == deploy["metadata"]["name"] and
             ref["apiVersion"] == deploy["apiVersion"],
             f"HPA scaleTargetRef {ref} is not the Deployment")
    lo, hi = hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]
    du.check(2 <= lo <= hi, f"HPA replicas {lo}..{hi}: want min >= 2")
    du.check("replicas" not in spec or lo <= spec["replicas"] <= hi,
             "the Deployment's replicas fight the HPA")
    cpu_metrics = [m for m in hpa["spec"]["metrics"]
                   if m["type"] == "Resource" and
                   m["resource"]["name"] == "cpu"]
    du.check(cpu_metrics, "the HPA does not scale on CPU")
    pdb = one(objects, "PodDisruptionBudget")
    du.check(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels),
             "the PDB's selector does not match the pods")
    if "minAvailable" in pdb["spec"]:
        du.check(int(pdb["spec"]["minAvailable"]) < lo,
                 "PDB minAvailable leaves no pod evictable at min replicas")
    else:
        du.check(int(pdb["spec"]["maxUnavailable"]) >= 1,
                 "PDB maxUnavailable must allow an eviction")
    print(f"ok: HPA {lo}..{hi} replicas on CPU; PDB selects the pods")

    # --- Prometheus config agrees -------------------------------------------
    prom = du.load_yaml(os.path.join(du.REPO, "deploy", "prometheus",
                                     "prometheus.yml"))
    job = [j for j in prom["scrape_configs"]
           if j["job_name"] == "slackswapd"][0]
    dns = job["dns_sd_configs"][0]
    want = (f"{grpc_svc['metadata']['name']}.{namespace}.svc.cluster.local")
    du.check(dns["names"] == [want], f"Prometheus discovers {dns['names']}, "
             f"the headless Service is {want}")
    du.check(dns["port"] == ports["metrics"], f"Prometheus scrapes port "
             f"{dns['port']}, the metrics port is {ports['metrics']}")
    ns_labels = [r.get("replacement") for r in job.get("relabel_configs", [])
                 if r.get("target_label") == "namespace"]
    du.check(ns_labels in ([], [namespace]), f"Prometheus labels namespace "
             f"{ns_labels}, the manifests use {namespace}")
    with open(os.path.join(du.REPO, "deploy", "prometheus", "alerts.yml"),
              encoding="utf-8") as fh:
        m = re.search(r"slackswap_queue_depth\{[^}]*\}\[\w+\]\)\s*>\s*(\d+)",
                      fh.read())
    du.check(m is not None, "alerts.yml has no queue-depth threshold")
    du.check(int(m.group(1)) == int(0.75 * int(eff["max_queue"])),
             f"the queue alert fires above {m.group(1)}, 75% of "
             f"--max_queue={eff['max_queue']} is "
             f"{int(0.75 * int(eff['max_queue']))}")
    print(f"ok: Prometheus discovers {want}:{dns['port']}; the queue alert "
          f"is 75% of --max_queue")
    print("PASS")


if __name__ == "__main__":
    main()
