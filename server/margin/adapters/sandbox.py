"""Programs Margin did not write (a model's code, and the agent's commands to come) run here, kept
from what is the user's: their environment (API keys), their files, the network, and the machine
after the program ends.

Two protections, the stronger one whenever the machine has it (`protection()` says which is in
force, and why; the CLI prints it):

- **bubblewrap** (`bwrap`, Debian's `bubblewrap`): the program runs in namespaces of its own: no
  network at all (its own loopback, nothing listening), a read-only view of the system (`/usr`
  and the interpreter's folder, nothing of /home, /root, /etc or /work), a private writable folder
  (the one it is given) and a private /tmp, its own process tree (it sees no process of the user,
  so no other process's environment; when it ends, or Margin stops it, or Margin dies, every
  process it started dies with it: the kernel ends a PID namespace whole), an environment of the
  variables it is given, as the unprivileged user `nobody` of its namespace. bubblewrap is
  started with that environment too, since it is the namespace's first process and its
  environment is visible there.
- **launcher** (no bubblewrap, or one the kernel refuses: no user namespaces): a small launcher
  of our own, started with an environment of the variables given. It makes itself the reaper of
  every process the program starts (PR_SET_CHILD_SUBREAPER), so a process that leaves its session
  and parent is still found and killed when the program ends or is stopped. When Margin runs as
  root, the program runs as `nobody`, so it cannot read the user's files or any root process's
  environment. Otherwise it runs as the user and can read what the user can; Margin makes itself
  non-dumpable (PR_SET_DUMPABLE 0) so at least its own environment is not readable, but an
  editor's or shell's is. The network is open. `protection().describe()` says all of this.

`MARGIN_SANDBOX` (the user's environment) picks one: `bubblewrap` (an error if it cannot run),
`launcher`, or `auto` (the default).
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

NOBODY = 65534
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""the program's PATH unless it is given one: the system's programs (the user's PATH names their folders)"""
STOP_GRACE_S = 10.0
"""how long the launcher gets to kill what the program started when told to stop, before it is
killed itself"""
SYSTEM_LINKS = ("/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin")
"""on merged-/usr systems links into /usr, made the same links in the sandbox; else bound read-only"""


class SandboxError(RuntimeError):
    """The protection asked for cannot run here (named in the message)."""


KEPT = {
    "environment": "no environment but the variables it is given",
    "processes": "every process it starts ends when it does",
    "environments": "no other process's environment (API keys)",
    "files": "none of your files: a read-only view of the system, a private folder and /tmp",
    "network": "no network",
}
"""what a protection may keep from the program, by name (Protection.kept), as a person reads it"""


@dataclass(frozen=True)
class Protection:
    name: str
    """bubblewrap or launcher"""
    kept: frozenset[str]
    """what the program is kept from: names of KEPT"""
    notes: tuple[str, ...] = ()
    """how, where it matters (whose user it runs as)"""
    why: str = ""
    """why not the stronger one, when it is the launcher"""

    @property
    def strong(self) -> bool:
        return self.name == "bubblewrap"

    def describe(self) -> str:
        """One paragraph for a person: which protection, what it keeps from the program, what not."""
        text = f"sandbox: {self.name}: " + "; ".join([KEPT[k] for k in KEPT if k in self.kept] + list(self.notes))
        lacking = [k for k in KEPT if k not in self.kept]
        if lacking:
            text += ". NOT kept from model-written code: " + "; ".join(_LACKING[k] for k in lacking)
        if self.why:
            text += f" ({self.why})"
        return text + "."


_LACKING = {"environment": "its environment", "processes": "processes that outlive it",
            "environments": "other processes' environments", "files": "your files", "network": "the network"}


@dataclass(frozen=True)
class Finished:
    returncode: int
    """as subprocess: negative when a signal ended it"""
    timed_out: bool


def protection(environ: Mapping[str, str] | None = None) -> Protection:
    """The protection in force for this process (its first answer, kept: probing runs bubblewrap once)."""
    wanted = (environ if environ is not None else os.environ).get("MARGIN_SANDBOX", "auto").strip().lower() or "auto"
    return _protection(wanted)


@functools.cache
def _protection(wanted: str) -> Protection:
    if wanted not in ("auto", "bubblewrap", "launcher"):
        raise SandboxError(f"MARGIN_SANDBOX is {wanted!r}: expected auto, bubblewrap or launcher")
    if wanted != "launcher":
        problem = _bubblewrap_problem()
        if problem is None:
            return Protection("bubblewrap", frozenset(KEPT), ("runs as nobody in namespaces of its own",))
        if wanted == "bubblewrap":
            raise SandboxError(f"MARGIN_SANDBOX is bubblewrap, but {problem}")
        why = f"{problem}; install Debian's bubblewrap for the strong sandbox"
    else:
        why = "MARGIN_SANDBOX=launcher"
    kept, notes = {"environment", "processes"}, []
    if _as_nobody():
        kept.add("environments")
        notes.append("runs as nobody (Margin runs as root): it can still read what any user may, and write "
                     "where any user may (such as /tmp)")
    elif os.geteuid() == 0:
        notes.append("runs as root: this Python is not one user nobody may run")
    else:
        notes.append("runs as you; Margin's own environment is kept from it (Margin is not dumpable)")
    return Protection("launcher", frozenset(kept), tuple(notes), why)


def _as_nobody() -> bool:
    """The launcher runs the program as nobody when Margin runs as root and nobody may run this
    Python (every folder above it searchable by others, its standard library readable)."""
    if os.geteuid() != 0:
        return False
    for path in (Path(_interpreter()), Path(os.path.realpath(sys.base_prefix)) / "lib"):
        for step in (path, *path.parents):
            try:
                mode = step.stat().st_mode
            except OSError:
                return False
            if not mode & 0o001:
                return False
    return True


def _bubblewrap_problem() -> str | None:
    """None when bubblewrap runs a program here as run() would; else what is wrong."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    probe = Path("/")
    try:
        done = subprocess.run(_bwrap_argv(bwrap, probe, {}, [_interpreter(), "-I", "-c", "pass"], (), chdir=False),
                              check=False, capture_output=True, text=True, timeout=60, env=_launch_env({}))
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap did not start ({error})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"bubblewrap cannot make a sandbox here ({last[:200]})"
    return None


def _interpreter() -> str:
    """This Python's own binary (not a virtual environment's link to it)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def interpreter_reads() -> tuple[Path, ...]:
    """The folders a program run by this Python needs to read: its installation's prefix (its
    standard library), when that is not under /usr already."""
    prefix = Path(os.path.realpath(sys.base_prefix))
    binary = Path(_interpreter())
    found = {prefix} if not _under(prefix, Path("/usr")) else set()
    if not _under(binary, Path("/usr")) and not _under(binary, prefix):
        found.add(binary.parent)
    return tuple(sorted(found))


def python_argv(*arguments: str) -> list[str]:
    """A command line running this Python isolated (`-I -B`: no user site, no PYTHON* variables,
    no bytecode written), as run() runs it."""
    return [_interpreter(), "-I", "-B", *arguments]


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _launch_env(env: Mapping[str, str]) -> dict[str, str]:
    return {"PATH": env.get("PATH") or SYSTEM_PATH, **{k: v for k, v in env.items() if k != "PATH"}}


def _bwrap_argv(bwrap: str, folder: Path, env: Mapping[str, str], argv: Sequence[str], reads: Sequence[Path],
                chdir: bool = True) -> list[str]:
    command = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_LINKS:
        if os.path.islink(name):
            command += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            command += ["--ro-bind", name, name]
    command += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for path in (*interpreter_reads(), *reads):
        command += ["--ro-bind", str(path), str(path)]
    command += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    if chdir:
        command += ["--bind", str(folder), str(folder), "--chdir", str(folder)]
    command += ["--clearenv", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    for name, value in _launch_env(env).items():
        command += ["--setenv", name, value]
    return [*command, "--", *argv]


_LAUNCHER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with Margin
if os.getppid() != int(sys.argv[1]):
    os._exit(125)
libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: what the program starts stays ours
uid, argv = int(sys.argv[2]), sys.argv[3:]
pid = os.fork()
if pid == 0:
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        libc.prctl(1, signal.SIGKILL)
        if uid >= 0:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
def ours():
    me, found = str(os.getpid()), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/" + entry + "/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me.encode() and fields[0] != b"Z":
                found.append(int(entry))
    return found
def end_all():
    while True:
        left = ours()
        for child in left:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                return
        if not left:
            return
def stop(number, frame):
    end_all()
    os._exit(128 + number)
signal.signal(signal.SIGTERM, stop)
status = None
while status is None:
    done, code = os.waitpid(-1, 0)
    if done == pid:
        status = code
end_all()
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.WEXITSTATUS(status))
"""
"""the launcher: argv 1 is Margin's pid (it stops at once if that is no longer its parent), 2 the
user id to run the program as (-1: Margin's), then the program's command line"""


async def run(argv: Sequence[str], folder: Path, *, time_limit_s: float, stdout: IO[bytes] | int,
              stderr: IO[bytes] | int, env: Mapping[str, str] | None = None, reads: Sequence[Path] = (),
              environ: Mapping[str, str] | None = None, give_folder: bool = True) -> Finished:
    """Run `argv` in `folder` (its working directory and the one place it may write) under the
    protection in force, with standard input closed, an environment of `env` (PATH alone by
    default) and `reads` (folders it may read besides the system), for at most `time_limit_s`.
    Whatever it started has ended when this returns. `give_folder` False: the folder is the
    person's (a workspace), never handed to another user — the launcher then runs the program
    as Margin's user."""
    chosen = await asyncio.to_thread(protection, environ)  # the first time, bubblewrap is tried
    env = _launch_env(env or {"PATH": SYSTEM_PATH})
    if chosen.strong:
        command = _bwrap_argv(shutil.which("bwrap") or "bwrap", folder, env, argv, reads)
    else:
        _not_dumpable()
        uid = NOBODY if _as_nobody() and give_folder else -1
        if uid >= 0:
            _give(folder, uid)
        command = [_interpreter(), "-I", "-S", "-B", "-c", _LAUNCHER, str(os.getpid()), str(uid), *argv]
    process = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.DEVNULL, stdout=stdout,
                                                   stderr=stderr, cwd=folder, env=env, start_new_session=True)
    try:
        await asyncio.wait_for(process.wait(), time_limit_s)
    except TimeoutError:
        await _stop(process, chosen.strong)
        return Finished(process.returncode if process.returncode is not None else -signal.SIGKILL, True)
    except BaseException:
        await asyncio.shield(_stop(process, chosen.strong))
        raise
    finally:
        _kill_group(process.pid)
    assert process.returncode is not None
    return Finished(process.returncode, False)


async def _stop(process: asyncio.subprocess.Process, strong: bool) -> None:
    """bubblewrap is killed (the kernel ends its namespace whole); the launcher is told to stop,
    so that it kills what escaped the process group, and killed if it has not within the grace."""
    if process.returncode is None and not strong:
        try:
            process.terminate()
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except (ProcessLookupError, TimeoutError):
            pass
    _kill_group(process.pid)
    if process.returncode is None:
        try:
            process.kill()
        except ProcessLookupError:
            pass
    await process.wait()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _give(folder: Path, uid: int) -> None:
    """The folder and what is in it, writable by the user the program runs as."""
    for path in (folder, *folder.rglob("*")):
        os.chown(path, uid, uid, follow_symlinks=False)


@functools.cache
def _not_dumpable() -> None:
    """PR_SET_DUMPABLE 0: this process's environment and memory are no longer readable by other
    processes of the same user (without privilege)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0)
    except (OSError, AttributeError):
        pass
