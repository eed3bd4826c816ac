"""The one place gpuhook runs other programs: argv lists, no shell, a fixed minimal env, a timeout."""

from __future__ import annotations

from gpuhook.errors import ProcessError

SAFE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def run(argv: list[str], timeout: float = 60.0, cwd: str | None = None,
        extra_env: dict[str, str] | None = None) -> str:
    """Run `argv` with SAFE_ENV (plus `extra_env`), no stdin; return stdout. Raises ProcessError on failure."""
    import subprocess  # not at module level: spec.py needs only SAFE_ENV, on the shim's GPU path

    try:
        done = subprocess.run(argv, env={**SAFE_ENV, **(extra_env or {})}, cwd=cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ProcessError(f"{argv[0]} could not run: {e}") from e
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ProcessError(f"{argv[0]} exited {done.returncode}: {last}")
    return done.stdout
