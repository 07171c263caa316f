"""The one base class of errors caused by what the user gave (a setting, a name, a file, a download).

The CLI turns an `InputError` (and an OSError, whose message names the file or host) into one line
and exit status 2; anything else is a bug and keeps its traceback. Each module's own error class
derives from it, so a new kind of bad input needs no registration anywhere.
"""


class InputError(Exception):
    """Something the command needs is missing or wrong; the message says what to run or fix."""
