"""Re-create one trimmed upstream tree of this folder from the real repository.

    python tests/upstream/trim.py SOURCE NAME

SOURCE is a git checkout of the repository or a bare clone or mirror of it (the commit named in
``NAME.files``, in full, is archived from it, whatever is checked out), or a ``git archive``
tarball of that commit; NAME is a tree of this
folder (``slime-fec3da9b``). Only the files listed in ``NAME.files`` are kept: what the adapters
import and read, found by running the adapters' tests with an open-audit hook, plus the LICENSE.
The tarball is written byte-for-byte reproducibly (sorted entries, zero times, root owner).
"""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def manifest(name: str) -> tuple[str, list[str]]:
    """The commit and the file list of ``NAME.files``; header lines are ``# key: value``."""
    commit, files = "", []
    for line in (HERE / f"{name}.files").read_text().splitlines():
        if line.startswith("# commit:"):
            commit = line.split(":", 1)[1].strip()
        elif line and not line.startswith("#"):
            files.append(line)
    if not commit:
        raise SystemExit(f"{name}.files names no '# commit:' line")
    return commit, files


def is_repository(source: Path) -> bool:
    """A work tree (``.git`` inside) or a bare repository (``HEAD`` and ``objects`` at its top)."""
    return (source / ".git").exists() or ((source / "HEAD").is_file() and (source / "objects").is_dir())


def read_source(source: Path, name: str, commit: str) -> tarfile.TarFile:
    if is_repository(source):
        archive = subprocess.run(
            ["git", "-C", str(source), "archive", "--format=tar", f"--prefix={name}/", commit],
            check=True,
            capture_output=True,
        ).stdout
        return tarfile.open(fileobj=io.BytesIO(archive))
    return tarfile.open(source)


def trim(source: Path, name: str, into: Path = HERE) -> Path:
    commit, files = manifest(name)
    wanted = {f"{name}/{path}" for path in files}
    found: dict[str, bytes] = {}
    with read_source(source, name, commit) as archive:
        for member in archive.getmembers():
            # A tarball made with another prefix still matches on the path below its root folder.
            path = f"{name}/{member.name.split('/', 1)[-1]}"
            if member.isfile() and path in wanted:
                extracted = archive.extractfile(member)
                assert extracted is not None
                found[path] = extracted.read()
    missing = sorted(wanted - set(found))
    if missing:
        raise SystemExit(f"{source} lacks {len(missing)} listed file(s) of {name}: {', '.join(missing[:5])}")
    buffer = io.BytesIO()
    # git archive writes the commit into the pax global header; the gate reads it from there.
    with tarfile.open(
        fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}
    ) as out:
        for path in sorted(found):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(found[path]), 0o644, 0
            out.addfile(info, io.BytesIO(found[path]))
    target = into / f"{name}.tar.gz"
    target.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0))
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(trim(Path(argv[0]), argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
