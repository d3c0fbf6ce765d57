"""Fetching the chart (GitHub archive, S3 asset, OCI registry) and its dependencies (vendored or built)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from . import aws_clients, process
from .deadline import Deadline
from .errors import ChartInstallerError, DeadlineExceededError, UnsafeArchiveError
from .process import check, helm_bin, log
from .properties import ChartSource, GitSource, OciSource, S3Source

DOWNLOAD_TIMEOUT_SECONDS = 60
DOWNLOAD_ATTEMPTS = 4
MAX_DOWNLOAD_BYTES = 200 * 1024 * 1024
# Lambda's /tmp is 512 MiB by default: refuse archives that would not fit rather than fill it.
MAX_EXTRACTED_BYTES = 400 * 1024 * 1024
TRANSIENT_HTTP_CODES = frozenset({408, 429, 500, 502, 503, 504})
# A top-level "dependencies:" key that is not an empty inline list.
DECLARES_DEPENDENCIES = re.compile(r"^dependencies:(?![ \t]*\[[ \t]*\][ \t]*(#.*)?$)", re.MULTILINE)
VENDOR_LOCK = "vendor-lock.json"


def fetch_chart(
    source: ChartSource, workdir: Path, region: str, env: Mapping[str, str], deadline: Deadline
) -> Path:
    if isinstance(source, GitSource):
        archive = workdir / "chart.tar.gz"
        download(source.archive_url, archive, deadline)
        tree = single_top_directory(extract_tar(archive, workdir / "src"))
        verify_tree(tree, source.sha256, source.archive_url)
        chart_dir = locate_chart(tree, source.chart_path)
    elif isinstance(source, S3Source):
        archive = workdir / "chart.zip"
        download_s3(source, archive, region, deadline)
        chart_dir = locate_chart(extract_zip(archive, workdir / "src"), source.chart_path)
    else:
        # A packaged OCI chart already carries its dependencies in charts/ (helm package refuses
        # to package a chart whose dependencies are missing), so there is nothing to build.
        return pull_oci(source, workdir, env, deadline)
    if (chart_dir / VENDOR_LOCK).is_file():
        verify_vendored(chart_dir)
    elif DECLARES_DEPENDENCIES.search((chart_dir / "Chart.yaml").read_text(errors="replace")):
        result = process.run([helm_bin(), "dependency", "build", str(chart_dir)], env, deadline.seconds_left())
        check(result, f"helm dependency build {chart_dir.name}")
    return chart_dir


def vendored_archives(chart_dir: Path) -> dict[str, str]:
    """sha256 of every chart archive in a charts/ directory of the chart, at any depth, by relative path."""
    return {
        path.relative_to(chart_dir).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(chart_dir.rglob("*.tgz"))
        if path.parent.name == "charts"
    }


def verify_vendored(chart_dir: Path) -> None:
    """The archives in charts/ are exactly those of the vendor lock, byte for byte."""
    try:
        locked = json.loads((chart_dir / VENDOR_LOCK).read_text())["archives"]
    except (ValueError, KeyError, TypeError):
        raise ChartInstallerError(f"{VENDOR_LOCK} of the chart is not a vendor lock") from None
    found = vendored_archives(chart_dir)
    if found != locked:
        differ = sorted(name for name in set(found) | set(locked) if found.get(name) != locked.get(name))
        raise ChartInstallerError(
            f"the chart's dependency archives differ from {VENDOR_LOCK}: {', '.join(differ)}; "
            "vendor the chart again (make vendor-chart)"
        )
    log(f"{len(found)} vendored dependency archives match {VENDOR_LOCK}")


def tree_digest(root: Path) -> str:
    """The SHA-256 of a source tree: of the list ``sha256sum`` prints for its regular files, named ``./<path>`` and
    sorted bytewise, so what ``(cd ROOT && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) |
    sha256sum`` prints first (docs/constructs/helm-releases.md says how to compute it from a clone). It covers the
    extracted files, not the archive's bytes, which GitHub may change: "The exact compression settings used to
    generate a zipball or tarball may change over time. The extracted contents won't change"
    (github/docs, content/repositories/working-with-files/using-files/downloading-source-code-archives.md, as
    changed by github/docs#25673). Directories are not listed (an empty one changes nothing helm reads); a
    symbolic link, whose target the list would not show, and a name ``sha256sum`` would escape (a newline or a
    backslash) are refused."""
    lines: dict[bytes, bytes] = {}
    for directory, subdirectories, files in os.walk(root):
        for name in [*subdirectories, *files]:
            path = Path(directory) / name
            relative = "./" + path.relative_to(root).as_posix()
            if path.is_symlink():
                raise UnsafeArchiveError(f"the chart source holds a symbolic link, {relative}, which its digest "
                                         "cannot cover: refused")
            if name in files:
                if "\n" in relative or "\\" in relative:
                    raise UnsafeArchiveError(f"the chart source holds a file name its digest cannot list: {relative!r}")
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                lines[relative.encode()] = f"{digest}  {relative}\n".encode()
    # Sorted by the names' bytes, as LC_ALL=C sort -z sorts them.
    return hashlib.sha256(b"".join(lines[name] for name in sorted(lines))).hexdigest()


def verify_tree(root: Path, expected: str, what: str) -> None:
    """The source tree is the one the config pins (``tree_digest``). A pinned commit alone does not prove the
    repository: GitHub serves a commit of any fork under the parent's URL."""
    found = tree_digest(root)
    if found != expected:
        raise ChartInstallerError(
            f"the source tree of {what} has SHA-256 {found}, the config pins {expected}: refused (a commit "
            "of another fork, or a pin of another revision; see hyperpod.dependencies_chart.source_sha256)")
    log(f"the source tree's SHA-256 {found} is the pinned one")


def download(url: str, destination: Path, deadline: Deadline) -> None:
    if not url.isascii():
        # urllib sends the URL as it is and http.client encodes the request line as ASCII: UnicodeEncodeError.
        raise ChartInstallerError(f"download of {url!r} refused: a URL must be ASCII")
    for attempt in range(1, DOWNLOAD_ATTEMPTS + 1):
        try:
            log(f"downloading {url} (attempt {attempt})")
            save_response(url, destination, deadline.seconds_left())
            return
        except HTTPError as error:
            if error.code not in TRANSIENT_HTTP_CODES or attempt == DOWNLOAD_ATTEMPTS:
                message = f"download of {url} failed: HTTP {error.code} {error.reason}"
                raise ChartInstallerError(message) from None
            reason = f"HTTP {error.code}"
        except (URLError, TimeoutError, ConnectionError) as error:
            if attempt == DOWNLOAD_ATTEMPTS:
                raise ChartInstallerError(f"download of {url} failed: {error}") from None
            reason = str(error)
        delay = 2**attempt
        log(f"download failed ({reason}); retrying in {delay} s")
        time.sleep(delay)


def save_response(url: str, destination: Path, seconds: float) -> None:
    """Saves the body of ``url``; a socket timeout bounds each read, ``seconds`` the whole download."""
    ends = time.monotonic() + seconds
    request = Request(url, headers={"User-Agent": "hyperpod-chart-installer"})  # noqa: S310 - https only
    timeout = min(DOWNLOAD_TIMEOUT_SECONDS, seconds)
    with urlopen(request, timeout=timeout) as response, destination.open("wb") as out:  # noqa: S310
        copy_until(response, out, ends, url)


def copy_until(body: Any, out: Any, ends: float, what: str) -> None:
    written = 0
    while chunk := body.read(1024 * 1024):
        written += len(chunk)
        if written > MAX_DOWNLOAD_BYTES:
            raise UnsafeArchiveError(f"{what} is larger than {MAX_DOWNLOAD_BYTES} bytes")
        if time.monotonic() > ends:
            raise DeadlineExceededError(f"download of {what} did not finish in the time left")
        out.write(chunk)


def download_s3(source: S3Source, destination: Path, region: str, deadline: Deadline) -> None:
    url = f"s3://{source.bucket}/{source.key}"
    log(f"downloading {url}")
    ends = time.monotonic() + deadline.seconds_left()
    body = aws_clients.client("s3", region).get_object(Bucket=source.bucket, Key=source.key)["Body"]
    with destination.open("wb") as out:
        copy_until(body, out, ends, url)


def check_member(name: str, size: int, total: int) -> int:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise UnsafeArchiveError(f"archive member {name!r} points outside the extraction directory")
    total += max(size, 0)
    if total > MAX_EXTRACTED_BYTES:
        raise UnsafeArchiveError(f"archive expands to more than {MAX_EXTRACTED_BYTES} bytes")
    return total


def extract_tar(archive: Path, destination: Path) -> Path:
    destination.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            total = 0
            for member in tar.getmembers():
                total = check_member(member.name, member.size, total)
            # The "data" filter also refuses links that leave the directory, devices and setuid bits.
            tar.extractall(destination, filter="data")
    except tarfile.FilterError as error:
        raise UnsafeArchiveError(f"unsafe archive member: {error}") from None
    except tarfile.TarError as error:
        raise ChartInstallerError(f"{archive.name} is not a readable tar archive: {error}") from None
    return destination


def extract_zip(archive: Path, destination: Path) -> Path:
    destination.mkdir(parents=True)
    try:
        with zipfile.ZipFile(archive) as bundle:
            total = 0
            for info in bundle.infolist():
                total = check_member(info.filename, info.file_size, total)
            bundle.extractall(destination)  # noqa: S202 - every member was checked above
    except zipfile.BadZipFile as error:
        raise ChartInstallerError(f"{archive.name} is not a readable zip archive: {error}") from None
    return destination


def single_top_directory(root: Path) -> Path:
    """A GitHub archive holds one top-level directory, named ``<repo>-<sha>``."""
    entries = list(root.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        raise ChartInstallerError(
            f"expected one top-level directory in the archive, found {sorted(e.name for e in entries)}"
        )
    return entries[0]


def locate_chart(root: Path, chart_path: str) -> Path:
    chart_dir = (root / chart_path).resolve()
    if not chart_dir.is_relative_to(root.resolve()):
        raise UnsafeArchiveError(f"ChartPath {chart_path!r} leaves the archive")
    if not (chart_dir / "Chart.yaml").is_file():
        raise ChartInstallerError(f"no Chart.yaml at {chart_path!r} in the fetched source")
    return chart_dir


def pull_oci(source: OciSource, workdir: Path, env: Mapping[str, str], deadline: Deadline) -> Path:
    untar_dir = workdir / "oci"
    untar_dir.mkdir()
    pull = ["pull", source.uri, "--version", source.version, "--untar", "--untardir", str(untar_dir)]
    result = process.run([helm_bin(), *pull], env, deadline.seconds_left())
    check(result, f"helm pull {source.uri} --version {source.version}")
    charts = [path.parent for path in untar_dir.glob("*/Chart.yaml")]
    if len(charts) != 1:
        raise ChartInstallerError(f"helm pull {source.uri} produced no single chart directory")
    return charts[0]
