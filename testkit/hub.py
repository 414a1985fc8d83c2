"""A real Hub API for tests: olah (PyPI) in offline mode, serving git repositories made on the spot.

    server = HubServer(tmp_path)
    repo = server.repo("acme/img2gray", "kernel")     # a kernel repository (default: a model repository)
    repo.write({"build/x/__init__.py": "..."})
    repo.commit("v0.1.0"); repo.tag("v0.1.0", annotated=True)
    with server:                                       # starts olah on a free 127.0.0.1 port
        HfApi(endpoint=server.endpoint).list_repo_refs("acme/img2gray", repo_type="kernel")

Repositories can be changed while the server runs: olah reads the git repositories on every request.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from testkit.hub_front import IN_FLIGHT

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Publisher",
    "GIT_AUTHOR_EMAIL": "publisher@example.com",
    "GIT_COMMITTER_NAME": "Test Publisher",
    "GIT_COMMITTER_EMAIL": "publisher@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _olah_cli() -> str:
    beside_python = Path(sys.executable).with_name("olah-cli")
    found = str(beside_python) if beside_python.exists() else shutil.which("olah-cli")
    if not found:
        raise RuntimeError("olah-cli not found: pip install olah")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MirrorRepo:
    """A git working clone laid out where olah serves it from."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._commits = 0
        if not (path / ".git").exists():
            path.mkdir(parents=True, exist_ok=True)
            self.git("init", "-q", "-b", "main")

    def git(self, *args: str, input: bytes | None = None) -> str:
        # Fixed, increasing dates: the same files and history give the same commit shas.
        self._commits += 1
        date = f"@{1_700_000_000 + self._commits} +0000"
        env = {**os.environ, **_GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        done = subprocess.run(["git", *args], cwd=self.path, env=env, input=input, capture_output=True, check=True)
        return done.stdout.decode().strip()

    def write(self, files: Mapping[str, bytes | str], clear: bool = False) -> None:
        """Write files (relative paths); with `clear`, remove every tracked file first."""
        if clear:
            self.git("rm", "-rq", "--ignore-unmatch", ".")
        for relative, content in files.items():
            target = self.path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def tag(self, name: str, annotated: bool = False, commit: str = "HEAD") -> None:
        if annotated:
            self.git("tag", "-a", name, "-m", f"release {name}", commit)
        else:
            self.git("tag", name, commit)

    def branch(self, name: str, commit: str = "HEAD") -> None:
        self.git("branch", "-f", name, commit)

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(tags, branches): name -> commit (annotated tags peeled), as the Hub lists them."""
        listing = self.git(
            "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)", "refs/tags", "refs/heads"
        )
        tags, branches = {}, {}
        for line in filter(None, listing.splitlines()):
            ref, target, peeled = ([*line.split(" "), ""])[:3]
            if ref.startswith("refs/tags/"):
                tags[ref.removeprefix("refs/tags/")] = peeled or target
            else:
                branches[ref.removeprefix("refs/heads/")] = target
        return tags, branches

    def commit_tree(self, tree: dict, message: str) -> str:
        """Commit a tree given as {name: bytes | subtree}, names taken verbatim (e.g. '..' or 'a\\b'),
        as only a hostile server would serve them. git's porcelain refuses such names; `git mktree`
        writes them. The commit becomes the head of `main`."""
        commit = self.git("commit-tree", self._mktree(tree), "-p", "HEAD", "-m", message)
        self.git("update-ref", "refs/heads/main", commit)
        return commit

    def _mktree(self, tree: dict) -> str:
        lines = []
        for name, content in tree.items():
            if isinstance(content, dict):
                lines.append(f"040000 tree {self._mktree(content)}\t{name}")
            else:
                lines.append(f"100644 blob {self.git('hash-object', '-w', '--stdin', input=content)}\t{name}")
        return self.git("mktree", input=("\n".join(lines) + "\n").encode())


class HubServer:
    """A Hub API on 127.0.0.1 over git repositories, offline: model (and dataset, space) repositories at
    `<root>/mirrors/<type>s/<org>/<name>` and kernel repositories at `<root>/kernel-mirror/models/<org>/<name>`.

    olah serves both trees (one process each: it knows no kernel type); testkit/hub_front.py, on `port`,
    answers the Hub's paths for both, rewriting the kernel ones (`/api/kernels/...`, `/kernels/...`) onto
    the olah that holds the kernel repositories. `trusted_publishers` are the organizations whose
    overview says `trustedKernelPublisher` (what `kernels` checks before loading without trust_remote_code).
    With `latency`, every answer of the front starts that many seconds late, as over a real network. With
    `cdn`, the front answers a file at a commit from its own copy of olah's first answer, as the Hub's CDN does
    (benchmarks: olah's file reads would otherwise bound a client sharing its cores; tests leave it off, so that
    every answer is olah's).
    """

    def __init__(
        self, root: Path, trusted_publishers: tuple[str, ...] = (), latency: float = 0.0, cdn: bool = False
    ) -> None:
        self.root = root
        self.latency = latency
        self.cdn = cdn
        self.mirrors = root / "mirrors"
        self.kernel_mirrors = root / "kernel-mirror"
        for directory in (self.mirrors, self.kernel_mirrors / "models"):
            directory.mkdir(parents=True, exist_ok=True)
        self.trusted_publishers = trusted_publishers
        self.port: int | None = None
        self._olah_ports: dict[str, int] = {}
        self._processes: list[subprocess.Popen] = []
        self._named: dict[str, subprocess.Popen] = {}

    @property
    def endpoint(self) -> str:
        if self.port is None:
            raise RuntimeError("the server is not running")
        return f"http://127.0.0.1:{self.port}"

    def repo(self, repo_id: str, repo_type: str = "model") -> MirrorRepo:
        org, name = repo_id.split("/")
        if repo_type == "kernel":
            return MirrorRepo(self.kernel_mirrors / "models" / org / name)
        return MirrorRepo(self.mirrors / f"{repo_type}s" / org / name)

    def _spawn(self, name: str, command: list[str]) -> None:
        workdir = self.root / name
        workdir.mkdir(exist_ok=True)
        with open(self.root / f"{name}.log", "ab") as log:
            # cwd: olah writes ./logs; its own process group so stop() ends it and its children only.
            self._processes.append(
                subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )
        self._named[name] = self._processes[-1]

    def _olah(self, name: str, mirrors: Path, port: int) -> None:
        config = self.root / f"{name}.toml"
        config.write_text(
            "[basic]\n"
            f'host = "127.0.0.1"\nport = {port}\n'
            f'repos-path = "{self.root / (name + "-cache")}"\n'
            f'mirrors-path = ["{mirrors}"]\n'
            "[accessibility]\noffline = true\n"
        )
        self._spawn(name, [_olah_cli(), "-c", str(config)])

    def start(self, port: int | None = None, timeout: float = 30.0) -> str:
        self.port = port or self.port or free_port()
        for kind in ("model", "kernel"):
            self._olah_ports.setdefault(kind, free_port())
        self._olah("olah", self.mirrors, self._olah_ports["model"])
        self._olah("olah-kernels", self.kernel_mirrors, self._olah_ports["kernel"])
        front = [
            sys.executable,
            str(Path(__file__).with_name("hub_front.py")),
            "--port",
            str(self.port),
            "--models",
            f"http://127.0.0.1:{self._olah_ports['model']}",
            "--kernels",
            f"http://127.0.0.1:{self._olah_ports['kernel']}",
        ]
        for org in self.trusted_publishers:
            front += ["--trusted-publisher", org]
        if self.latency:
            front += ["--latency", repr(self.latency)]
        if self.cdn:
            front += ["--cache", str(self.root / "front-cache")]
        self._spawn("front", front)
        deadline = time.monotonic() + timeout
        waiting = [self.port, *self._olah_ports.values()]
        while waiting and time.monotonic() < deadline:
            if dead := [p for p in self._processes if p.poll() is not None]:
                name = next(name for name, process in self._named.items() if process is dead[0])
                self.stop()
                raise RuntimeError(
                    f"the test Hub's {name} server exited at its start (status {dead[0].returncode}; "
                    f"a port taken?); its log: {self.root / (name + '.log')}"
                )
            try:
                with socket.create_connection(("127.0.0.1", waiting[0]), timeout=0.5):
                    waiting.pop(0)
            except OSError:
                time.sleep(0.1)
        if waiting:
            self.stop()
            raise RuntimeError(
                f"the test Hub did not listen on port {waiting[0]} within {timeout}s; see the logs in {self.root}"
            )
        return self.endpoint

    def most_in_flight(self) -> dict[str, int]:
        """How many requests ("requests") and file downloads ("files") the front has answered at once, at most,
        since the last call (the first: since the start)."""
        with urllib.request.urlopen(self.endpoint + IN_FLIGHT, timeout=10) as answer:
            return json.loads(answer.read())

    def cpu_seconds_by_process(self) -> dict[str, float]:
        """The CPU time (user and system, with their children that ended: git) each test-Hub process has used
        since it started, from /proc (Linux): "olah" (model repositories), "olah-kernels", "front"."""
        used = {}
        for name, process in self._named.items():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
                used[name] = sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # u, s, cu, cs
        return used

    def cpu_seconds(self) -> float:
        """The CPU time the test Hub's processes (the front, both olahs, and their children that ended: git)
        have used since they started: what the server side of a benchmark costs."""
        return sum(self.cpu_seconds_by_process().values())

    def stop(self) -> None:
        """Kill the servers at once (as a crash or a network cut would), keeping the ports for a restart."""
        for process in self._processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._processes, self._named = [], {}

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
