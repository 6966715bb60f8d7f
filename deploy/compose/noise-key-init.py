"""One-shot init of the compose stack's noise key (service `noise-key` in docker-compose.yml).

    python noise-key-init.py PATH              keep the key in PATH, or generate one if absent
    python noise-key-init.py PATH --rotate     replace the key in PATH by a new random one
    python noise-key-init.py PATH --from-stdin replace the key in PATH by the one on stdin

The key is 32 random bytes from :mod:`secrets`, written as hex with mode 0400 into a Docker
volume; it is never printed and never leaves the volume. The worker reads it through
DPSTREAM_NOISE_KEY_FILE. Beside it, in every mode, the script keeps this stack's deployment
identity (``deployment-id``: ``compose-`` and 16 random hex digits, generated once, not secret),
which the worker mixes into every noise derivation (DPSTREAM_DEPLOYMENT_FILE): two stacks given
the same key (``--from-stdin``) still draw independent noise. Standard library only: it runs
in the dpstream image (or anywhere). Exit status 0 on success, 1 with one line on stderr
otherwise. See docs/security.md for what rotating the key does (nothing to released slots:
they are re-produced from stored bytes).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import sys
from pathlib import Path

MIN_BYTES = 16  # the worker's own minimum (app/stream/config.py, parse_noise_key)
DEPLOYMENT_FILE = "deployment-id"


def _key_bytes(text: str) -> int:
    """Length in bytes of a hex or base64 key, or 0 when it is neither."""
    text = text.strip()
    if re.fullmatch(r"(?:[0-9a-fA-F]{2})+", text):
        return len(text) // 2
    try:
        return len(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return 0


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by its owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    try:
        os.write(fd, text.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _deployment_id(key_path: Path) -> None:
    """Generate this stack's deployment identity beside the key once; keep it afterwards."""
    path = key_path.with_name(DEPLOYMENT_FILE)
    if not path.exists() or not path.read_text().strip():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(f"compose-{secrets.token_hex(8)}\n")
        tmp.chmod(0o444)
        os.replace(tmp, path)
        print(f"noise-key: generated this stack's deployment identity in {path}")


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    flags = {a for a in argv if a.startswith("--")}
    if len(args) != 1 or flags - {"--rotate", "--from-stdin"} or len(flags) > 1:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 1
    path = Path(args[0])
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK | os.X_OK):
        print(
            f"noise-key: cannot write in {path.parent}: mount the key volume there, owned by the "
            f"user this runs as (uid {os.getuid()})",
            file=sys.stderr,
        )
        return 1
    if "--from-stdin" in flags:
        text = sys.stdin.read().strip()
        if _key_bytes(text) < MIN_BYTES:
            print(
                f"noise-key: stdin is not a hex or base64 key of at least {MIN_BYTES} bytes",
                file=sys.stderr,
            )
            return 1
        _write(path, text)
        print(f"noise-key: stored the key from stdin in {path}; restart the worker to use it")
        return 0
    if "--rotate" in flags:
        _write(path, secrets.token_hex(32))
        print(f"noise-key: rotated the key in {path}; restart the worker to use it")
        return 0
    if path.exists() and path.stat().st_size > 0:
        try:
            ok = _key_bytes(path.read_text()) >= MIN_BYTES
        except OSError as exc:
            print(f"noise-key: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 1
        if not ok:
            print(
                f"noise-key: {path} holds no valid key (hex or base64, >= {MIN_BYTES} bytes); "
                "replace it with --rotate or --from-stdin",
                file=sys.stderr,
            )
            return 1
        print(f"noise-key: keeping the existing key in {path}")
        return 0
    _write(path, secrets.token_hex(32))
    print(f"noise-key: generated a new 256-bit key in {path} (first start)")
    return 0


def run(argv: list[str]) -> int:
    """:func:`main`, then (on success) the deployment identity beside the key."""
    status = main(argv)
    if status == 0:
        _deployment_id(Path([a for a in argv if not a.startswith("--")][0]))
    return status


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
