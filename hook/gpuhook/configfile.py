"""Locate and read the config TOML. Kept tiny: the shim's pass-through path imports only this.

Parsing TOML costs more than the rest of the pass-through path, so the parsed table is cached with
`marshal` (built in, free to import) in a root-only directory, keyed by the file's identity and times.
"""

from __future__ import annotations

import errno
import marshal
import os
import stat

from gpuhook.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_PATH = "/etc/gpuhook/config.toml"
ENV = "GPUHOOK_CONFIG"
CACHE_DIR = "/run/gpuhook/config-cache"
MAX_CONFIG = 1 << 20  # a config larger than this is not one


def config_path() -> tuple[str, bool]:
    """The config path and whether it was named explicitly (env GPUHOOK_CONFIG) rather than defaulted."""
    named = os.environ.get(ENV)
    return (named, True) if named else (DEFAULT_PATH, False)


def read_table(path: str, explicit: bool, cache_dir: str | None = CACHE_DIR) -> dict[str, Any]:
    """The TOML table at `path`; {} when the default file is absent. Reads (and may cache) a file."""
    return read_config(path, explicit, cache_dir)[0]


def read_config(path: str, explicit: bool, cache_dir: str | None = CACHE_DIR) -> tuple[dict[str, Any], bool]:
    """The TOML table at `path` and whether this very file was validated before (then it need not be again)."""
    try:
        st = os.stat(path)
    except FileNotFoundError as e:
        if not explicit:
            return {}, False
        raise ConfigError(f"config {path} (from {ENV}) does not exist: create it or unset {ENV}") from e
    except OSError as e:
        raise ConfigError(f"config {path} cannot be read: {e.strerror}") from e
    key = _key(path, st)
    cached = _cache_get(cache_dir, key)
    if cached is not None:
        return cached
    table = _parse(path)
    _cache_put(cache_dir, key, table, False)
    return table, False


def remember_runtime(path: str, runtime: str, nodes: tuple[str, ...] = (), cache_dir: str | None = CACHE_DIR) -> None:
    """Write the fast file the native front end reads: the config's identity, the resolved runtime, and the
    GPU device node prefixes whose presence in a spec sends it to the Python shim. Best effort, same trust
    rules as the cache."""
    _remember(path, ".fast", f"runtime {runtime}\nnodes {' '.join(nodes)}\n", cache_dir)


def remember_state(path: str, state_dir: str, cache_dir: str | None = CACHE_DIR) -> None:
    """Write the state file the hook's native front end reads (its poststop starts nothing where state_dir has
    no tuning ledger): the config's identity and its state_dir. Best effort, same trust rules as the cache."""
    _remember(path, ".state", f"state {state_dir}\n", cache_dir)


def _remember(path: str, suffix: str, lines: str, cache_dir: str | None) -> None:
    """The config's `suffix` file: its identity, then `lines`; written only when that changed."""
    if not cache_dir:
        return
    try:
        st = os.stat(path)
        key = f"key {st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"
    except FileNotFoundError:
        key = "key absent"
    except OSError:
        return
    text = f"{key}\n{lines}"
    target = _cache_file(cache_dir, path) + suffix
    try:
        if read_regular(target, os.O_NOFOLLOW, len(text) * 4 + 1) == text.encode():
            return
    except OSError:
        pass
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        if not _trusted(os.stat(cache_dir)):
            return
        from gpuhook.atomic import write_bytes  # written only when the config or what it says changed

        write_bytes(target, text.encode(), mode=0o600)
    except OSError:
        return


def remember_valid(path: str, table: dict[str, Any], cache_dir: str | None = CACHE_DIR) -> None:
    """Record that `table`, read from `path` as it is now, passed validation. Writes the cache."""
    try:
        st = os.stat(path)
    except OSError:
        return
    _cache_put(cache_dir, _key(path, st), table, True)


def prune_cache(cache_dir: str = CACHE_DIR) -> list[str]:
    """Drop cache entries (and fast files) of config files that are gone or changed since. Deletes files."""
    removed: list[str] = []
    try:
        names = os.listdir(cache_dir) if _trusted(os.stat(cache_dir)) else []
    except OSError:
        return removed
    for name in names:
        base = name.removesuffix(".fast").removesuffix(".state")
        if base.endswith(".tmp") or "%2F" not in base:
            continue
        config = base.replace("%2F", "/").replace("%25", "%")
        try:
            st = os.stat(config)
            current = _cache_get(cache_dir, _key(config, st)) is not None
        except OSError:
            current = False
        if not current:
            try:
                os.unlink(os.path.join(cache_dir, name))
                removed.append(os.path.join(cache_dir, name))
            except OSError:
                continue
    return removed


def _key(path: str, st: os.stat_result) -> tuple[object, ...]:
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _parse(path: str) -> dict[str, Any]:
    try:
        return parse_toml(read_regular(path, 0, MAX_CONFIG), f"config {path}")
    except OSError as e:
        raise ConfigError(f"config {path} cannot be read: {e.strerror}") from e
    except ValueError as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from e


def parse_toml(data: bytes, what: str) -> dict[str, Any]:
    """UTF-8 TOML bytes as a table, nested at most fastjson.MAX_DEPTH deep (deeper is a fastjson.TooDeep, never a
    RecursionError); ValueError (tomllib's, UnicodeDecodeError) when they are no TOML."""
    import tomllib

    from gpuhook.fastjson import MAX_DEPTH, TooDeep, check_depth

    try:
        table = tomllib.loads(data.decode("utf-8"))
    except RecursionError:
        raise TooDeep(f"{what} nests deeper than {MAX_DEPTH} levels") from None
    check_depth(table, MAX_DEPTH, what)
    return table


def read_regular(path: str, flags: int, limit: int) -> bytes:
    """A regular file's bytes, opened without blocking (a FIFO there is an error, not a wait) with `flags` added
    (O_NOFOLLOW: statefile.read_bounded), at most `limit` of them; OSError otherwise. Reads a file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        chunks, total = [], 0
        while chunk := os.read(fd, min(st.st_size, limit) + 1 - total if total <= st.st_size else 1 << 16):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _cache_file(cache_dir: str, path: str) -> str:
    return os.path.join(cache_dir, path.replace("%", "%25").replace("/", "%2F"))


def _trusted(st: os.stat_result) -> bool:
    """Only a cache nobody else could have written is believed: it decides which binary runs as root."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _cache_get(cache_dir: str | None, key: tuple[object, ...]) -> tuple[dict[str, Any], bool] | None:
    if not cache_dir:
        return None
    try:
        if not _trusted(os.stat(cache_dir)):
            return None
        fd = os.open(_cache_file(cache_dir, str(key[0])), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not _trusted(st) or not stat.S_ISREG(st.st_mode):  # root's regular file, or not believed
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            stored_key, table, valid = marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        os.close(fd)
    return (table, valid is True) if stored_key == key and isinstance(table, dict) else None


def _cache_put(cache_dir: str | None, key: tuple[object, ...], table: dict[str, Any], valid: bool) -> None:
    """Best effort: a cache that cannot be written only costs the next container a TOML parse."""
    if not cache_dir:
        return
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        if not _trusted(os.stat(cache_dir)):
            return
        data = marshal.dumps((key, table, valid))  # type: ignore[arg-type]  # TOML values marshal, or ValueError
        from gpuhook.atomic import write_bytes  # written only when the config changed

        write_bytes(_cache_file(cache_dir, str(key[0])), data, mode=0o600)
    except (OSError, ValueError):
        return
