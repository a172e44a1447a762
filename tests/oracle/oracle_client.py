"""Shared plumbing for the oracle recorders (dev tools, never run in CI).

The recorders talk to real vLLM servers started from ``/root/vllm-oracle`` (see
``tests/oracle/README.md``), tokenize texts with the same tokenizer files the servers
load, and write golden fixtures under ``tests/fixtures/oracle/``. Stdlib HTTP only, so a
recorder runs with any Python that has ``tokenizers`` installed.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

ORACLE_DIR = Path(os.environ.get("ORACLE_DIR", "/root/vllm-oracle"))
MODELS_DIR = ORACLE_DIR / "models"
FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "oracle"


def base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def http(port: int, path: str, body: Any = None, *, method: str = "POST",
         headers: dict[str, str] | None = None, raw: bytes | None = None,
         timeout: float = 600) -> tuple[int, Any, dict[str, str]]:
    """One request; returns (status, parsed JSON body or text, response headers)."""
    hdrs = {"Content-Type": "application/json"}
    hdrs.update(headers or {})
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(base_url(port) + path, data=data, method=method, headers=hdrs)
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
        status, payload, rh = resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        status, payload, rh = exc.code, exc.read(), dict(exc.headers)
    text = payload.decode("utf-8")
    try:
        return status, json.loads(text), rh
    except ValueError:
        return status, text, rh


def post(port: int, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
    status, data, _ = http(port, path, body, **kw)
    return status, data


def post_sse(port: int, path: str, body: Any, timeout: float = 600) -> tuple[int, str, dict[str, str]]:
    """POST and return the raw response text (SSE bytes decoded as UTF-8)."""
    req = urllib.request.Request(base_url(port) + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
        return resp.status, resp.read().decode("utf-8"), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8"), dict(exc.headers)


def sse_payloads(raw: str) -> list[Any]:
    """The JSON payloads of ``data:`` events, without the final [DONE]."""
    out = []
    for block in raw.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.loads(line[6:]))
    return out


def version(port: int) -> str:
    status, data, _ = http(port, "/version", method="GET")
    return data["version"] if status == 200 else "unknown"


def healthy(port: int) -> bool:
    try:
        status, _, _ = http(port, "/health", method="GET", timeout=3)
        return status == 200
    except OSError:
        return False


class Tok:
    """The model's own tokenizer.json, as the oracle server loads it."""

    def __init__(self, model: str, models_dir: Path = MODELS_DIR) -> None:
        self.tk = Tokenizer.from_file(str(models_dir / model / "tokenizer.json"))

    def ids(self, text: str) -> list[int]:
        return self.tk.encode(text, add_special_tokens=False).ids

    def tid(self, token: str) -> int:
        i = self.tk.token_to_id(token)
        if i is None:
            raise KeyError(token)
        return i

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tk.decode(ids, skip_special_tokens=skip_special_tokens)


class Recorder:
    """Collects cases for one fixture file and writes it pretty-printed."""

    def __init__(self, topic: str, description: str, script: str) -> None:
        self.topic, self.description, self.script = topic, description, script
        self.servers: dict[str, dict[str, Any]] = {}
        self.cases: list[dict[str, Any]] = []

    def server(self, key: str, port: int, model: str, flags: list[str], kind: str = "render") -> str:
        if key not in self.servers:
            cmd = "vllm launch render" if kind == "render" else "vllm serve --tokens-only"
            self.servers[key] = {"vllm_version": version(port), "kind": kind, "model": model,
                                 "command": f"{cmd} {model} " + " ".join(flags),
                                 "port_when_recorded": port}
        return key

    def add(self, case: dict[str, Any]) -> dict[str, Any]:
        names = {c["name"] for c in self.cases}
        if case["name"] in names:
            raise ValueError(f"duplicate case name {case['name']}")
        self.cases.append(case)
        return case

    def call(self, name: str, server: str, path: str, body: Any, description: str = "",
             headers: dict[str, str] | None = None, raw: bytes | None = None,
             **extra: Any) -> dict[str, Any]:
        """Record one HTTP exchange as a case."""
        port = self.servers[server]["port_when_recorded"]
        status, resp, rh = http(port, path, body, headers=headers, raw=raw)
        case: dict[str, Any] = {"name": name, "server": server, "description": description,
                                "method": "POST", "path": path, "request": body}
        if headers:
            case["request_headers"] = headers
        if raw is not None:
            case["request_raw"] = raw.decode("utf-8", "replace")
        case.update({"status": status, "response": resp})
        case.update(extra)
        return self.add(case)

    def stream(self, name: str, server: str, path: str, bodies: list[dict[str, Any]],
               description: str = "", echo_state: bool = True, **extra: Any) -> dict[str, Any]:
        """Record a streaming-derender sequence: each body is sent in order; when
        ``echo_state`` the previous response's stream_state is put into the next body
        (unless the body already has a ``stream_state`` key set to something else than
        the sentinel "ECHO")."""
        port = self.servers[server]["port_when_recorded"]
        calls, state = [], None
        for body in bodies:
            body = dict(body)
            if echo_state and body.get("stream_state", "ECHO") == "ECHO":
                body["stream_state"] = state
            status, resp = post(port, path, body)
            calls.append({"request": body, "status": status, "response": resp})
            if status == 200 and isinstance(resp, dict) and "stream_state" in resp:
                state = resp["stream_state"]
        case = {"name": name, "server": server, "description": description,
                "method": "POST", "path": path, "calls": calls}
        case.update(extra)
        return self.add(case)

    def write(self, filename: str | None = None, **top: Any) -> Path:
        FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
        path = FIXTURE_DIR / (filename or f"{self.topic}.json")
        versions = sorted({s["vllm_version"] for s in self.servers.values()})
        doc = {"topic": self.topic, "description": self.description,
               "vllm_versions": versions,
               "recorded": {"script": self.script,
                            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")},
               "servers": self.servers}
        doc.update(top)
        doc["cases"] = self.cases
        path.write_text(pretty(doc) + "\n", encoding="utf-8")
        print(f"wrote {path} ({len(self.cases)} cases)")
        return path


def pretty(obj: Any, level: int = 0) -> str:
    """Pretty JSON (indent 1) that keeps short containers and lists of scalars on one line,
    so token-id lists do not take one line per id."""
    compact = json.dumps(obj, ensure_ascii=False)
    scalar_list = isinstance(obj, list) and all(not isinstance(v, (list, dict)) for v in obj)
    if not isinstance(obj, (list, dict)) or scalar_list or len(compact) <= 80:
        return compact
    pad, inner = " " * level, " " * (level + 1)
    if isinstance(obj, list):
        items = [inner + pretty(v, level + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    items = [inner + json.dumps(k, ensure_ascii=False) + ": " + pretty(v, level + 1)
             for k, v in obj.items()]
    return "{\n" + ",\n".join(items) + "\n" + pad + "}"


def wait_for(port: int, timeout: float = 300) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if healthy(port):
            return
        time.sleep(1)
    raise RuntimeError(f"server on {port} not healthy")
