"""Text from files made safe for a terminal: a result's strings (a hostname, a program's name, a
path) may hold escape sequences that clear the screen, retitle the window or hide a line."""

import re

# C0 controls but newline and tab, DEL, C1 controls (U+0080-U+009F: some terminals act on them),
# and the bidirectional overrides that make a line read otherwise than it is stored.
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _code(match: re.Match[str]) -> str:
    point = ord(match.group())
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"


def escape(text: str) -> str:
    """The text with every control character but newline and tab spelled \\xNN (\\uNNNN)."""
    return CONTROLS.sub(_code, text)
