"""Every command the documentation shows is run by a test, or marked as needing what the tests here lack.

See tests/docs/doc_commands.py for the format. A ``run-by`` marker naming a test in tests/docs/test_examples.py
means that test extracts and runs the block; a marker naming a test elsewhere means that test's source (with its
helpers) passes the same subcommand path and options to the CLI.
"""

from __future__ import annotations

import pytest

from tests.docs.doc_commands import NEEDS, blocks, resolve, source_of_test, string_tokens, tritonkit_commands

SHOWN = [block for block in blocks() if block.commands]


def test_the_docs_show_a_sensible_number_of_commands() -> None:
    count = sum(len(tritonkit_commands(block)) for block in SHOWN)
    assert 15 <= count <= 60, f"the docs show {count} tritonkit commands"


def test_commands_are_shown_only_in_console_blocks() -> None:
    """A ``$ tritonkit`` line in a bash or text block would escape every check below."""
    stray = [block.where for block in blocks() if block.lang != "console" and tritonkit_commands(block)
             and block.lang != "text"]  # text blocks show a command's output (Troubleshooting), not a command
    assert not stray, f"$ tritonkit lines outside a ```console block: {stray}"


@pytest.mark.parametrize("block", SHOWN, ids=[block.where for block in SHOWN])
def test_each_command_block_is_run_by_a_test_or_marked_with_what_it_needs(block) -> None:  # type: ignore[no-untyped-def]
    if block.lang == "text":
        return
    assert block.marker, f"{block.where}: a console block without a <!-- run-by: … --> or <!-- needs: … --> marker"
    kind, _, value = block.marker.partition(":")
    value = value.strip()
    assert kind in ("run-by", "needs"), f"{block.where}: unknown marker {block.marker!r}"
    resolved = [resolve(argv) for argv in tritonkit_commands(block)]  # every command exists in the click tree
    if kind == "needs":
        assert value in NEEDS, f"{block.where}: needs {value!r}; say one of {NEEDS}"
        return
    source = source_of_test(value)
    if value.startswith("tests/docs/test_examples.py::"):
        assert "commands_run_by(" in source, f"{block.where}: {value} does not extract its blocks"
        return
    words = string_tokens(source)
    for command in resolved:
        missing = [word for word in (*command.path, *command.options) if word not in words]
        assert not missing, f"{block.where}: {value} never passes {missing} (for `tritonkit {' '.join(command.path)}`)"


def test_an_unknown_subcommand_or_option_is_caught() -> None:
    with pytest.raises(AssertionError, match="no subcommand 'sweeep'"):
        resolve(("perf", "sweeep", "repo", "m"))
    with pytest.raises(AssertionError, match="no option"):
        resolve(("perf", "sweep", "repo", "m", "--no-such-flag", "1"))
    assert resolve(("perf", "sweep", "repo", "m", "--sla=p99<=5ms")).options == ("--sla",)
