"""Signature verification in a second process, so that sigstore's import (about 0.35 s of CPU) and each bundle's
cryptography (about 1.5 ms) run on another core beside the lock's own work: in the command's process they share
the one core Python's GIL gives it with the requests, hashing and parsing of the lock.

`SignatureWorker.start` runs `python -m kernelpin.trust.worker` (a plain subprocess, not multiprocessing:
spawn re-imports the caller's __main__, and forking a process that runs threads is unsafe), sends it the policy
and the project root once, and then one job per variant: the metadata.json and bundle bytes as the lock read them
(bytes, not paths: nothing is read again). The child imports sigstore and makes the verifier at once, then answers
each job with one JSON line: the `Verified` fields (and the trust_root_id of the root it loaded: the parent
keeps a receipt only under the root it recalls receipts by), or the refusal as data, which the parent raises as
the same `SignatureError` or `TrustRootError`, with the same message, that `verify_bundle` raises in-process. The parent
pickles to the child (which trusts its parent) and reads only JSON back. The child exits at the end of its input,
so it never outlives the parent, and verifies offline (a `--refresh-trust-root` runs in the parent first and
updates the TUF cache the child then loads).

Whatever goes wrong with the worker (no interpreter to start it with, it died, a broken pipe, an answer that is
not one) raises `WorkerGone`; the caller then verifies in-process, with the same checks: never a silent pass.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pickle
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kernelpin.errors import KernelpinError
from kernelpin.trust.policy import Policy, SignatureError
from kernelpin.trust.signature import TrustRootError, Verified, verifier_and_root, verify_bundle

if TYPE_CHECKING:
    from sigstore.verify import Verifier

WORKER = "KERNELPIN_SIGNATURE_WORKER"
_MODULE = "kernelpin.trust.worker"
# Run in the directory kernelpin is imported from: that directory first on the path, then this module as __main__.
_BOOTSTRAP = (
    f"import os, runpy, sys; sys.path.insert(0, os.getcwd()); runpy.run_module({_MODULE!r}, run_name='__main__')"
)


def isolation_flags(flags: Any = sys.flags) -> list[str]:
    """The command-line flags that gave this interpreter its isolation, for a child to run as isolated."""
    if flags.isolated:
        return ["-I"]  # -E, -s and -P with it
    return [
        flag
        for flag, on in (
            ("-E", flags.ignore_environment),
            ("-s", flags.no_user_site),
            ("-P", getattr(flags, "safe_path", False)),
        )
        if on
    ]


_STOP_SECONDS = 5.0  # how long a worker whose input ended may take to exit before it is killed
# How long a job may wait for its answer (the first one waits for sigstore's import, about 0.4 s): a worker
# silent for this long (stopped, or starved) is given up, and every later job verified in-process.
_ANSWER_SECONDS = 60.0


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether KERNELPIN_SIGNATURE_WORKER lets commands verify in a second process (the default; 0: in-process)."""
    text = environ.get(WORKER, "").strip()
    if text in ("", "1"):
        return True
    if text == "0":
        return False
    raise KernelpinError(
        f"{WORKER}={text[:20]!r} is neither 1 (verify signatures in a second process, the default) "
        "nor 0 (in the command's own process)"
    )


class WorkerGone(Exception):
    """The worker cannot answer: verify in-process instead."""


class _Waiting:
    """The jobs sent and not yet answered, by id; all failed at once when the worker is gone. Holds no reference
    to the worker, so that a worker nobody closed is still collected (and its process stopped)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[int, Future[Any]] = {}
        self._ids = itertools.count()
        self._gone = False
        self.idle = True  # no job was ever added

    def add(self) -> tuple[int, Future[Any]]:
        with self._lock:
            if self._gone:
                raise WorkerGone("the signature worker is gone")
            job, future = next(self._ids), Future[Any]()
            self._futures[job] = future
            self.idle = False
            return job, future

    def answer(self, job: object, answer: object) -> bool:
        with self._lock:
            future = self._futures.pop(job, None) if isinstance(job, int) else None
        if future is None:
            return False
        future.set_result(answer)
        return True

    def fail_all(self) -> None:
        with self._lock:
            self._gone = True
            futures, self._futures = list(self._futures.values()), {}
        for future in futures:
            future.set_exception(WorkerGone("the signature worker stopped answering"))


def _read_answers(stream: IO[bytes], waiting: _Waiting) -> None:
    """The parent's reader thread: hands each answer line to its job until the worker's output ends or an answer
    is not one (then every waiting job, and every later one, is verified in-process)."""
    try:
        for line in stream:
            try:
                answer = json.loads(line)
            except ValueError:
                break
            if not isinstance(answer, dict) or not waiting.answer(answer.get("job"), answer):
                break
    except (OSError, ValueError):  # the stream closed under the reader
        pass
    finally:
        waiting.fail_all()


def _stop(process: subprocess.Popen[bytes], reader: threading.Thread, idle: Callable[[], bool]) -> None:
    """End the worker: its input closes, it exits (or is killed when it does not), and is waited for. A worker
    that was never sent a job (started on an expectation the releases did not meet) is killed at once: it would
    otherwise finish importing sigstore, about 0.2 s of CPU, before it reads the end of its input. It is killed
    before its input closes: a worker that had finished the import would otherwise read the end and exit on its
    own while this thread waits for the core (seen in CI, under load)."""
    if idle():
        process.kill()
    with contextlib.suppress(OSError, ValueError):
        if process.stdin is not None:
            process.stdin.close()
    try:
        process.wait(_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    reader.join(_STOP_SECONDS)
    if process.stdout is not None:
        process.stdout.close()


class SignatureWorker:
    """The parent's side: sends jobs from any number of threads and waits for each one's answer."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process, self._input = process, process.stdin
        self._sending = threading.Lock()
        self._waiting = _Waiting()
        reader = threading.Thread(
            target=_read_answers, args=(process.stdout, self._waiting), name="kernelpin-signature-answers", daemon=True
        )
        reader.start()
        # Stopped by close(), else when the worker is collected or at exit: no process is left behind.
        waiting = self._waiting
        self._stopping = weakref.finalize(self, _stop, process, reader, lambda: waiting.idle)

    @property
    def pid(self) -> int:
        return self._process.pid

    @classmethod
    def start(cls, policy: Policy, project_root: Path) -> SignatureWorker:
        """Start a worker with this policy; WorkerGone when it cannot be started."""
        if getattr(sys, "frozen", False) or not sys.executable:
            raise WorkerGone("no Python interpreter to run the signature worker with")
        try:
            # With this interpreter's isolation flags (-I, -E, -s, -P): under `python -I` no sitecustomize.py on
            # PYTHONPATH runs in the process whose answers decide what verifies. Started in the directory
            # kernelpin is imported from, put first on the child's path by the bootstrap (`-m` would not, under
            # -I or -P): the child runs this same kernelpin, and nothing in the project's directory shadows a
            # module it imports. It then works in this process's directory, so that paths (a relative
            # trusted-root) read the same.
            here = os.getcwd()
            process = subprocess.Popen(
                [sys.executable, *isolation_flags(), "-c", _BOOTSTRAP],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=Path(__file__).resolve().parents[2],
            )
        except (OSError, ValueError, subprocess.SubprocessError) as error:
            raise WorkerGone(f"cannot start the signature worker ({error})") from None
        worker = cls(process)
        worker._send((policy, project_root, here))
        return worker

    def _send(self, message: object) -> None:
        try:
            with self._sending:
                pickle.dump(message, self._input, protocol=pickle.HIGHEST_PROTOCOL)
                self._input.flush()
        except (OSError, ValueError):  # a broken pipe, or closed
            self._waiting.fail_all()
            raise WorkerGone("the signature worker is gone") from None

    def verify(self, repo_id: str, variant: str, metadata: bytes, bundle: bytes) -> tuple[Verified, str | None]:
        """verify_bundle's answer for one variant, from the worker: the Verified (and the trust_root_id of the root
        it verified under; None: not known for sure), or the SignatureError or TrustRootError it raised;
        WorkerGone when the worker cannot answer."""
        job, answer = self._waiting.add()
        with contextlib.suppress(WorkerGone):  # the future fails with it
            self._send((job, repo_id, variant, metadata, bundle))
        try:
            return _outcome(repo_id, variant, answer.result(_ANSWER_SECONDS))
        except TimeoutError:
            self._waiting.fail_all()
            raise WorkerGone(f"no answer from the signature worker within {_ANSWER_SECONDS:g} s") from None

    def close(self) -> None:
        self._stopping()


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    raise WorkerGone("an answer that is not one")


def _outcome(repo_id: str, variant: str, answer: dict[str, Any]) -> tuple[Verified, str | None]:
    """What an answer line says, raised as the in-process call raises it: the Verified, and the trust_root_id
    of the root the worker verified it under (None: not known for sure)."""
    if "verified" in answer:
        root = answer.get("root")
        try:
            return Verified.from_fields(answer["verified"]), None if root is None else _text(root)
        except ValueError:
            raise WorkerGone("an answer that is not one") from None
    if isinstance(refused := answer.get("refused"), dict):
        raise SignatureError(repo_id, variant, _text(refused.get("cause")), _text(refused.get("fix")))
    if "trust_root" in answer:
        raise TrustRootError(_text(answer["trust_root"]))
    raise WorkerGone("an answer that is not one")  # "unexpected": the in-process call raises what it was


def _answer(
    made: Verifier | TrustRootError | None,
    root: str | None,
    policy: Policy,
    repo_id: str,
    variant: str,
    metadata: bytes,
    bundle: bytes,
) -> dict[str, Any]:
    """The child's answer to one job, as data."""
    if isinstance(made, TrustRootError):  # in-process, making the verifier fails before the bundle is read
        return {"trust_root": str(made)}
    if made is None:
        return {"unexpected": "no verifier"}
    try:
        verified = verify_bundle(repo_id, variant, metadata, bundle, policy, made)
    except SignatureError as error:
        return {"refused": {"cause": error.cause, "fix": error.fix}}
    except Exception as error:  # noqa: BLE001  # the parent verifies in-process, which raises it there
        return {"unexpected": type(error).__name__}
    if verified is None:  # a job always has a bundle: never an unsigned pass
        return {"unexpected": "no signature"}
    return {"verified": verified.fields(), "root": root}


def main() -> None:
    """The child: the settings, then jobs, from stdin until it ends; one answer line per job on stdout."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, never into the answers
    jobs = sys.stdin.buffer
    policy, project_root, directory = pickle.load(jobs)
    os.chdir(directory)
    made: Verifier | TrustRootError | None
    root: str | None = None  # the trust_root_id of the root it verifies under
    try:
        made, root = verifier_and_root(policy, project_root)
    except TrustRootError as error:
        made = error
    except Exception:  # noqa: BLE001  # answered "unexpected": the parent makes the verifier itself and raises what it raises
        made = None
    while True:
        try:
            job, repo_id, variant, metadata, bundle = pickle.load(jobs)
        except EOFError:
            # Every answer is written and flushed: nothing is left to do but tear down an interpreter that holds
            # sigstore, pydantic and cryptography, about 50 ms that the command would wait for at its end.
            os._exit(0)
        answer = _answer(made, root, policy, repo_id, variant, metadata, bundle)
        answers.write(json.dumps({"job": job, **answer}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
