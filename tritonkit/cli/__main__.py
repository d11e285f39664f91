"""``python -m tritonkit.cli``."""

from tritonkit.cli import main

main()
