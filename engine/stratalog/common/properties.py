"""Java's ``.properties`` format, as Kafka reads and writes it.

Kafka keeps ``meta.properties`` in every log directory, the engine keeps a partition's topic
overrides in ``stratalog-topic.properties``, and the operator hands the agent its settings as a
properties file. All of them must survive a round trip through ``java.util.Properties``: its
escapes (``\\\\``, ``\\=``, ``\\:``, ``\\#``, ``\\!``, ``\\n``, ``\\uXXXX``), its three separators
(``=``, ``:``, whitespace), its line continuations and its ``#``/``!`` comments. The format itself is
delegated to ``javaproperties``, a maintained implementation of exactly that specification; this
module fixes the choices Kafka makes around it (ASCII output, the header ``Properties.store`` writes,
errors that name the file).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import javaproperties

from stratalog.common.errors import CheckpointError

__all__ = ["format_properties", "parse_properties", "parse_properties_text", "properties_body"]


def properties_body(properties: Mapping[str, str]) -> str:
    """The ``key=value`` lines of ``Properties.store``, in the mapping's order, without a header.

    Everything outside printable ASCII is written as ``\\uXXXX`` (UTF-16 units, as Java does), so
    the text reads the same as ISO-8859-1 (Kafka's ``Properties.load(InputStream)``) and as UTF-8.
    """
    return javaproperties.dumps(properties, timestamp=False, ensure_ascii=True)


def format_properties(properties: Mapping[str, str]) -> bytes:
    """What Kafka's ``Properties.store(out, "")`` writes: an empty comment line, the date, the entries."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    return f"#\n#{stamp}\n{properties_body(properties)}".encode("ascii")


def parse_properties_text(text: str, *, where: str = "properties") -> dict[str, str]:
    """Every key and value of a properties text, as ``Properties.load`` would read them (the last of a
    repeated key wins)."""
    try:
        return javaproperties.loads(text)
    except ValueError as error:  # a malformed \\uXXXX escape
        raise CheckpointError(f"{where}: {error}") from None


def parse_properties(path: Path) -> dict[str, str]:
    """Read a properties file. Kafka writes ASCII; a hand-written file may be UTF-8, and anything that
    is not UTF-8 is read as ISO-8859-1, the encoding ``Properties.load(InputStream)`` assumes."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties_text(text, where=str(path))
