"""The one base class of errors caused by what the user gave (a setting, a name, a file, a download).

The CLI turns an `InputError` (and an OSError, whose message names the file or host) into one line
and exit status 2; anything else is a bug and keeps its traceback. Each module's own error class
derives from it, so a new kind of bad input needs no registration anywhere.
"""


class InputError(Exception):
    """Something the command needs is missing or wrong; the message says what to run or fix."""


def one_line(error: BaseException, limit: int | None = None) -> str:
    """An error's message on one line (its lines joined by "; ", spaces collapsed; at most `limit`
    characters): the CLI's error line, and a file's or a library's text quoted inside one of ours."""
    lines = (" ".join(line.split()) for line in str(error).splitlines())
    text = "; ".join(line for line in lines if line)
    return (text if limit is None else text[:limit]) or type(error).__name__
