"""Java's .properties format: what the engine writes, Kafka reads back unchanged, and the other way round.

meta.properties, stratalog-topic.properties and the agent's --config-file all go through
stratalog.common.properties. A key or value may hold anything a Java String can: backslashes,
separators, comment characters, surrounding whitespace, line breaks, non-ASCII.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratalog.common.errors import CheckpointError
from stratalog.common.properties import format_properties, parse_properties, parse_properties_text

# Any text but lone surrogates, which no UTF-8 file and no well-formed Java String can carry.
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)))
TRICKY_TEXT = st.text(st.sampled_from(list("\\=:#! \t\f\r\nabcé€\u0000😀")) | st.characters(exclude_categories=("Cs",)))

# What Java's Properties.store(out, "") writes for these entries (checked against Java 17), plus
# what a person may add by hand: a "!" comment, ":" and whitespace separators, a continuation line.
JAVA_WRITTEN = "\n".join([
    "#",
    "#Tue Nov 24 11:45:34 UTC 2026",
    "path=C\\:\\\\new",
    "caf\\u00E9=na\\u00EFve \\= yes\\: \\#1 \\!",
    "\\ lead=\\  spaces  ",                  # the value's trailing spaces are not escaped
    "multi=line1\\nline2\\r\\ttab",
    "emoji=\\uD83D\\uDE00",
    "=empty key",
    "! a comment in Java's other style",
    "colon.separated : value one",
    "space.separated   value two",
    "continued = first, \\",
    "            second, \\",
    "  third",
    "",
])


def test_a_windows_path_comes_back_as_it_was_written(tmp_path):
    path = tmp_path / "a.properties"
    path.write_bytes(format_properties({"dir": "C:\\new", "n": "line\\n"}))
    assert parse_properties(path) == {"dir": "C:\\new", "n": "line\\n"}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(ANY_TEXT | TRICKY_TEXT, ANY_TEXT | TRICKY_TEXT, max_size=8))
def test_any_keys_and_values_survive_a_round_trip_through_a_file(tmp_path_factory, properties):
    path = tmp_path_factory.mktemp("props") / "p.properties"
    path.write_bytes(format_properties(properties))
    assert parse_properties(path) == properties


@given(st.dictionaries(TRICKY_TEXT, TRICKY_TEXT, max_size=4))
def test_the_writer_emits_ascii_so_kafka_reads_it_as_iso_8859_1_unchanged(properties):
    format_properties(properties).decode("ascii")


def test_the_writer_keeps_kafkas_header_and_the_mappings_order():
    lines = format_properties({"version": "1", "cluster.id": "abc"}).decode("ascii").splitlines()
    assert lines[0] == "#"
    assert re.fullmatch(r"#[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d UTC \d{4}", lines[1])  # Date.toString
    assert lines[2:] == ["version=1", "cluster.id=abc"]


def test_a_file_written_by_javas_properties_store_and_edited_by_hand_reads_as_java_reads_it(tmp_path):
    path = tmp_path / "java.properties"
    path.write_bytes(JAVA_WRITTEN.encode("ascii"))
    assert parse_properties(path) == {
        "path": "C:\\new",
        "café": "naïve = yes: #1 !",
        " lead": "  spaces  ",
        "multi": "line1\nline2\r\ttab",
        "emoji": "😀",
        "": "empty key",
        "colon.separated": "value one",
        "space.separated": "value two",
        "continued": "first, second, third",
    }


def test_a_hand_written_latin_1_file_reads_as_kafka_reads_it(tmp_path):
    path = tmp_path / "latin1.properties"
    path.write_bytes("name=café\n".encode("iso-8859-1"))
    assert parse_properties(path) == {"name": "café"}


def test_a_broken_unicode_escape_is_refused_with_the_files_name(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_bytes(b"key=\\u12\n")
    with pytest.raises(CheckpointError, match="bad.properties"):
        parse_properties(path)


def test_a_key_alone_on_its_line_has_an_empty_value_as_in_java():
    assert parse_properties_text("flag\nother=1\n") == {"flag": "", "other": "1"}


JAVA_LOADER = """
import java.io.FileInputStream;
import java.util.Properties;
import java.util.TreeSet;

public class Load {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { props.load(in); }  // as Kafka's Utils.loadProps
        for (String key : new TreeSet<>(props.stringPropertyNames())) {
            System.out.println(hex(key) + " " + hex(props.getProperty(key)));
        }
    }

    static String hex(String s) {
        StringBuilder out = new StringBuilder("[");
        for (char c : s.toCharArray()) out.append(String.format("%04x", (int) c));
        return out.append("]").toString();
    }
}
"""


def _utf16_hex(text: str) -> str:
    return "[" + text.encode("utf-16-be").hex() + "]"


def test_javas_properties_load_reads_back_exactly_what_the_engine_wrote(tmp_path):
    written = {"dir": "C:\\new", "café": "naïve = yes: #1 !", " lead": "  spaces  ", "multi": "a\nb\r\tc",
               "emoji": "😀", "": "empty key", "#not.a.comment": "!", "key with = and :": "\\u0041 literally"}
    assert shutil.which("java"), "Java's own Properties.load is the reference here: install a JDK (11+)"
    path = tmp_path / "engine.properties"
    path.write_bytes(format_properties(written))
    (tmp_path / "Load.java").write_text(JAVA_LOADER, encoding="utf-8")
    result = subprocess.run(["java", str(tmp_path / "Load.java"), str(path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    # The loader lists keys in Java's String order: by UTF-16 code units, as big-endian bytes compare.
    keys = sorted(written, key=lambda key: key.encode("utf-16-be"))
    assert result.stdout.splitlines() == [f"{_utf16_hex(k)} {_utf16_hex(written[k])}" for k in keys]
