"""The ``tritonkit`` command line: thin wrappers over library calls.

Each command module defines its commands and lists them in ``COMMANDS``; this module
imports each one by name and registers its commands. ``TritonKitError`` becomes one clean
message and a non-zero exit (see ``tritonkit.cli._common``).
"""

from __future__ import annotations

import click

from tritonkit._version import __version__
from tritonkit.cli import build, demo, deploy, infer, perf, plan, repo, system
from tritonkit.cli._common import ErrorHandlingGroup, harden_text_options
from tritonkit.cli.ci import add_ci_options


@click.group(cls=ErrorHandlingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tritonkit")
def main() -> None:
    """Build, lint, serve, call and load-test Triton model repositories.

    \b
    Example:
      tritonkit doctor
    """


# Every command module, imported by name so readers and tools can follow each command to its code.
# Each module lists its commands in COMMANDS.
for _module in (system, plan, build, perf, repo, infer, demo, deploy):
    for _command in _module.COMMANDS:
        main.add_command(_command)
add_ci_options(main)  # --config, --print-config, --junit on the commands a build server runs
harden_text_options(main)  # every plain text option: not empty, no control character, UTF-8

__all__ = ["main"]
