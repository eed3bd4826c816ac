"""Host paths resolved inside one root directory, never escaping it."""

from __future__ import annotations

import os
import stat

from gpuhook.errors import DiscoveryError

_MAX_LINKS = 40


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


class Root:
    """A directory tree seen as a host's `/`: absolute symlinks and `..` stay inside it."""

    __slots__ = ("_dirs", "base")

    def __init__(self, base: str) -> None:
        self.base = os.path.realpath(base)
        self._dirs: dict[str, str] = {}  # resolved directories: discovery resolves dozens of files in a few
        if not os.path.isdir(self.base):
            raise DiscoveryError(f"host root {base!r} does not exist or is not a directory")

    def __repr__(self) -> str:
        return f"Root({self.base!r})"

    def lexical(self, path: str) -> str:
        """Return the real path for `path` without following any symlink (`..` is clamped at the root)."""
        out: list[str] = []
        for part in _parts(path):
            if part == "..":
                if out:
                    out.pop()
            else:
                out.append(part)
        return self._join(out)

    def resolve(self, path: str, _links: int = 0) -> str:
        """Return the real path for `path`, following symlinks as if the root were `/`."""
        parts = _parts(path)
        if not parts or ".." in parts:
            return self._resolve(parts, path)
        return self._step(self._directory(parts[:-1], path, _links), parts[-1], path, _links)

    def _directory(self, parts: list[str], path: str, links: int) -> str:
        """The real path of the directory `parts`, each directory resolved once (from its parent's), however
        many of the host's files discovery reads in it."""
        if not parts:
            return self.base
        key = "/".join(parts)
        found = self._dirs.get(key)
        if found is None:
            found = self._dirs[key] = self._step(self._directory(parts[:-1], path, links), parts[-1], path, links)
        return found

    def _step(self, directory: str, name: str, path: str, links: int) -> str:
        """`name` in the resolved `directory`, its symlink followed (inside the root)."""
        candidate = f"{directory.rstrip('/')}/{name}"
        try:
            if not stat.S_ISLNK(os.lstat(candidate).st_mode):
                return candidate
        except OSError:
            return candidate  # missing: the name stays as written, as the kernel would report ENOENT on it
        if links >= _MAX_LINKS:
            raise DiscoveryError(f"too many levels of symbolic links resolving {path!r} in {self.base}")
        target = os.readlink(candidate)
        if target.startswith("/"):
            return self.resolve(target, links + 1)
        # `directory` holds no link: the target's leading `..` (sysfs's are all such) are its parents, lexically
        where, rest = _parts(self.to_host(directory)), _parts(target)
        while rest and rest[0] == "..":
            rest.pop(0)
            if where:
                where.pop()
        return self.resolve("/" + "/".join(where + rest), links + 1)

    def _resolve(self, parts: list[str], path: str) -> str:
        """Resolve component by component (the general case, and each directory once)."""
        todo = parts[::-1]  # a stack: the next part last (no deque: see gpuhook.startup)
        done: list[str] = []
        links = 0
        while todo:
            part = todo.pop()
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = self._join([*done, part])
            try:
                st = os.lstat(candidate)
            except OSError:
                done.append(part)
                continue
            if not stat.S_ISLNK(st.st_mode):
                done.append(part)
                continue
            links += 1
            if links > _MAX_LINKS:
                raise DiscoveryError(f"too many levels of symbolic links resolving {path!r} in {self.base}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            todo.extend(reversed(_parts(target)))
        return self._join(done)

    def to_host(self, real: str) -> str:
        """Return the host-absolute name (as seen with this root as `/`) of a real path under the root."""
        prefix = self.base.rstrip("/") + "/"
        if real.startswith(prefix) and "//" not in real and "/." not in real and not real.endswith("/"):
            return real[len(prefix) - 1:]  # already normal, as resolve() makes them: no relpath (GPU path, per file)
        rel = os.path.relpath(real, self.base)
        if rel == ".":
            return "/"
        if rel.startswith(".."):
            raise DiscoveryError(f"{real!r} is outside the host root {self.base}")
        return "/" + rel

    def exists(self, path: str) -> bool:
        """Whether `path` exists (symlinks followed inside the root)."""
        return os.path.exists(self.resolve(path))

    def read_text(self, path: str) -> str:
        """Read a small text file (symlinks followed inside the root)."""
        with open(self.resolve(path), encoding="utf-8", errors="replace") as f:
            return f.read()

    def listdir(self, path: str) -> list[str]:
        """Sorted entries of a directory, or [] when it does not exist."""
        try:
            return sorted(os.listdir(self.resolve(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _join(self, parts: list[str]) -> str:
        return self.base if not parts else self.base.rstrip("/") + "/" + "/".join(parts)
