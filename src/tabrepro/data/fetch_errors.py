"""What can go wrong fetching a dataset, one class per kind: the fetcher ranks them to report the
failure that best explains a fetch, and retries only the transient ones."""

from __future__ import annotations

from tabrepro.errors import InputError


class FetchError(InputError, RuntimeError):
    """A dataset file could not be fetched; the message names the dataset, file and URL."""


class NotFoundError(FetchError):
    """The server (or mirror directory) does not have the file: not retried."""


class ChecksumMismatchError(FetchError):
    """The downloaded bytes are not the registered ones (checksum or size)."""


class TruncatedDownloadError(FetchError):
    """Fewer bytes arrived than the server announced."""


class UnsafeArchiveError(FetchError):
    """An archive member would land outside the dataset directory (absolute path, '..', link)."""


class UnsafeLocationError(FetchError):
    """A redirect or a metadata field points where downloads must not go (a local path, ftp, ...)."""


class DeadlineExceededError(FetchError):
    """One file's download from one location took longer than the configured deadline."""


class UnprovenDownloadError(FetchError):
    """An unpinned file whose end the server never announced: a cut-short body would look whole."""


class TransientError(FetchError):
    """Network trouble worth retrying (timeouts, refused connections, HTTP 5xx/408/429)."""
