"""The knowledge-base folder: how a document's file is handled.

It applies the path rule (`path_rule`: which categories and file names are allowed) to the folder, and owns
display paths (`knowledge_base/api/x.md`) and their disk paths, the scan of the folder, reads of regular files
only (a FIFO or device named `x.md` would block or mislead a reader) and the atomic write. L0, the document
service, reconcile, the watcher, upload and the pages all go through it.
"""

from __future__ import annotations

import codecs
import errno
import logging
import os
import re
import stat
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from kb_core.documents.frontmatter import MAX_BLOCK_BYTES
from kb_core.documents.path_rule import MAX_PATH_CHARS, category_problem, validate_category, validate_file_name
from kb_core.errors import FileTooLarge, UploadRejected
from kb_core.settings import resolve_path

log = logging.getLogger(__name__)

__all__ = ["AliasReason", "KnowledgeFolder", "checked_sha256", "decode_head", "decode_markdown", "file_version",
           "read_regular", "write_atomic"]

_VERSION = struct.Struct("<QqqQ")


def file_version(info: os.stat_result) -> bytes:
    """What tells a file's versions apart without reading it, in 32 bytes: its size, modification and change
    time, and inode (a file renamed onto another path keeps its own, so it never passes for the one it
    replaced)."""
    return _VERSION.pack(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def decode_markdown(data: bytes, *, max_bytes: int, file_name: str = "the file") -> str:
    """UTF-8 text (an optional BOM dropped), or `UploadRejected` for oversized, binary or non-UTF-8 bytes."""
    if not isinstance(data, (bytes, bytearray)):
        raise UploadRejected(f"{file_name}: expected bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise UploadRejected(f"{file_name} is {len(data):,} bytes; the limit is {max_bytes:,} (KB_MAX_UPLOAD_BYTES)")
    if b"\x00" in data:
        raise UploadRejected(f"{file_name} looks binary (it contains NUL bytes), not Markdown text")
    try:
        text = bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UploadRejected(f"{file_name} is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    if not text.strip():
        raise UploadRejected(f"{file_name} is empty")
    return text


# -- reads and writes ------------------------------------------------------------------------------------
HEAD_BYTES = MAX_BLOCK_BYTES + 8 * 1024  # the frontmatter limit plus room for its delimiters


def read_regular(path: Path | str, limit: int | None = None, *, max_bytes: int | None = None,
                 follow: bool = False) -> bytes:
    """The bytes of a regular file (at most `limit`). Opened without blocking and, unless `follow`, without
    following a link as its last component, then checked before reading: a FIFO, socket, device, folder or link
    at a document's path raises `OSError` at once instead of hanging the reader. A file larger than `max_bytes`
    (the largest allowed document) raises `FileTooLarge` before anything is read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise OSError(errno.ELOOP, f"{path} is a link, not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file ({_kind(info.st_mode)})")
        if max_bytes is not None and info.st_size > max_bytes:
            raise FileTooLarge(path, info.st_size, max_bytes)
        cap = -1 if limit is None or limit < 0 else limit
        if max_bytes is not None:
            cap = max_bytes + 1 if cap < 0 else min(cap, max_bytes + 1)  # it may grow while it is read
        data = _read_to(fd, cap, info.st_size)
        if max_bytes is not None and len(data) > max_bytes:
            raise FileTooLarge(path, len(data), max_bytes)
        return data
    finally:
        if fd >= 0:
            os.close(fd)


def _read_to(fd: int, cap: int, size: int) -> bytes:
    """What `open(fd, "rb").read(cap)` returns (everything up to end of file for a negative `cap`), read with
    `os.read` (a scan reads 100,000 files: a buffered reader for each cost more than the read)."""
    first = os.read(fd, (size + 1 if size >= 0 else 65536) if cap < 0 else cap)
    if not first or (0 <= cap <= len(first)):
        return first
    parts = [first]
    got = len(first)
    while cap < 0 or got < cap:
        more = os.read(fd, 65536 if cap < 0 else cap - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return kind
    return "not a file"


def checked_sha256(value: object, *, what: str = "if_match") -> str:
    """A sha256 as 64 lower-case hex digits (upper case is the same hash), or `UploadRejected`: a wrong type or
    shape is the caller's mistake, said plainly."""
    if not isinstance(value, str):
        raise UploadRejected(f"{what} must be a document's sha256 as a string (64 hex digits, as "
                             f"DocumentRecord.content_sha256), not {type(value).__name__}; nothing was written")
    digest = value.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise UploadRejected(f"{what} must be a document's sha256 (64 hex digits, as DocumentRecord.content_sha256), "
                             f"not {value[:80]!r}; nothing was written")
    return digest


class AliasReason(str):
    """Why the scan skips a path that is another name of a file or folder inside the base (a link, a hard
    link): the file is indexed under its own path only. Reconcile drops a row kept under such a name, without
    touching the disk."""

    __slots__ = ()


def decode_head(data: bytes) -> tuple[str, bool]:
    """The start of a file as text, and whether that is the whole file."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    complete = len(data) < HEAD_BYTES
    return decoder.decode(data[:HEAD_BYTES], final=complete), complete


def process_umask() -> int:
    """This process's umask, read without changing it where the system reports it (/proc on Linux): `os.umask`
    sets it process-wide while it reads it, and a file another thread creates meanwhile would get the wrong
    mode. Elsewhere it is read that way once and remembered."""
    global _umask_read
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    if _umask_read is None:
        _umask_read = os.umask(0o077)
        os.umask(_umask_read)
    return _umask_read


_umask_read: int | None = None


def write_atomic(target: Path, data: bytes) -> None:
    """Temp file in the same directory + fsync + rename: readers see the old or the new file, never half.

    The file gets the mode a plain `open(target, "w")` would give it: an existing file's own mode, else 0666
    less the umask (mkstemp makes 0600, which a team's git checkout or a second service account could not
    read)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = 0o666 & ~process_umask()
    # the writer's pid is in the name: a temp file whose writer died is removed by reconcile
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:50]}.{os.getpid()}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_TEMP_NAME = re.compile(r"^\..*\.(\d+)\.[^.]+\.tmp$")
# A relative POSIX path that `PurePosixPath` keeps as written: not absolute, no empty or `.` part (`a//b`,
# `./a`, `a/`), nothing but "/" between parts (a display path is built for each of 100,000 files at a scan).
_CLEAN_RELATIVE = re.compile(r"(?!\.?(?:/|\Z))[^/]+(?:/(?!\.?(?:/|\Z))[^/]+)*")


DEFAULT_MAX_BYTES = 5 * 1024 * 1024  # KB_MAX_UPLOAD_BYTES' default


class KnowledgeFolder:
    """The folder of documents. `base_path` is kept as configured for display paths (`knowledge_base/api/x.md`)
    and resolved against `app_root` (default: the current directory) for disk access. `max_bytes` is the largest
    allowed document (`KB_MAX_UPLOAD_BYTES`): a larger file is no document, and no read goes past it. It is the
    one place the limit is kept: the upload, its preview and the frontmatter edits read it here, so they cannot
    disagree about it.

    One file has one path: a link inside the base (to a file or a folder), or a second name of a file (a hard
    link), is skipped by the scan with one warning and refused for writes; the file is indexed under its own
    path only."""

    def __init__(self, base_path: str | os.PathLike[str], *, app_root: str | os.PathLike[str] | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES):
        root = Path(app_root) if app_root is not None else Path.cwd()
        self._display_base = PurePosixPath(Path(base_path).as_posix())
        self._app_root = root
        self._base = resolve_path(base_path, root)
        self._base_text = str(self._base) + "/" if str(self._base) != "/" else "/"  # (`_base / relative` as text)
        self._max_bytes = max_bytes
        self._warned: set[tuple[str, str]] = set()
        # `write_atomic`'s temp files the last `scan()` walked past (so the opening's cleanup needs no walk of
        # its own: a second walk of a 100,000-page tree cost 3.3 s); None before any scan
        self.temp_files_seen: list[tuple[Path, int]] | None = None
        self.created_missing = False  # the base did not exist: a scan made it (empty)

    def empty_warning(self, documents: int) -> str | None:
        """What to tell someone whose knowledge base has no documents (`documents`: Markdown files a scan found):
        most often a process started in another directory, which opened an empty knowledge base there and
        answers "not found" to everything. None when there are documents."""
        if documents:
            return None
        state = "did not exist (created empty)" if self.created_missing else "holds no Markdown documents"
        return (f"the knowledge base folder {self._base} {state}; the application root is {self._app_root}: run "
                "from the folder that holds knowledge_base/, or set KB_APP_ROOT (or KB_BASE_PATH)")

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def app_root(self) -> Path:
        """The application root relative base paths are resolved against."""
        return self._app_root

    # -- paths ---------------------------------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        return self._base

    def display_path(self, relative: str | os.PathLike[str]) -> str:
        """`knowledge_base/api/x.md` for `api/x.md`: the base as configured joined with the relative path."""
        if type(relative) is str and _CLEAN_RELATIVE.fullmatch(relative) is not None:
            return self.display_prefix() + relative  # what the join gives a path it leaves as it is (every scan's)
        return str(self._display_base / PurePosixPath(Path(relative).as_posix()))

    def display_prefix(self) -> str:
        """What every display path starts with: `knowledge_base/`, or nothing for a base configured as `.`
        (whose display paths are `api/x.md`)."""
        base = str(self._display_base)
        return "" if base == "." else base + "/"

    def resolve(self, file_path: str | os.PathLike[str]) -> Path | None:
        """The real path of a display path (or an absolute one), or `None` when it lies outside the base."""
        if not isinstance(file_path, (str, os.PathLike)):
            return None
        candidate = resolve_path(file_path, self._app_root)
        try:
            real = candidate.resolve()
            base = self._base.resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        return real if real.is_relative_to(base) and real != base else None

    def lexical_path(self, file_path: str) -> Path | None:
        """The on-disk path of a display path *without* following links (what to unlink), or `None` when it is
        not under the base or its folder is not where it says (a linked folder on the way: the file there has a
        path of its own, and unlinking through the alias would remove that file)."""
        prefix = self.display_prefix()
        if not isinstance(file_path, str) or not file_path.startswith(prefix):
            return None
        relative = PurePosixPath(file_path[len(prefix):])
        if ".." in relative.parts or relative.is_absolute() or not relative.parts:
            return None
        path = self._base / relative
        try:
            canonical = path.parent.resolve() == self._base.resolve().joinpath(*relative.parent.parts)
        except (OSError, RuntimeError, ValueError):
            return None
        return path if canonical else None

    def alias_target(self, file_path: str) -> str | None:
        """The display path of what `file_path` names when it is another name for it inside the base (a link to
        a file, or a path through a linked folder), or `None` (its own path, missing, or leading outside)."""
        path = self.lexical_path(file_path)
        if path is not None and not path.is_symlink():
            return None  # its own path
        relative = self.relative_path(file_path)
        if relative is None:
            return None
        canonical = self.display_path(relative)
        return canonical if canonical != file_path else None

    def relative_path(self, file_path: str | os.PathLike[str]) -> str | None:
        real = self.resolve(file_path)
        return None if real is None else real.relative_to(self._base.resolve()).as_posix()

    def relative_of(self, path: str | os.PathLike[str]) -> str | None:
        """`api/x.md` for an absolute path under the base or a display path; "" for the base; else `None`.
        Links are not followed: a deleted file has nothing to resolve."""
        candidate = Path(path)
        if not candidate.is_absolute():
            text, prefix = candidate.as_posix(), self.display_prefix()
            if text != self.display_path("") and not text.startswith(prefix):
                return None
            candidate = self._base / text[len(prefix):]
        try:
            relative = candidate.relative_to(self._base).as_posix()
        except ValueError:
            return None
        return "" if relative == "." else relative

    def document_path(self, path: object) -> str | None:
        """The path a document is stored under (`knowledge_base/api/x.md`) for that path or one relative to
        the knowledge base (`api/x.md`, what a `?doc=` link carries); `None` for what cannot be a path under the
        knowledge base. Reads nothing."""
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            return None
        text = path.strip()
        relative = self.relative_of(text)
        if relative is None and not text.startswith("/"):
            relative = text
        if not relative or any(part in ("", ".", "..") for part in relative.split("/")):
            return None
        return self.display_path(relative)

    def is_inside(self, path: Path) -> bool:
        """True when `path` (a file or folder, links resolved) lies inside the base."""
        try:
            return path.resolve().is_relative_to(self._base.resolve())
        except (OSError, RuntimeError):
            return False

    @staticmethod
    def category_of(relative: str) -> str | None:
        """The folder path under the base (`api` for `api/x.md`, `apisix/docs/en` for `apisix/docs/en/x.md`)."""
        folder, _, _name = relative.rpartition("/")
        return folder or None

    def place_problem(self, relative: str) -> str | None:
        """Why the path rule refuses a document at `relative` (a POSIX path under the base), or `None`."""
        category, _, name = relative.rpartition("/")
        if not category:
            return "not in a category folder (documents live at <category>/<file>.md)"
        problem = category_problem(category)
        if problem is None:
            try:
                validate_file_name(name)
            except UploadRejected as exc:
                problem = str(exc)
        if problem is None and len(self.display_prefix()) + len(relative) > MAX_PATH_CHARS:  # display_path's
            problem = f"the path is longer than {MAX_PATH_CHARS} characters"
        return problem

    def target(self, category: str, file_name: str) -> tuple[str, Path]:
        """(display path, disk path) where an upload of `file_name` into `category` goes, after the path rule;
        `UploadRejected` when the rule or a link in the way refuses it."""
        name = validate_file_name(file_name)
        category = validate_category(category)
        file_path = self.display_path(f"{category}/{name}")
        if len(file_path) > MAX_PATH_CHARS:
            raise UploadRejected(f"{file_path} is longer than {MAX_PATH_CHARS} characters; choose a shorter "
                                 "category or file name")
        target = self._base / category / name
        for folder in (target.parent, *target.parent.parents):
            if folder == self._base:
                break
            if (folder.exists() or folder.is_symlink()) and not self.is_inside(folder):
                raise UploadRejected(f"the category folder {folder.relative_to(self._base).as_posix()}/ is a link "
                                     "leading outside the knowledge base; nothing is written there")
            if folder.is_symlink():
                raise UploadRejected(f"the category folder {folder.relative_to(self._base).as_posix()}/ is a link "
                                     "(an alias of another folder); upload into the folder it points to")
            if folder.exists() and not folder.is_dir():
                raise UploadRejected(f"{folder.relative_to(self._base).as_posix()} is a file, not a category "
                                     "folder; nothing is written there")
        if target.is_symlink():
            raise UploadRejected(f"{file_path} is a link; replace the file it points to instead")
        try:  # checked before any lock is taken: a FIFO would block the read of the version it replaces
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as exc:
            raise UploadRejected(f"{file_path} cannot be checked ({exc}); nothing is written there") from exc
        if mode is not None and not stat.S_ISREG(mode):
            raise UploadRejected(f"{file_path} exists and is not a regular file ({_kind(mode)}); remove it "
                                 "first, nothing is written there")
        twin = self._case_twin(target)
        if twin is not None:
            raise UploadRejected(f"{file_path} differs only in case from {self.display_path(twin)}: one file on "
                                 "case-insensitive systems; upload under that name to replace it")
        return file_path, target

    def _case_twin(self, target: Path) -> str | None:
        """The relative path of an existing folder or file on the way to `target` whose name differs from the
        target's only in case (where the target's own name does not exist yet), or `None`."""
        folder = self._base
        for part in target.relative_to(self._base).parts:
            try:
                names = os.listdir(folder)
            except OSError:
                return None
            twin = None if part in names else \
                next((n for n in names if n.casefold() == part.casefold()), None)  # the scan reports twins
            if twin is not None:
                return (folder / twin).relative_to(self._base).as_posix()
            folder = folder / part
            if not folder.exists():
                return None
        return None

    def document_place(self, file_path: str) -> tuple[str, str]:
        """(category, file name) of a display path under the rule, or `UploadRejected` saying why not (also for
        another name of a file, a link: the file is a document under its own path only)."""
        relative = self.relative_path(file_path) or ""
        problem = self.place_problem(relative)
        if problem is not None:
            raise UploadRejected(f"{file_path}: {problem}")
        alias = self.alias_target(file_path)
        if alias is not None:
            raise UploadRejected(f"{file_path} is a link to {alias}: a file is indexed under its own path only")
        category, _, name = relative.rpartition("/")
        return category, name

    def is_other_name(self, file_path: str) -> bool:
        """Whether `file_path` names, on disk, a file that also has another name inside the base: a link to one,
        a path through a linked folder, or a hard link (which of the names is the document is the scan's call)."""
        path = self.lexical_path(file_path)
        if path is None:
            return self.alias_target(file_path) is not None
        try:
            info = os.lstat(path)
        except OSError:
            return False
        return stat.S_ISLNK(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink > 1)

    def exists(self, file_path: str) -> bool:
        """Whether a document's file is on disk (a regular file, or a link to one inside the base)."""
        path = self.lexical_path(file_path)
        return path is not None and path.is_file()

    def is_own_path(self, path: Path) -> bool:
        """Whether `path` (under the base) is a regular file at its own path: no link as it or on the way."""
        try:
            relative = path.relative_to(self._base)
            return stat.S_ISREG(os.lstat(path).st_mode) and \
                path.parent.resolve() == self._base.resolve().joinpath(*relative.parent.parts)
        except (OSError, RuntimeError, ValueError):
            return False

    def categories(self) -> set[str]:
        """The folders directly under the base (not links: an alias of a folder is no category of its own)."""
        if not self._base.is_dir():
            return set()
        return {p.name for p in self._base.iterdir()
                if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")}

    # -- the scan ------------------------------------------------------------------------------------
    def markdown_files(self) -> list[str]:
        """Relative POSIX paths of every document under the base, sorted (the index order): `.md` files that
        are regular files at a place the path rule allows. A link (file or folder) is followed only when it
        stays inside the base. What is skipped is logged once per path; `refused_files()` lists it."""
        return self.scan()[0]

    def refused_files(self) -> list[tuple[str, str]]:
        """(relative path, why) of the `.md` files under the base that are not documents."""
        return self.scan()[1]

    def scan(self, stats: dict[str, bytes] | None = None, *,
             accepted: Callable[[str], bool] | None = None) -> tuple[list[str], list[tuple[str, str]]]:
        """(documents, refused) as `markdown_files()` and `refused_files()` say; `stats`, when given, receives
        each document's `file_version` from the scan's own stat (the L0 snapshot compares them: no second stat
        per file). `accepted(relative)` says the path rule took this path before (the L0 snapshot's paths): its
        name is not checked again, which was most of an open's scan at 100,000 pages; the stat still is."""
        found: list[str] = []
        refused: list[tuple[str, str]] = []
        if not self._base.exists():
            self._base.mkdir(parents=True, exist_ok=True)
            self.created_missing = True
            log.info("created missing knowledge base directory %s", self._base)
        base_real = self._base.resolve()
        prefix = len(str(self._base)) + 1
        stack = [str(self._base)]
        linked: dict[tuple[int, int], list[str]] = {}  # (device, inode) -> names of files with hard links
        temps: list[tuple[Path, int]] = []

        def refuse(path: str, why: str) -> None:
            refused.append((path[prefix:].replace(os.sep, "/"), why))
            self._warn_once(Path(path), why)

        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError as exc:
                log.warning("cannot list %s: %s", folder, exc)
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    if entry.name.endswith(".tmp") and (temp := _TEMP_NAME.match(entry.name)) is not None:
                        temps.append((Path(entry.path), int(temp.group(1))))
                    continue
                try:
                    if entry.is_symlink():
                        # never followed: a link inside the base is another name of a file or folder that is
                        # listed under its own path, and one leading out is not the knowledge base's
                        real = Path(entry.path).resolve()
                        markdown = entry.name.lower().endswith(".md")
                        if not real.is_relative_to(base_real):
                            if markdown or real.is_dir():
                                refuse(entry.path, "a link leading outside the knowledge base")
                        elif real.is_dir():
                            refuse(entry.path, AliasReason(
                                f"a link to {self.display_path(real.relative_to(base_real))}/: an alias; its "
                                "documents are indexed under their own folder only"))
                        elif markdown:
                            refuse(entry.path, AliasReason(
                                f"a link to {self.display_path(real.relative_to(base_real))}: an alias; the file "
                                "is indexed under its own path only"))
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.name.lower().endswith(".md"):
                        relative = entry.path[prefix:].replace(os.sep, "/")
                        info = entry.stat(follow_symlinks=False)
                        problem = None if stat.S_ISREG(info.st_mode) else f"not a regular file ({_kind(info.st_mode)})"
                        if problem is None and (accepted is None or not accepted(relative)):
                            problem = self.place_problem(relative)
                        if problem is None and info.st_size > self._max_bytes:
                            problem = (f"{info.st_size:,} bytes, larger than the largest allowed document "
                                       f"({self._max_bytes:,} bytes, KB_MAX_UPLOAD_BYTES)")
                        if problem is None:
                            found.append(relative)
                            if stats is not None:
                                stats[relative] = file_version(info)
                            if info.st_nlink > 1:
                                linked.setdefault((info.st_dev, info.st_ino), []).append(relative)
                        else:
                            refuse(entry.path, problem)
                except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop
                    refuse(entry.path, f"unreadable ({exc})")
        self.temp_files_seen = temps
        found = self._without_hard_links(found, refused, linked)
        return self._without_case_twins(sorted(found), refused)

    def _without_hard_links(self, found: list[str], refused: list[tuple[str, str]],
                            linked: dict[tuple[int, int], list[str]]) -> list[str]:
        """Names of one file (hard links): the first in sorted order is the document, the others are refused
        as its aliases. (Replacing either name writes a new file, which ends the link.)"""
        second: set[str] = set()
        for names in linked.values():
            first, *others = sorted(names)
            for relative in others:
                why = AliasReason(f"a hard link to {self.display_path(first)} (one file, two names): the file is "
                                  "indexed under that name only")
                second.add(relative)
                refused.append((relative, why))
                self._warn_once(self._base / relative, why)
        return [relative for relative in found if relative not in second] if second else found

    def _without_case_twins(self, found: list[str], refused: list[tuple[str, str]]
                            ) -> tuple[list[str], list[tuple[str, str]]]:
        """Paths that differ only in case are one file on a case-insensitive checkout (macOS, Windows): the
        first (in sorted order) is the document, the others are refused and say which one they shadow."""
        first: dict[str, str] = {}
        kept: list[str] = []
        for relative in found:
            twin = first.setdefault(relative.casefold(), relative)
            if twin == relative:
                kept.append(relative)
            else:
                why = f"differs only in case from {self.display_path(twin)} (one file on case-insensitive systems)"
                refused.append((relative, why))
                self._warn_once(self._base / relative, why)
        return kept, sorted(refused)

    def _warn_once(self, path: Path, why: str) -> None:
        key = (str(path), why)
        if key not in self._warned:
            self._warned.add(key)
            log.warning("skipping %s: %s", path, why)

    def modified_since(self, relative: str) -> float | None:
        try:
            return (self._base / relative).stat().st_mtime
        except OSError:
            return None

    # -- reading -------------------------------------------------------------------------------------
    def read_head(self, relative: str) -> tuple[str, bool]:
        """The start of a file, enough for any acceptable frontmatter block, and whether that is the whole
        file: the scan reads the rest only for documents that have frontmatter."""
        return decode_head(read_regular(self._base_text + relative if _CLEAN_RELATIVE.fullmatch(relative) else
                                        self._base / relative, HEAD_BYTES, max_bytes=self._max_bytes))

    def read_bytes(self, file_path: str) -> bytes:
        """The whole file of a display path (links inside the base followed); `OSError` when it is not a
        regular file inside the base."""
        real = self.resolve(file_path)
        if real is None:
            raise FileNotFoundError(f"{file_path} is not inside the knowledge base")
        return read_regular(real, max_bytes=self._max_bytes)

    def current_bytes(self, target: Path) -> bytes | None:
        """What is at a disk path now (`None`: nothing); the version a write would overwrite."""
        try:
            return read_regular(target, max_bytes=self._max_bytes)
        except FileNotFoundError:
            return None

    def read_text(self, file_path: str, max_chars: int = 2000, *, clean: bool = False) -> str | None:
        """The text, cut to `max_chars` characters plus "..." when longer. `clean=True` (answers) drops
        boilerplate first (`cleaning.clean_document`). `None` when the file is missing or not a regular file
        (logged as ERROR) or the path resolves outside the base: `../../etc/passwd` must not be read."""
        from kb_core.documents.cleaning import clean_document

        real = self.resolve(file_path)
        if real is None:
            log.warning("refusing to read %r: not inside the knowledge base %s", file_path, self._display_base)
            return None
        # An answer needs the first 2,000 characters, not a 5 MB file: read and clean a head first. Cleaning
        # runs front to back, so a cleaned head that is comfortably longer than the cut is exact.
        limit = max(2 * HEAD_BYTES, 8 * max_chars) if max_chars >= 0 else -1
        try:
            data = read_regular(real, limit, max_bytes=self._max_bytes)
            complete = limit < 0 or len(data) < limit
            text = data.decode("utf-8-sig", errors="replace")
            if clean:
                text = clean_document(text)
                if not complete and len(text) <= max_chars + 256:  # boilerplate ate the head: clean it all
                    text = clean_document(read_regular(real, max_bytes=self._max_bytes)
                                          .decode("utf-8-sig", errors="replace"))
        except FileNotFoundError:
            log.error("document %s does not exist", file_path)
            return None
        except OSError as exc:
            log.error("cannot read document %s: %s", file_path, exc)
            return None
        if max_chars >= 0 and len(text) > max_chars:
            return text[:max_chars] + "..."
        return text

    # -- writing -------------------------------------------------------------------------------------
    def write(self, target: Path, data: bytes) -> None:
        write_atomic(target, data)

    def undo_write(self, path: Path, ours: bytes, old: bytes | None) -> None:
        """Put back what was there, but only over our own bytes: a file someone else wrote since is theirs."""
        try:
            current = self.current_bytes(path)
        except OSError:
            current = None
        if current is not None and current != ours:
            log.warning("not undoing %s: its content is no longer what this write put there", path)
            return
        if old is not None:
            write_atomic(path, old)
        else:
            path.unlink(missing_ok=True)

    def temp_files(self) -> list[tuple[Path, int]]:
        """Temp files of `write_atomic` under the base, with the pid of the process that wrote each."""
        if not self._base.is_dir():
            return []
        found = []
        for tmp in self._base.rglob(".*.tmp"):
            match = _TEMP_NAME.match(tmp.name)
            if match is not None:
                found.append((tmp, int(match.group(1))))
        return found
