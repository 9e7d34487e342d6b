"""Writing files so that a crash, a kill or a full disk never leaves half of one under its name.

Every file the training tools write goes through here: written to NAME.tmp, flushed and fsynced,
then renamed over NAME (a rename within a folder is atomic on POSIX file systems). A folder is
replaced the same way: built beside its place, then swapped in. An OSError keeps its errno and
names the file, so the tools can say "no space left on device: runs/x/state.pt".
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path


def fsync(path: str | os.PathLike) -> None:
    """Flush a file's (or a folder's entries') data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to path.tmp, fsync, rename to path. On failure the old file is untouched."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise named(exc, path) from exc
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def copy(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    return write_bytes(dst, Path(src).read_bytes())


def named(exc: OSError, path) -> OSError:
    """The same error, naming `path` when it named no file."""
    if exc.filename is None:
        return type(exc)(exc.errno, exc.strerror or str(exc), str(path))
    return exc


def describe(exc: BaseException) -> str:
    """One line for an OSError: "no space left on device: FILE" rather than "[Errno 28] ..."."""
    if isinstance(exc, OSError) and exc.errno is not None:
        what = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
                errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
                errno.EPERM: "permission denied"}.get(exc.errno, exc.strerror or str(exc))
        where = exc.filename if exc.filename is not None else ""
        return f"{what}: {where}" if where else what
    return str(exc)


def is_disk_full(exc: BaseException) -> bool:
    """A write that failed for lack of space. torch.save reports a short write only as
    "unexpected pos N vs M" (its zip writer), without an errno."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return "unexpected pos" in str(exc)


def staging(folder: Path) -> Path:
    """Where a new version of `folder` is built before it replaces the old one."""
    return folder.with_name(f".{folder.name}.new")


def replace_folder(new: Path, folder: Path) -> None:
    """Swap the finished `new` folder in for `folder` (which may be absent), then delete the old."""
    old = folder.with_name(f".{folder.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        os.replace(folder, old)
    os.replace(new, folder)
    fsync(folder.parent)
    shutil.rmtree(old, ignore_errors=True)


def check_writable_folder(folder: Path, what: str) -> None:
    """Refuse, before any work, a folder that cannot be created or written: a file in the way,
    a read-only disk, no permission. Leaves nothing behind but the (empty) folder."""
    if folder.exists() and not folder.is_dir():
        raise NotAFolderError(f"{what} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise NotAFolderError(f"cannot write {what} {folder}: {describe(named(exc, folder))}") from exc


class NotAFolderError(ValueError):
    """An output folder that cannot be used."""
