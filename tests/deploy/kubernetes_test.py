"""deploy/kubernetes/, rendered by `kubectl kustomize`, agrees with itself,
with slackswapd's flags, with the image and with the Prometheus config.

Renders the kustomization with the real kubectl and checks the objects:

- exactly one each of Namespace, ConfigMap (the generated flag file),
  Deployment, HorizontalPodAutoscaler, PodDisruptionBudget, and two
  Services; everything namespaced lives in the one namespace;
- the flag file: every flag is one of slackswapd's (`slackswapd --help`);
  the real slackswapd starts with it (ports overridden to free loopback
  ones) and reports its threads, queue and cache; its gRPC and metrics
  ports are the container's named ports; it listens on 0.0.0.0;
  --threads equals the CPU request and limit; it is mounted where the
  container's --flagfile points, from the ConfigMap kustomize generated;
- probes: native gRPC readiness and liveness probes on the gRPC port; the
  readiness probe's service name and the liveness probe's "" are SERVING
  on the real slackswapd (grpc.health.v1.Health/Check over the wire);
- shutdown: terminationGracePeriodSeconds covers the preStop sleep plus
  --grace_s plus a margin;
- security: non-root (the Dockerfile's USER is the same UID), read-only
  root filesystem, no privilege escalation, every capability dropped,
  RuntimeDefault seccomp; requests and limits for CPU and memory;
- Services: the gRPC one headless, the metrics one ClusterIP, selectors
  match the pod labels, target ports name container ports and the port
  numbers agree;
- HPA: targets the Deployment, minReplicas >= 2 (the PDB can then always
  evict one), CPU utilisation (which needs the CPU request); the
  Deployment leaves replicas to the HPA; PDB: selects the pods;
- Prometheus (deploy/prometheus/): the DNS discovery name is the headless
  Service in this namespace, on the metrics port; the queue alert's
  threshold is 75% of --max_queue.

  /usr/bin/python3 tests/deploy/kubernetes_test.py \
      --slackswapd build/server/slackswapd --kubectl /usr/bin/kubectl
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_util as du  # noqa: E402

PRESTOP_MARGIN_S = 3


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswapd", required=True)
    parser.add_argument("--kubectl", default="/usr/bin/kubectl")
    args = parser.parse_args()
    du.check(os.access(args.kubectl, os.X_OK), f"{args.kubectl} not found "
             f"(kubectl renders deploy/kubernetes with `kubectl kustomize`)")

    objects = render(args.kubectl)
    kinds = sorted(o["kind"] for o in objects)
    du.check(kinds == sorted(["Namespace", "ConfigMap", "Deployment",
                              "HorizontalPodAutoscaler",
                              "PodDisruptionBudget", "Service", "Service"]),
             f"rendered kinds: {kinds}")
    namespace = one(objects, "Namespace")["metadata"]["name"]
    for o in objects:
        if o["kind"] != "Namespace":
            du.check(o["metadata"].get("namespace") == namespace,
                     f"{o['kind']} {o['metadata']['name']} is not in "
                     f"namespace {namespace}")
    print(f"ok: rendered {len(objects)} objects in namespace {namespace}")

    deploy = one(objects, "Deployment")
    spec = deploy["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"]["labels"]
    du.check(selects(spec["selector"]["matchLabels"], pod_labels),
             "the Deployment's selector does not match its pod labels")
    containers = pod["containers"]
    du.check(len(containers) == 1, "expected one container")
    c = containers[0]
    image = c["image"]
    du.check(re.fullmatch(r"[^:@\s]+(:[\w.-]+|@sha256:[0-9a-f]{64})", image)
             and not image.endswith(":latest"),
             f"container image {image!r}: want a pinned tag or digest")
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
    res = c["resources"]
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            du.check(r in res.get(kind, {}), f"no {r} {kind}")
    du.check(cpu_cores(res["requests"]["cpu"]) <=
             cpu_cores(res["limits"]["cpu"]), "CPU request above limit")
    du.check(mem_bytes(res["requests"]["memory"]) <=
             mem_bytes(res["limits"]["memory"]), "memory request above limit")
    threads = int(eff["threads"])
    du.check(threads >= 1, "--threads must be set: 0 counts the node's "
             "cores, not the container's")
    du.check(threads == cpu_cores(res["requests"]["cpu"]) ==
             cpu_cores(res["limits"]["cpu"]),
             f"--threads={threads} but CPU request/limit "
             f"{res['requests']['cpu']}/{res['limits']['cpu']}")
    # Memory: every worker planning its largest request, the requests held,
    # the cache and the graph store, beside the process itself, stay under
    # the limit.
    process_mib = 40
    worst_mib = (threads * int(eff["max_request_mb"]) +
                 int(eff["max_queued_mb"]) + int(eff["cache_mb"]) +
                 int(eff["graph_store_mb"]) + process_mib)
    limit_mib = mem_bytes(res["limits"]["memory"]) / (1 << 20)
    du.check(worst_mib <= limit_mib,
             f"--threads={threads} x --max_request_mb={eff['max_request_mb']}"
             f" + --max_queued_mb={eff['max_queued_mb']} + --cache_mb="
             f"{eff['cache_mb']} + --graph_store_mb={eff['graph_store_mb']}"
             f" + {process_mib} MiB = {worst_mib} MiB, above"
             f" the memory limit {res['limits']['memory']}")
    print(f"ok: flag file {key} ({len(flags)} flags, all slackswapd's) "
          f"agrees with ports {ports}, {threads} CPUs and a worst case of "
          f"{worst_mib} MiB under {limit_mib:.0f} MiB")

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
    # Later flags win: the file's settings, then loopback and free ports.
    srv = du.Server(args.slackswapd, [
        f"--flagfile={rendered}", "--host=127.0.0.1", "--port=0",
        "--metrics_host=127.0.0.1", "--metrics_port=0", "--grace_s=5"])
    with srv:
        for k in ("threads", "max_queue", "cache_mb"):
            du.check(str(srv.serving.get(k)) == str(eff[k]),
                     f"slackswapd with the flag file serves {k}="
                     f"{srv.serving.get(k)}, the file says {eff[k]}")
        for name, service in probe_services.items():
            status = health_check(srv.target, service)
            du.check(status == 1, f"{name}: health of {service!r} is "
                     f"{status}, not SERVING (1)")
        code = srv.stop()
        du.check(code == 0, f"slackswapd exited {code}\n{srv.log_text()}")
    work.cleanup()
    print(f"ok: slackswapd serves with the flag file; probes "
          f"{probe_services} answer SERVING")

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
    psc = pod.get("securityContext", {})
    csc = c.get("securityContext", {})
    du.check(psc.get("runAsNonRoot") or csc.get("runAsNonRoot"),
             "runAsNonRoot is not set")
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    du.check(uid is not None and uid != 0, "runAsUser must be a non-zero UID")
    image_user = dockerfile_user().split(":")[0]
    du.check(image_user == str(uid), f"the Dockerfile's USER {image_user} "
             f"is not the Deployment's runAsUser {uid}")
    du.check(csc.get("readOnlyRootFilesystem") is True,
             "readOnlyRootFilesystem is not true")
    du.check(csc.get("allowPrivilegeEscalation") is False,
             "allowPrivilegeEscalation is not false")
    du.check(csc.get("capabilities", {}).get("drop") == ["ALL"],
             "capabilities are not all dropped")
    du.check((psc.get("seccompProfile") or csc.get("seccompProfile") or {})
             .get("type") == "RuntimeDefault", "no RuntimeDefault seccomp")
    print(f"ok: non-root UID {uid} (= the image's USER), read-only root "
          f"filesystem, no capabilities")

    # --- Services -----------------------------------------------------------
    services = {s["metadata"]["name"]: s for s in objects
                if s["kind"] == "Service"}
    headless = [s for s in services.values()
                if s["spec"].get("clusterIP") == "None"]
    du.check(len(headless) == 1, "want one headless Service (gRPC)")
    grpc_svc = headless[0]
    du.check(not grpc_svc["spec"].get("publishNotReadyAddresses"),
             "the headless Service must publish only ready pods")
    metrics_svc = [s for s in services.values() if s is not grpc_svc][0]
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
