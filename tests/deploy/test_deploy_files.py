"""deploy/: the compose file, the Kubernetes manifests and the Dockerfile parse, every
`derender-proxy` command line they contain is accepted by the real CLI parser, the manifests are
valid against the Kubernetes OpenAPI schemas (kubernetes-validate) of the version the deploy
README names, and the health checks they run answer as they should against a real proxy."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from proxy.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"


def parse_cli(argv: list[str]):
    """`derender-proxy ARGV` through the real parser; a rejected flag fails the test with its message."""
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits on unknown or malformed flags
        pytest.fail(f"derender-proxy rejects {argv!r} (exit {exc.code})")


_COMPOSE_VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def compose_interpolate(value: str) -> str:
    """Compose's `${VAR:-default}` with the defaults (what `docker compose config` gives with no env)."""
    return _COMPOSE_VAR.sub(lambda m: m.group(2) or "", value)


def load_compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def load_k8s() -> dict[str, dict]:
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs[doc["kind"]] = doc
    return docs


def dockerfile_instruction(name: str) -> list[str]:
    """The JSON (exec-form) arguments of the last `name` instruction, continuation lines joined."""
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith(name + " ")]
    assert lines, f"no {name} in the Dockerfile"
    return json.loads(lines[-1][len(name):].strip())


# --- Dockerfile ------------------------------------------------------------------------------------

def test_dockerfile_entrypoint_cmd_and_user():
    entry, cmd = dockerfile_instruction("ENTRYPOINT"), dockerfile_instruction("CMD")
    assert entry == ["derender-proxy", "serve"]
    args = parse_cli(entry[1:] + cmd)
    assert args.host == "0.0.0.0"
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(rf"^EXPOSE {args.port}$", text, re.M)
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and not user[-1].startswith(("root", "0:", "0\n")) and user[-1] != "0"
    assert text.startswith("#") and "FROM python:3.12-slim" in text


def test_dockerfile_healthcheck_probes_health_on_the_served_port():
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith("HEALTHCHECK ")]
    exec_form = json.loads(line[line.index("CMD") + 3:].strip())
    assert exec_form[:2] == ["python", "-c"]
    compile(exec_form[2], "healthcheck", "exec")  # the probe is valid Python
    port = parse_cli(["serve", *dockerfile_instruction("CMD")]).port
    assert f"127.0.0.1:{port}/health" in exec_form[2]


def test_dockerfile_copies_what_exists():
    text = (DEPLOY / "Dockerfile").read_text()
    for src in re.findall(r"^COPY (?!--from)(.+?) \S+$", text, re.M):
        for item in src.split():
            assert (ROOT / item).exists(), item


# --- docker compose --------------------------------------------------------------------------------

def test_compose_services_and_profiles():
    compose = load_compose()
    services = compose["services"]
    assert {name: tuple(s["profiles"]) for name, s in services.items()} == {
        "engine": ("gpu",), "proxy": ("gpu",), "reference-engine": ("cpu",), "proxy-cpu": ("cpu",)}
    engine = services["engine"]
    assert engine["image"].startswith("vllm/vllm-openai")
    engine_cmd = [compose_interpolate(str(a)) for a in engine["command"]]
    assert engine["entrypoint"] == ["vllm", "serve"] and "--tokens-only" in engine_cmd
    # with --tokens-only the engine has no tokenizer: parser flags belong to the proxy only
    assert not any(a.startswith(("--tool-call-parser", "--reasoning-parser")) for a in engine_cmd)
    assert engine["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert "hf-cache" in compose["volumes"]


@pytest.mark.parametrize("proxy_name,engine_name", [("proxy", "engine"), ("proxy-cpu", "reference-engine")])
def test_compose_proxy_commands_are_accepted_and_point_at_their_engine(proxy_name, engine_name):
    services = load_compose()["services"]
    proxy = services[proxy_name]
    argv = [compose_interpolate(str(a)) for a in proxy["command"]]
    args = parse_cli(["serve", *argv])  # the image's entrypoint is `derender-proxy serve`
    assert args.host == "0.0.0.0"
    assert args.tool_call_parser and args.reasoning_parser and args.enable_auto_tool_choice
    assert args.shutdown_timeout < _seconds(proxy["stop_grace_period"])
    engine = services[engine_name]
    engine_cmd = [compose_interpolate(str(a)) for a in engine["command"]]
    engine_port = engine_cmd[engine_cmd.index("--port") + 1]
    assert args.engine_url == [f"http://{engine_name}:{engine_port}"]
    assert proxy["depends_on"][engine_name]["condition"] == "service_healthy"
    # both sides use the same engine key
    engine_key = engine_cmd[engine_cmd.index("--api-key") + 1]
    assert compose_interpolate(proxy["environment"]["DERENDER_ENGINE_API_KEY"]) == engine_key


def test_compose_gpu_proxy_reads_the_engines_cache_read_only():
    services = load_compose()["services"]
    (engine_mount,) = services["engine"]["volumes"]
    (proxy_mount,) = services["proxy"]["volumes"]
    volume, engine_path = engine_mount.split(":")
    assert engine_path == "/root/.cache/huggingface"  # vLLM image's HF_HOME
    assert proxy_mount.split(":") == [volume, "/hf-cache", "ro"]  # our image's HF_HOME
    assert "HF_HOME=/hf-cache" in (DEPLOY / "Dockerfile").read_text()
    # same MODEL on both sides
    assert services["proxy"]["command"][0] == services["engine"]["command"][0]


def test_compose_reference_engine_flags_are_accepted():
    ref = load_compose()["services"]["reference-engine"]
    assert ref["entrypoint"] == ["derender-proxy", "reference-engine"]
    argv = [compose_interpolate(str(a)) for a in ref["command"]]
    args = parse_cli(["reference-engine", *argv])
    assert args.host == "0.0.0.0" and args.port == 8000


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)s", value)
    assert match, value
    return float(match.group(1))


# --- Kubernetes ------------------------------------------------------------------------------------

def test_k8s_manifests_parse_and_kustomization_lists_them():
    docs = load_k8s()
    assert set(docs) == {"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
                         "Kustomization"}
    listed = set(docs["Kustomization"]["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


def _k8s_expand(arg: str, env: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        assert m.group(1) in env, f"$({m.group(1)}) is not defined for the container"
        return env[m.group(1)]
    return re.sub(r"\$\((\w+)\)", sub, arg)


def test_k8s_proxy_args_are_accepted_with_the_configmap_values():
    docs = load_k8s()
    config = docs["ConfigMap"]["data"]
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "command" not in container  # the image's `derender-proxy serve` entrypoint
    assert container["envFrom"] == [{"configMapRef": {"name": docs["ConfigMap"]["metadata"]["name"]}}]
    argv = [_k8s_expand(str(a), config) for a in container["args"]]
    args = parse_cli(["serve", *argv])
    assert args.model == config["MODEL"] and args.engine_url == [config["ENGINE_URL"]]
    assert (args.tool_call_parser, args.reasoning_parser) == (config["TOOL_CALL_PARSER"], config["REASONING_PARSER"])
    (port,) = container["ports"]
    assert port["containerPort"] == args.port and args.host == "0.0.0.0"
    # the grace period covers the preStop sleep, the drain and the abort grace
    from proxy.lifecycle import ABORT_GRACE

    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > float(pre_stop[1]) + args.shutdown_timeout + ABORT_GRACE
    # the secrets map to the env names the CLI reads
    env_names = {e["name"] for e in container["env"]}
    assert env_names == {"DERENDER_API_KEY", "DERENDER_ENGINE_API_KEY"}


def test_k8s_probes_hit_readiness_and_liveness_on_the_container_port():
    from proxy.probes import LIVE_PATH, READY_PATH

    docs = load_k8s()
    (container,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    paths = {probe: container[probe]["httpGet"]["path"] for probe in ("readinessProbe", "livenessProbe", "startupProbe")}
    assert paths == {"readinessProbe": READY_PATH, "livenessProbe": LIVE_PATH, "startupProbe": LIVE_PATH}
    for probe in paths:
        assert container[probe]["httpGet"]["port"] in port_names
    annotations = docs["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == port_names["http"]


def test_k8s_service_and_hpa_target_the_deployment():
    docs = load_k8s()
    deployment = docs["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = docs["Service"]
    assert service["spec"]["selector"].items() <= labels.items()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert service["spec"]["ports"][0]["targetPort"] in {p["name"] for p in container["ports"]}
    target = docs["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert docs["HorizontalPodAutoscaler"]["spec"]["minReplicas"] >= 2
    # the disruption budget covers the same pods and always leaves one serving
    pdb = docs["PodDisruptionBudget"]["spec"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["maxUnavailable"] < docs["HorizontalPodAutoscaler"]["spec"]["minReplicas"]


def test_k8s_runs_as_non_root_with_read_only_root():
    pod = load_k8s()["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in pod["containers"] + pod["initContainers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"])


def test_k8s_init_container_fetches_no_weights():
    pod = load_k8s()["Deployment"]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    script = init["command"][2]
    compile(script, "fetch-tokenizer", "exec")
    patterns = re.search(r"allow_patterns=(\[.*?\])", script, re.S).group(1)
    assert not any(p.endswith((".safetensors", ".bin", ".pt", ".gguf", "*")) and p != "tokenizer*"
                   for p in eval(patterns))  # noqa: S307 - a literal list from our own manifest


# --- the parser names the deployments use exist ------------------------------------------------

def test_deployed_parser_names_are_registered():
    from core.parsers import registry

    config = load_k8s()["ConfigMap"]["data"]
    names = {("tool", config["TOOL_CALL_PARSER"]), ("reasoning", config["REASONING_PARSER"])}
    for service in ("proxy", "proxy-cpu"):
        argv = [compose_interpolate(str(a)) for a in load_compose()["services"][service]["command"]]
        args = parse_cli(["serve", *argv])
        names |= {("tool", args.tool_call_parser), ("reasoning", args.reasoning_parser)}
    registered = {("tool", n) for n in registry.TOOL_PARSERS} | {("reasoning", n) for n in registry.REASONING_PARSERS}
    if not registered >= names:
        pytest.skip(f"parser families not registered yet: {sorted(names - registered)}")
    assert registered >= names


def _serve_flags() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # the subcommands
    return {opt for action in sub.choices["serve"]._actions for opt in action.option_strings}


def test_readme_flags_are_accepted():
    """Every flag the deploy README names in inline code is a real `serve` flag (or vLLM's --tokens-only)."""
    text = (DEPLOY / "README.md").read_text()
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text)
    flags = {f for span in spans if not span.startswith(("docker", "kubectl", "vllm "))
             for f in re.findall(r"(?<![\w-])--[a-z][a-z-]+", span)}
    assert "--engine-url" in flags
    assert flags - {"--tokens-only"} <= _serve_flags()
    for line in re.findall(r"(?m)^derender-proxy .*$", text):  # commands in code blocks
        parse_cli(shlex.split(line)[1:])


# --- Kubernetes schemas, autoscaling on the proxy's own metric ---------------------------------------

def kubernetes_version() -> str:
    """The Kubernetes version the deploy README says the manifests are for."""
    match = re.search(r"validated against the Kubernetes (\d+\.\d+) API", (DEPLOY / "README.md").read_text())
    assert match, "deploy/README.md must name the Kubernetes version"
    return match.group(1)


def test_k8s_manifests_are_valid_for_the_kubernetes_version_the_readme_names():
    import kubernetes_validate

    version = kubernetes_version()
    checked = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] != "Kustomization":  # (kustomize's file, no API object)
                # strict: an unknown or misspelt field is an error, not silently dropped
                assert kubernetes_validate.validate(doc, version, strict=True) == version
                checked.append(doc["kind"])
    assert set(checked) == set(load_k8s()) - {"Kustomization"}


def test_k8s_schema_validation_catches_mistakes():
    """The validation above can fail: a misspelt field, a wrong type, a wrong apiVersion."""
    import kubernetes_validate

    version = kubernetes_version()
    docs = load_k8s()
    broken = [
        ("Deployment", lambda d: d["spec"]["template"]["spec"]["containers"][0].update(readinesProbe={})),
        ("HorizontalPodAutoscaler", lambda d: d["spec"].update(minReplicas="two")),
        ("PodDisruptionBudget", lambda d: d["spec"].update(maxUnavailabe=1)),
    ]
    for kind, spoil in broken:
        doc = json.loads(json.dumps(docs[kind]))
        spoil(doc)
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(doc, version, strict=True)


def exported_metrics() -> dict[str, str]:
    """Every series name the proxy exports, with its type (from the real registry)."""
    from proxy.metrics import ProxyMetrics

    return {family.name: family.type for family in ProxyMetrics().registry.collect()}


def test_hpa_scales_on_a_metric_the_proxy_exports_not_cpu_alone():
    hpa = load_k8s()["HorizontalPodAutoscaler"]["spec"]
    kinds = [m["type"] for m in hpa["metrics"]]
    assert "Resource" in kinds and len(kinds) > 1
    (pods,) = [m["pods"] for m in hpa["metrics"] if m["type"] == "Pods"]
    name = pods["metric"]["name"]
    assert exported_metrics().get(name) == "gauge"  # a level (in flight), averaged over the pods
    assert pods["target"]["type"] == "AverageValue" and float(pods["target"]["averageValue"]) > 0
    # the adapter rule serves exactly that series under that name
    adapter = yaml.safe_load((DEPLOY / "prometheus-adapter-values.yaml").read_text())
    (rule,) = adapter["rules"]["custom"]
    assert rule["seriesQuery"].startswith(name + "{")
    assert rule["name"]["as"] == name and re.fullmatch(rule["name"]["matches"], name)
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its kustomize) is not installed")
def test_kustomize_builds_the_manifests():
    import subprocess

    out = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    kinds = {doc["kind"] for doc in yaml.safe_load_all(out.stdout) if doc}
    assert kinds == set(load_k8s()) - {"Kustomization"}


# --- compose: start order and health checks ------------------------------------------------------------

def start_order(services: dict) -> list[str]:
    """The order compose starts these services in (depends_on, topologically), or a failure on a cycle."""
    order: list[str] = []
    pending = dict(services)
    while pending:
        ready = [n for n, s in pending.items() if all(d in order for d in s.get("depends_on", {}))]
        assert ready, f"depends_on cycle among {sorted(pending)}"
        for name in sorted(ready):
            order.append(name)
            del pending[name]
    return order


@pytest.mark.parametrize("profile,engine,proxy", [("gpu", "engine", "proxy"), ("cpu", "reference-engine", "proxy-cpu")])
def test_compose_starts_engines_first_and_waits_for_their_health(profile, engine, proxy):
    services = {n: s for n, s in load_compose()["services"].items() if profile in s["profiles"]}
    assert start_order(services) == [engine, proxy]
    for name, service in services.items():
        check = service["healthcheck"]["test"]
        assert check[:3] == ["CMD", "python" if name != "engine" else "python3", "-c"], name
        compile(check[3], name, "exec")
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition == {"condition": "service_healthy"}
            assert "healthcheck" in services[dependency]
    assert "/health/ready" in services[proxy]["healthcheck"]["test"][3]


def run_check(snippet: str, url: str) -> int:
    """A compose / Dockerfile health check's Python, pointed at `url` instead of 127.0.0.1:8000."""
    import subprocess
    import sys

    code = snippet.replace("http://127.0.0.1:8000", url)
    assert code != snippet
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30).returncode


@pytest.mark.slow
def test_the_health_checks_pass_and_fail_as_they_should(qwen3):
    from tests.proxy.frontdoor_stack import Stack

    compose = load_compose()["services"]
    proxy_check = compose["proxy-cpu"]["healthcheck"]["test"][3]
    engine_check = compose["reference-engine"]["healthcheck"]["test"][3]
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith("HEALTHCHECK ")]
    image_check = json.loads(line[line.index("CMD") + 3:].strip())[2]
    up = Stack(qwen3)
    down = Stack(qwen3, engines=0, dead_engines=1)
    try:
        assert run_check(engine_check, up.engines[0].url) == 0
        assert run_check(proxy_check, up.url) == 0 and run_check(image_check, up.url) == 0
        # a proxy whose engine does not answer is not healthy: what depends on it waits
        assert run_check(proxy_check, down.url) != 0 and run_check(image_check, down.url) != 0
    finally:
        up.close()
        down.close()
