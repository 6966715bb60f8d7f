"""The docs say what the code does: their examples run, and what they name exists.

* Every ```` ```python ```` block of README.md and docs/*.md runs (in one namespace per file,
  in order). A block that needs a broker or a running service says so on its first line
  (``# needs: broker``); it is compiled and its imports run.
* Every ``app/...`` path, ``app.x.y`` module and ``Class`` / ``Class.member`` a doc names in
  backquotes exists (classes and their members are read from the source with :mod:`ast`), and
  every ``Dpstream...`` alert it names is in the chart's alert rules.
* The README's alert table lists every rule of the rules file, with its severity and ``for``.
* Every ``dpstream`` command the docs give (shell blocks and backquotes) parses with the real
  parser, and the ones that read a deployment run as written against a live ``dpstream demo``
  (its own embedded broker), in the environment its ``export`` line gives: they exit 0, or are
  still running when they would run until Ctrl-C, without a traceback. The rest are listed in
  :data:`NOT_AGAINST_THE_DEMO` with the reason.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "charts/dpstream/README.md",
]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
KUBERNETES = {
    "ClusterIP",
    "IfNotPresent",
    "OnRootMismatch",
    "RollingUpdate",
    "RuntimeDefault",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "StatefulSet",
    "ConfigMap",
}


def _members() -> dict[str, set[str]]:
    """Every class defined under app/, with the names its body defines (methods, attributes)."""
    out: dict[str, set[str]] = {}
    for path in ROOT.glob("app/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = out.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return out


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:i])
        if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
            return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(doc: Path) -> None:
    namespace: dict[str, object] = {}
    for block in BLOCK.findall(doc.read_text()):
        if block.startswith("# needs:"):
            compile(block, str(doc), "exec")
            imports = [ln for ln in block.splitlines() if re.match(r"(from \S+ )?import ", ln)]
            exec("\n".join(imports), namespace)  # noqa: S102 - the doc's own imports
        else:
            exec(compile(block, str(doc), "exec"), namespace)  # noqa: S102 - the doc's example


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_names_in_docs_exist(doc: Path) -> None:
    members = _members()
    alerts = set(
        re.findall(r"alert: (\w+)", (ROOT / "charts/dpstream/files/alerts.yaml").read_text())
    )
    missing = []
    for tok in re.findall(r"`([^`\n]+)`", doc.read_text()):
        for path in re.findall(r"\b(app/[\w/]*[\w.]*)", tok):
            if not (ROOT / path).exists():
                missing.append(tok)
        for mod in re.findall(r"\b(app(?:\.\w+)+)\b(?![./])", tok):
            if not _module_exists(mod):
                missing.append(tok)
        found = re.fullmatch(r"([A-Z][a-z0-9]+[A-Z]\w*)(?:\.(\w+))?(?:\(.*\))?", tok)
        if found is None or found.group(1) in KUBERNETES:
            continue
        cls, member = found.groups()
        if cls.startswith("Dpstream") and member is None:
            if cls not in alerts:
                missing.append(tok)
        elif cls not in members or (member is not None and member not in members[cls]):
            missing.append(tok)
    assert missing == [], f"{doc.name} names what does not exist: {sorted(set(missing))}"


def test_the_readme_alert_table_is_the_rules_file() -> None:
    """Issue 32: the README listed 9 of the 11 alerts."""
    rules = yaml.safe_load((ROOT / "charts/dpstream/files/alerts.yaml").read_text())
    expected = {}
    for group in rules["groups"]:
        for rule in group["rules"]:
            wait = rule.get("for")
            shown = [rule["labels"]["severity"]]
            if wait:
                shown.append(re.sub(r"(\d+)(\w)", r"\1 \2", wait))  # 5m -> "5 m"
            expected[rule["alert"]] = ", ".join(shown)
    rows = re.findall(r"^\| `(Dpstream\w+)` \(([^)]*)\) \|", (ROOT / "README.md").read_text(), re.M)
    assert dict(rows) == expected and len(rows) == len(expected)


FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
"""A fenced block at the start of a line: its language (maybe none) and its text."""
SHELLS = {"", "bash", "sh", "console", "shell"}
COMMAND = re.compile(r"^(?:\.venv/bin/)?(?:nice -n \d+ )?(dpstream .*)$")
COMMAND_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def doc_commands() -> list[tuple[str, str]]:
    """``(doc, command)`` for every ``dpstream`` command in README.md and docs/: the lines of
    fenced blocks (comments dropped) and the backquoted commands of the text."""
    found: list[tuple[str, str]] = []
    for doc in COMMAND_DOCS:
        text = doc.read_text()
        name = str(doc.relative_to(ROOT))
        for lang, block in FENCE.findall(text):
            if lang not in SHELLS:
                continue
            for line in block.replace("\\\n", " ").splitlines():
                line = re.split(r"\s+#", line.strip(), maxsplit=1)[0].strip()
                line = re.split(r"\s{2,}", line, maxsplit=1)[0]  # a synopsis' second column
                if match := COMMAND.match(line):
                    found.append((name, match.group(1)))
        for inline in re.findall(r"`([^`\n]+)`", FENCE.sub("", text)):
            if match := COMMAND.match(inline.strip()):
                found.append((name, match.group(1)))
    return sorted(set(found))


LOCAL = "app-usage"
"""A local stream of ``demo --mode local``: the central demo has none (parsed only)."""
PLACEHOLDERS = {
    " S": " clicks",
    "<id>": LOCAL,
    "<local id>": LOCAL,
    "--preset NAME": "--preset pwsm-eps",
    "bench PAPER": "bench pwsm",
}
"""A synopsis' placeholders, as a newcomer fills them in against the (central) demo."""


def filled(command: str) -> str:
    """``command`` with its placeholders filled in, a synopsis' options dropped (``[...]``)
    and its first alternative kept (``a | b``, outside quotes)."""
    for old, new in PLACEHOLDERS.items():
        command = re.sub(re.escape(old) + r"(?!\w)", new, command)
    command = re.sub(r"\s*\[[^\]]*\]", "", command).replace(" ...", "")
    if "'" not in command:
        command = command.split(" | ")[0]
    return command.strip()


RUN_AGAINST_THE_DEMO = ("ledger show", "releases tail", "verify", "produce", "topics create")
"""The verbs that read (or feed) a running deployment: run against the demo."""
NOT_AGAINST_THE_DEMO = {
    "demo": "starts its own demo (tests/tools/test_demo_stop.py runs it)",
    "worker": "the service itself: the integration tests run it",
    "simulate devices": "local streams: the central demo has none",
    "bench": "benchmarks of minutes to hours: tests/bench runs their quick profiles",
    "capacity": "start their own broker and workers: tests/integration runs overload and churn",
    "audit": "the privacy audit, minutes: tests/audit runs its quick profile",
    "replay": "offline, no broker: tests/tools/test_replay_cli.py runs it",
    "check": "the conformance suite: tests/dp runs it",
}
"""The verbs the docs give that do not run against the demo, and where they are tested."""
UNTIL_CTRL_C = r"dpstream (releases tail|ledger show .*--watch|produce)\b"
"""Commands that run until stopped (without --count, --idle-exit or --duration)."""


def _verb(command: str) -> str:
    words = command.split()[1:]
    two = " ".join(words[:2])
    return (
        two
        if two in {"ledger show", "releases tail", "topics create", "simulate devices"}
        else words[0]
    )


def test_the_docs_give_commands_and_each_verb_is_classified() -> None:
    commands = doc_commands()
    assert len(commands) > 20
    verbs = {_verb(filled(c)) for _, c in commands}
    assert _demo_commands(verify=True) and len(_demo_commands(verify=False)) > 5
    assert verbs <= set(RUN_AGAINST_THE_DEMO) | set(NOT_AGAINST_THE_DEMO), verbs
    assert set(RUN_AGAINST_THE_DEMO) <= verbs


def _names_a_verb(command: str) -> bool:
    """``dpstream ledger show`` in a sentence names the verb; it is not a command to run."""
    return re.fullmatch(r"dpstream( [a-z][a-z-]*){1,2}", command) is not None


@pytest.mark.parametrize(("doc", "command"), doc_commands())
def test_every_doc_command_parses(doc: str, command: str) -> None:
    from app.cli import build_parser, parse

    argv = shlex.split(filled(command).split(" | ")[0])[1:]
    if _names_a_verb(command):  # the verb (and its action) exist
        parser = build_parser()
        for word in argv:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            assert subs and word in subs[0].choices, f"{doc}: {command}"
            parser = subs[0].choices[word]
        return
    parse(argv)  # argparse exits (SystemExit) on an unknown verb or option


def _run_bounded(line: str, env: dict[str, str], bound_s: float) -> tuple[int | None, str, str]:
    """Run ``line`` in bash; returns (exit code, or None if still running at ``bound_s`` and
    stopped then; stdout; stderr)."""
    proc = subprocess.Popen(  # noqa: S603 - the docs' own command line
        ["bash", "-c", line],  # noqa: S607
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=bound_s)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return None, out, err


def _demo_commands(verify: bool) -> list[str]:
    """The docs' commands that read (or feed) a deployment, filled in for the central demo:
    ``verify`` ones, or the others."""
    return sorted(
        {
            filled(c)
            for _, c in doc_commands()
            if _verb(filled(c)) in RUN_AGAINST_THE_DEMO
            and not _names_a_verb(c)
            and LOCAL not in filled(c)
            and (_verb(filled(c)) == "verify") == verify
        }
    )


@pytest.fixture(scope="module")
def demo_env() -> Iterator[dict[str, str]]:
    """A live ``dpstream demo`` and the environment its export line gives (PATH has the
    venv's ``dpstream``); a few slots released before the first command."""
    from tests.tools.live_demo import running_demo

    bin_dir = str(Path(sys.executable).parent)
    with running_demo() as env:
        time.sleep(8)  # a few slots on the topics for --from-beginning and the ledger
        yield {**env, "PATH": f"{bin_dir}:{env.get('PATH', '')}"}


def _failure(command: str, env: dict[str, str], bound_s: float) -> str | None:
    """Why ``command`` failed against the demo, or None."""
    if "| jq" in command and shutil.which("jq") is None:
        command = command.split(" | ")[0]  # jq is not ours: the dpstream part
    forever = re.match(UNTIL_CTRL_C, command) is not None and not (
        re.search(r"--(count|idle-exit|duration)\b", command)
    )
    started = time.monotonic()
    code, out, err = _run_bounded(command, env, FOREVER_S if forever else bound_s)
    took = time.monotonic() - started
    ok = (code == 0 or (code is None and forever)) and "Traceback" not in err
    if not ok or not (out.strip() or command.startswith("dpstream produce")):
        return f"{command!r}: exit {code} after {took:.0f} s: {err[-400:]}"
    return None


def _failures(
    commands: list[str], env: dict[str, str], bound_s: float, at_once: int = 1
) -> list[str]:
    """Each command's :func:`_failure`, ``at_once`` commands at a time (each in its own process
    with its own bound: the commands read the demo, or feed it, and none waits on another)."""
    with ThreadPoolExecutor(max_workers=at_once) as pool:
        found = pool.map(lambda c: _failure(c, env, bound_s), commands)
        return [f for f in found if f is not None]


FOREVER_S = 12.0
"""How long a command that runs until Ctrl-C runs before the test stops it (Ctrl-C)."""
AT_ONCE = 4
"""How many of the docs' commands run against the demo at a time: the ones that run until
Ctrl-C each hold the demo for :data:`FOREVER_S`, mostly waiting on its slots."""


@pytest.mark.integration
def test_every_doc_command_runs_as_written_against_the_demo(demo_env: dict[str, str]) -> None:
    """Issue 32: the README's next steps after the demo ended in a traceback. Each command
    that reads a deployment runs against a live demo, in the environment its export line
    gives; then the same verbs with the default streams file refuse it in one line."""
    failures = _failures(_demo_commands(verify=False), demo_env, 60, at_once=AT_ONCE)
    mismatched = {**demo_env, "DPSTREAM_CONFIG": str(ROOT / "app/stream/default_streams.yaml")}
    for verb in ("ledger show -s clicks", "releases tail -s clicks", "produce"):
        code, _, err = _run_bounded(f"dpstream {verb}", mismatched, 60)
        if code != 2 or err.count("\n") != 1 or "does not describe the deployment" not in err:
            failures.append(f"{verb} with the wrong file: exit {code}: {err[-400:]}")
    assert failures == []


@pytest.mark.integration
def test_verify_as_the_docs_give_it_answers_against_the_demo(demo_env: dict[str, str]) -> None:
    """Issue 32 must-show: verify against the live demo answers in under 30 s."""
    assert _failures(_demo_commands(verify=True), demo_env, 45) == []
