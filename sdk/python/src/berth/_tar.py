"""Directories as tar streams, both ways, a piece at a time (never a whole archive in memory):
DirTar reads a local directory as a tar stream (the body of PUT …?archive=tar); DirExtract
writes the tar stream of GET …?archive=tar into a local directory, refusing what would land
outside it, as the agent refuses it on its side (common/tar/tar_extract.h: no absolute names,
no '..', nothing through a symlink, hard links only inside; set-id bits cleared, FIFOs left
out, device nodes refused). tarfile encodes and decodes the 512-byte headers; the streaming
around them is here, because tarfile's own stream mode reads each member whole through one
file object and cannot be fed from an async client."""

from __future__ import annotations

import os
import stat
import tarfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ._core import CHUNK
from .errors import InternalError, InvalidArgumentError

BLOCK = 512
#: A pax or GNU long-name header's data is read whole: bounded.
MAX_META = 1 << 20
ENCODING, ERRORS = "utf-8", "surrogateescape"


class DirTar:
    """A file object whose read() gives the tar stream of `root`'s contents (names relative
    to it), made as it is read: one file's chunk at a time. Symlinks are stored as symlinks;
    sockets, FIFOs and devices are left out (`skipped`)."""

    def __init__(self, root: str) -> None:
        if not os.path.isdir(root):
            raise InvalidArgumentError(f"{root} is not a local directory", code="invalid_argument")
        self.root = root
        self.entries = 0
        self.bytes = 0
        self.skipped = 0
        self._pieces = self._archive()
        self._buf = bytearray()

    def read(self, n: int = -1) -> bytes:
        want = CHUNK if n is None or n < 0 else n
        while len(self._buf) < want:
            piece = next(self._pieces, None)
            if piece is None:
                break
            self._buf += piece
        out = bytes(self._buf[:want])
        del self._buf[:want]
        return out

    def _walk(self) -> Iterator[Tuple[str, str]]:
        stack = [""]
        while stack:
            rel = stack.pop()
            path = os.path.join(self.root, rel) if rel else self.root
            with os.scandir(path) as it:
                names = sorted(e.name for e in it)
            subdirs = []
            for name in names:
                child = f"{rel}/{name}" if rel else name
                yield child, os.path.join(self.root, child)
                if stat.S_ISDIR(os.lstat(os.path.join(self.root, child)).st_mode):
                    subdirs.append(child)
            stack.extend(reversed(subdirs))

    def _archive(self) -> Iterator[bytes]:
        for rel, path in self._walk():
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # gone meanwhile
            ti = tarfile.TarInfo(rel)
            ti.mode = stat.S_IMODE(st.st_mode)
            ti.mtime = int(st.st_mtime)
            if stat.S_ISDIR(st.st_mode):
                ti.type = tarfile.DIRTYPE
                self.entries += 1
                yield ti.tobuf(tarfile.PAX_FORMAT, ENCODING, ERRORS)
            elif stat.S_ISLNK(st.st_mode):
                ti.type = tarfile.SYMTYPE
                ti.linkname = os.readlink(path)
                self.entries += 1
                yield ti.tobuf(tarfile.PAX_FORMAT, ENCODING, ERRORS)
            elif stat.S_ISREG(st.st_mode):
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except OSError:
                    self.skipped += 1
                    continue
                with os.fdopen(fd, "rb") as f:
                    # The size at open is the size in the archive: a file that grows meanwhile
                    # is cut there, one that shrinks is padded with zeros.
                    ti.size = os.fstat(f.fileno()).st_size
                    self.entries += 1
                    yield ti.tobuf(tarfile.PAX_FORMAT, ENCODING, ERRORS)
                    left = ti.size
                    while left > 0:
                        data = f.read(min(CHUNK, left)) or bytes(min(CHUNK, left))
                        left -= len(data)
                        self.bytes += len(data)
                        yield data
                    if ti.size % BLOCK:
                        yield bytes(BLOCK - ti.size % BLOCK)
            else:
                self.skipped += 1
        yield bytes(2 * BLOCK)


def _pax_records(data: bytes) -> Dict[str, str]:
    """"%d key=value\\n" records (POSIX pax extended header)."""
    out: Dict[str, str] = {}
    pos = 0
    while pos < len(data):
        sp = data.find(b" ", pos)
        if sp < 0 or not data[pos:sp].isdigit():
            break
        length = int(data[pos:sp])
        if length <= 0 or pos + length > len(data):
            raise InternalError("a corrupt pax header in the workspace's archive", code="internal")
        record = data[sp + 1:pos + length - 1]
        key, _, value = record.partition(b"=")
        out[key.decode(ENCODING, ERRORS)] = value.decode(ENCODING, ERRORS)
        pos += length
    return out


def safe_parts(name: str) -> Optional[List[str]]:
    """An entry name as relative components; None for the archive's "." itself. Refuses
    absolute names and '..' components."""
    if name.startswith("/"):
        raise InvalidArgumentError(f"the archive's entry {name!r} is an absolute path: refused",
                                   code="invalid_argument")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidArgumentError(f"the archive's entry {name!r} goes up with '..': refused",
                                   code="invalid_argument")
    return parts or None


class DirExtract:
    """Writes a tar stream into `root` (made if missing) as it is fed. Blocking: the ops run
    feed() and finish() through Blocking effects (a thread in the async client)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.entries = 0
        self.bytes = 0
        self.skipped = 0
        self._buf = bytearray()
        self._state = "header"  # header | meta | data | pad | end
        self._left = 0
        self._pad = 0
        self._meta_type = b""
        self._meta = bytearray()
        self._pax: Dict[str, str] = {}
        self._longname: Optional[str] = None
        self._longlink: Optional[str] = None
        self._file: Any = None
        self._file_info: Optional[Tuple[str, int, int]] = None
        self._dirs: List[Tuple[str, int, int]] = []

    # -- the stream -----------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self._buf += data
        while self._step():
            pass

    def finish(self) -> None:
        if self._state not in ("end", "header") or self._buf.strip(b"\0"):
            self._close_file()
            raise InternalError("the workspace's archive ended in the middle of an entry",
                                code="internal")
        # Directories last, deepest first: writing into one changes its mtime.
        for path, mode, mtime in reversed(self._dirs):
            try:
                os.chmod(path, mode)
                os.utime(path, (mtime, mtime), follow_symlinks=False)
            except OSError:
                pass

    def _step(self) -> bool:
        if self._state == "end":
            self._buf.clear()
            return False
        if self._state == "data":
            if not self._buf:
                return False
            piece = bytes(self._buf[:self._left])
            del self._buf[:len(piece)]
            self._left -= len(piece)
            if self._file is not None:
                self.bytes += len(piece)
                self._file.write(piece)
            if self._left == 0:
                self._close_file()
                self._state = "pad"
            return True
        if self._state == "pad":
            n = min(self._pad, len(self._buf))
            del self._buf[:n]
            self._pad -= n
            if self._pad == 0:
                self._state = "header"
                return True
            return False
        if self._state == "meta":
            n = min(self._left, len(self._buf))
            self._meta += self._buf[:n]
            del self._buf[:n]
            self._left -= n
            if self._left:
                return False
            self._end_meta()
            self._state = "pad" if self._pad else "header"
            return True
        # header
        if len(self._buf) < BLOCK:
            return False
        block = bytes(self._buf[:BLOCK])
        del self._buf[:BLOCK]
        if block == bytes(BLOCK):
            self._state = "end"
            return True
        try:
            ti = tarfile.TarInfo.frombuf(block, ENCODING, ERRORS)
        except tarfile.HeaderError as e:
            raise InternalError(f"the workspace's archive is corrupt: {e}",
                                code="internal") from None
        size = ti.size
        if ti.type in (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                       tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK):
            if size > MAX_META:
                raise InternalError("an oversized extended header in the workspace's archive",
                                    code="internal")
            self._meta_type, self._meta = ti.type, bytearray()
            self._left, self._pad = size, (-size) % BLOCK
            self._state = "meta"
            return True
        self._entry(ti)
        return True

    def _end_meta(self) -> None:
        data = bytes(self._meta)
        if self._meta_type in (tarfile.XHDTYPE, tarfile.SOLARIS_XHDTYPE):
            self._pax.update(_pax_records(data))
        elif self._meta_type == tarfile.GNUTYPE_LONGNAME:
            self._longname = data.rstrip(b"\0").decode(ENCODING, ERRORS)
        elif self._meta_type == tarfile.GNUTYPE_LONGLINK:
            self._longlink = data.rstrip(b"\0").decode(ENCODING, ERRORS)
        # Global pax headers ('g') carry nothing Berth's archives use.

    # -- entries --------------------------------------------------------------------------

    def _target(self, name: str) -> Optional[str]:
        """The local path of an entry, its parents made; refuses one that goes through a
        symlink (one this archive made, or one already on disk)."""
        parts = safe_parts(name)
        if parts is None:
            return None
        path = self.root
        for part in parts[:-1]:
            path = os.path.join(path, part)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                os.mkdir(path, 0o755)
                continue
            if stat.S_ISLNK(st.st_mode):
                raise InvalidArgumentError(f"the archive's entry {name!r} goes through the "
                                           "symlink " + os.path.relpath(path, self.root)
                                           + ": refused", code="invalid_argument")
            if not stat.S_ISDIR(st.st_mode):
                raise InvalidArgumentError(f"the archive's entry {name!r}: "
                                           f"{os.path.relpath(path, self.root)} is not a "
                                           "directory", code="invalid_argument")
        return os.path.join(path, parts[-1])

    @staticmethod
    def _clear(path: str, name: str) -> None:
        """Makes room for a non-directory entry: an old file or link goes, a directory is an
        error (tar would not replace it either)."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise InvalidArgumentError(f"the archive's entry {name!r}: a directory is in the way",
                                       code="invalid_argument")
        os.unlink(path)

    def _entry(self, ti: tarfile.TarInfo) -> None:
        pax, self._pax = self._pax, {}
        name = pax.get("path") or self._longname or ti.name
        link = pax.get("linkpath") or self._longlink or ti.linkname
        self._longname = self._longlink = None
        size = int(pax["size"]) if pax.get("size", "").isdigit() else ti.size
        mtime = int(float(pax["mtime"])) if "mtime" in pax else int(ti.mtime)
        mode = ti.mode & 0o1777  # set-id bits cleared, as berth cp does
        data_follows = ti.type in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)
        path = self._target(name)
        if path is None:
            self._skip_data(size if data_follows else 0)
            return
        if ti.type == tarfile.DIRTYPE:
            try:
                st = os.lstat(path)
                if not stat.S_ISDIR(st.st_mode):
                    self._clear(path, name)
                    os.mkdir(path, 0o755)
            except FileNotFoundError:
                os.mkdir(path, 0o755)
            self._dirs.append((path, mode, mtime))
            self.entries += 1
            self._skip_data(0)
        elif data_follows:
            self._clear(path, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600)
            self._file = os.fdopen(fd, "wb")
            self._file_info = (path, mode, mtime)
            self.entries += 1
            if size == 0:
                self._close_file()
                self._state = "header"
            else:
                self._left, self._pad, self._state = size, (-size) % BLOCK, "data"
        elif ti.type == tarfile.SYMTYPE:
            self._clear(path, name)
            os.symlink(link, path)
            try:
                os.utime(path, (mtime, mtime), follow_symlinks=False)
            except OSError:
                pass
            self.entries += 1
            self._skip_data(0)
        elif ti.type == tarfile.LNKTYPE:
            target = self._target(link)
            if target is None or os.path.islink(target):
                raise InvalidArgumentError(f"the archive's hard link {name!r} -> {link!r}: "
                                           "refused", code="invalid_argument")
            self._clear(path, name)
            os.link(target, path, follow_symlinks=False)
            self.entries += 1
            self._skip_data(0)
        elif ti.type == tarfile.FIFOTYPE:
            self.skipped += 1
            self._skip_data(0)
        else:
            raise InvalidArgumentError(f"the archive's entry {name!r} is a device node or "
                                       "another special file: refused", code="invalid_argument")

    def _skip_data(self, size: int) -> None:
        if size:
            self._left, self._pad, self._state = size, (-size) % BLOCK, "data"
        else:
            self._state = "header"

    def _close_file(self) -> None:
        if self._file is None:
            return
        f, info = self._file, self._file_info
        self._file = self._file_info = None
        try:
            if info is not None:
                os.fchmod(f.fileno(), info[1])
        finally:
            f.close()
        if info is not None:
            os.utime(info[0], (info[2], info[2]), follow_symlinks=False)
