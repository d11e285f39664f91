"""The ``tritonkit`` command line: thin wrappers over library calls.

Each command module defines its commands and lists them in ``COMMANDS``; this
module only gathers them. ``TritonKitError`` becomes one clean message and a
non-zero exit (see ``tritonkit.cli._common``).
"""

from __future__ import annotations

import importlib

import click

from tritonkit import __version__
from tritonkit.cli._common import ErrorHandlingGroup

# One entry per command module under tritonkit/cli/. Each exposes COMMANDS: list[click.Command].
_COMMAND_MODULES = (
    "system",
    "plan",
    "build",
    "perf",
    "repo",
    "infer",
    "demo",
)


@click.group(cls=ErrorHandlingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tritonkit")
def main() -> None:
    """Build, lint, serve, call and load-test Triton model repositories.

    \b
    Example:
      tritonkit doctor
    """


for _name in _COMMAND_MODULES:
    _module = importlib.import_module(f"tritonkit.cli.{_name}")
    for _command in _module.COMMANDS:
        main.add_command(_command)

__all__ = ["main"]
