"""What a CI system shows of a command: a JUnit XML file (``--junit FILE``) and, where
``$GITHUB_STEP_SUMMARY`` names a file, the markdown report appended to it.

One test case per SLA criterion per step of a run (``perf run``), per step of each variant
(``perf sweep``), per compared figure (``perf compare``) and per finding (``repo lint``); a failure
says what was measured, the limit and the 95 % interval. A test case fails only where the command's
verdict does: a step above the load that met the SLA, or of a variant that lost to the winner, is
``skipped`` with what it measured. A command that ends in an error before its result writes one
``error`` case with the message, so the file is there whatever happened (a dry run writes none). The
file is written whole (temp + rename); its properties name each setting and where it came from.
"""

from __future__ import annotations

import functools
import os
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from tritonkit._fs import atomic_write
from tritonkit.cli._common import UserPath
from tritonkit.cli.spec import SpecOption, sources, spec_text
from tritonkit.errors import CommandExit, TritonKitError
from tritonkit.perf.judge.sla import fmt_number, format_metric

__all__ = ["Case", "add_ci_options", "ci_report", "junit_xml"]

#: The commands that read a spec file, and those that write a JUnit file.
SPEC_COMMANDS = ("perf run", "perf sweep", "perf compare", "plan")
JUNIT_COMMANDS = ("perf run", "perf sweep", "perf compare", "repo lint")
_TARGET, _DONE, _START = "tritonkit.ci.junit", "tritonkit.ci.done", "tritonkit.ci.start"


@dataclass(frozen=True)
class Case:
    """One JUnit test case: ``status`` is ``pass``, ``fail``, ``error`` or ``skipped``."""

    name: str
    status: str
    message: str = ""


def _check_message(check: Any) -> str:
    c = check.constraint
    if check.measured is None:
        return f"{c.metric} not measured (limit {c.op} {format_metric(c.metric, c.value)})"
    interval = ("no interval (one window)" if check.interval is None else
                "95% interval " + " – ".join(format_metric(c.metric, v) for v in check.interval))
    noise = "; inside the noise" if check.within_noise else ""
    return (f"{c.metric} measured {format_metric(c.metric, check.measured)}, limit {c.op} "
            f"{format_metric(c.metric, c.value if check.held_to is None else check.held_to)}, {interval}{noise}")


def _verdict_cases(verdict: Any) -> Iterator[Case]:
    knee = verdict.knee_load if verdict.passed else None
    for step in verdict.steps:
        where = f"{verdict.load_kind} {fmt_number(step.load)}"
        beyond = knee is not None and step.load > knee
        for check in step.checks:
            status = {"pass": "pass", "unmeasured": "error"}.get(check.status, "fail")
            yield Case(f"{where}: {check.constraint}", "skipped" if beyond and status != "pass" else status,
                       (f"above the highest load that meets the SLA ({fmt_number(knee or 0)}): " if beyond else "")
                       + _check_message(check))
        if step.misses or step.unsure:
            yield Case(f"{where}: criteria beyond the SLA's bounds", "skipped" if beyond else "fail",
                       "; ".join((*step.misses, *step.unsure)))
    if not verdict.steps:
        yield Case("measurement", "error", "; ".join(verdict.reasons) or verdict.summary())


def _sweep_cases(result: Any) -> Iterator[Case]:
    won = result.search.winner is not None
    for outcome in result.search.outcomes:
        if outcome.status != "measured":
            yield Case(outcome.variant.id, "error", outcome.reason)
        for step in outcome.steps:
            facts = f"{step.throughput_per_s:.1f} infer/s, p99 {step.p99_ms:.1f} ms"
            status = "pass" if step.meets_sla else "skipped" if won else "fail"
            yield Case(f"{outcome.variant.id} at {fmt_number(step.load)}", status,
                       facts + (f": {step.note}" if step.note else ""))
    yield Case("winner", "pass" if result.exit_code == 0 else "fail", result.headline())


def _change(change: float | None, band: tuple[float, float] | None) -> str:
    shown = "not measured" if change is None else f"{change:+.1%}"
    return shown + ("" if band is None else " (95% interval {:+.1%} – {:+.1%})".format(*band))


def _compare_cases(comparison: Any) -> Iterator[Case]:
    for row in comparison.rows:
        status = "pass" if row.outcome == "no regression" else "fail"
        if hasattr(row, "metric"):  # an LLM run: one row per metric per step
            limit = f"{'+' if row.worse_when == 'rise' else '-'}{row.limit:.0%}"
            yield Case(f"{row.step}: {row.metric}", status, f"change {_change(row.change, row.change_interval)}, "
                       f"limit {limit}; {row.problem or row.unsure or row.outcome}")
        else:
            yield Case(row.label, status, "; ".join((
                f"throughput change {_change(row.throughput_change, row.throughput_change_interval)}, limit "
                f"{-comparison.max_throughput_drop:+.0%}", f"p99 change {_change(row.p99_change, row.p99_change_interval)}, "
                f"limit {comparison.max_p99_rise:+.0%}", *row.problems, *row.unsure)))


def _lint_cases(report: Any) -> Iterator[Case]:
    for f in report.findings:
        yield Case(f"{f.model}: {f.rule_id} {f.location}", "fail" if f.severity.value == "error" else "pass",
                   f"{f.severity.value}: {f.message}" + (f" (fix: {f.hint})" if f.hint else ""))
    if not report.findings:
        yield Case("repository", "pass", report.summary())


def _cases(result: Any) -> tuple[list[Case], str]:
    """The test cases of ``result`` and its markdown report ("" where it has none)."""
    if hasattr(result, "findings"):
        return list(_lint_cases(result)), result.summary()
    if hasattr(result, "comparison"):
        return list(_compare_cases(result.comparison)), result.comparison.summary()
    if hasattr(result, "search"):
        return list(_sweep_cases(result)), _read(result.report_path)
    if hasattr(result, "verdict"):
        report = getattr(result.report, "markdown", result.report)
        cases = (list(_verdict_cases(result.verdict)) if result.verdict is not None else
                 [Case("run", "pass" if result.exit_code == 0 else "error", f"exit {result.exit_code}")])
        if result.error is not None:
            cases.append(Case("report", "error", result.error.message))
        return cases, _read(report)
    code = getattr(result, "exit_code", 0)  # a joint sweep: its verdict as one case
    return [Case("result", "pass" if code == 0 else "fail", result.headline())], _read(result.report_path)


def _read(path: Path | None) -> str:
    try:
        return path.read_text(encoding="utf-8") if path is not None else ""
    except OSError:
        return ""


def _clean(text: str) -> str:
    """Text XML 1.0 can hold (no control character but tab and newline)."""
    return "".join(c if c in "\t\n" or " " <= c <= "\ud7ff" or "\ue000" <= c <= "\ufffd" else "?" for c in text)


def junit_xml(suite: str, cases: Iterable[Case], properties: dict[str, str], elapsed_s: float) -> str:
    """The JUnit XML of one suite (``<testsuites>`` around one ``<testsuite>``) as CI systems read it."""
    cases = list(cases)
    count = {k: sum(c.status == k for c in cases) for k in ("fail", "error", "skipped")}
    totals = {"tests": str(len(cases)), "failures": str(count["fail"]), "errors": str(count["error"]),
              "skipped": str(count["skipped"]), "time": f"{elapsed_s:.3f}"}
    root = ET.Element("testsuites", {"name": "tritonkit", **totals})
    node = ET.SubElement(root, "testsuite", {"name": _clean(suite), **totals, "hostname": socket.gethostname(),
                                             "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())})
    props = ET.SubElement(node, "properties")
    for name, value in properties.items():
        ET.SubElement(props, "property", {"name": _clean(name), "value": _clean(value)})
    for case in cases:
        element = ET.SubElement(node, "testcase", {"name": _clean(case.name), "classname": _clean(suite),
                                                   "time": "0"})
        tag = {"fail": "failure", "error": "error", "skipped": "skipped"}.get(case.status)
        if tag is not None:
            ET.SubElement(element, tag, {"message": _clean(case.message)}).text = _clean(case.message)
        elif case.message:
            ET.SubElement(element, "system-out").text = _clean(case.message)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _emit(ctx: click.Context, cases: list[Case], markdown: str) -> None:
    words = [str(w) for p in ctx.command.params if isinstance(p, click.Argument) and p.name in ctx.params
             for w in (ctx.params[p.name] if isinstance(ctx.params[p.name], tuple) else [ctx.params[p.name]])
             if w is not None]
    suite = " ".join(["tritonkit", *ctx.command_path.split()[1:], *words])  # tritonkit perf run resnet
    target = ctx.meta.get(_TARGET)
    if target is not None:
        atomic_write(target, junit_xml(suite, cases, sources(ctx), time.monotonic() - ctx.meta.get(_START, 0.0)))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        bad = [c for c in cases if c.status in ("fail", "error")]
        lines = [f"### {suite}: " + (f"{len(bad)} of {len(cases)} checks failed" if bad else
                                     f"{len(cases)} checks, none failed"), "", markdown.strip(), ""]
        if bad:
            lines += ["| test | result | detail |", "| --- | --- | --- |"]
            lines += ["| " + " | ".join(t.replace("|", "\\|").replace("\n", " ") for t in (c.name, c.status, c.message))
                      + " |" for c in bad[:100]]
        try:
            with open(summary, "a", encoding="utf-8") as handle:  # the runner's file: appended to, as it asks
                handle.write("\n".join(lines) + "\n\n")
        except OSError as exc:  # the job summary is a courtesy: its failure does not change the verdict
            click.echo(f"warning: cannot append to $GITHUB_STEP_SUMMARY ({summary}): {exc.strerror}", err=True)


def ci_report(result: Any) -> None:
    """Write what the CI system shows of ``result`` (a run, a sweep, a comparison, a lint report) for
    the command being run: its JUnit file (``--junit``), the job summary, and, where a spec file
    was read, ``spec.toml`` in the run's folder with where each setting came from."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or _START not in ctx.meta:
        return
    ctx.meta[_DONE] = True
    folder = getattr(result, "results_dir", None) or getattr(result, "out_dir", None)
    if folder is not None and "tritonkit.spec.file" in ctx.meta and Path(folder).is_dir():
        atomic_write(Path(folder) / "spec.toml", spec_text(ctx, with_sources=True))
    _emit(ctx, *_cases(result))


def _wrap(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` that prints the spec with ``--print-config``, and otherwise, with ``--junit``, writes
    an ``error`` case when the command ends in an error before its result."""

    @functools.wraps(callback)
    def run(*args: Any, print_config: bool = False, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if print_config:
            click.echo(spec_text(ctx), nl=False)
            return None
        ctx.meta.update({_TARGET: kwargs.pop("junit", None), _START: time.monotonic()})
        try:
            return callback(*args, **kwargs)
        except (TritonKitError, CommandExit) as exc:
            code = exc.code if isinstance(exc, CommandExit) else getattr(exc, "exit_code", 2)
            if code != 0 and not ctx.meta.get(_DONE) and not kwargs.get("dry_run"):
                message = (f"{exc.message}" + (f" (fix: {exc.hint})" if exc.hint else "")
                           if isinstance(exc, TritonKitError) else f"exit status {code}: see the command's output")
                try:
                    _emit(ctx, [Case("command", "error", message)], "")
                except (OSError, TritonKitError) as failed:  # the command's own error is the one to report
                    click.echo(f"warning: the JUnit file was not written: {failed}", err=True)
            raise

    return run


def add_ci_options(group: click.Group) -> None:
    """``--config``/``--print-config`` on :data:`SPEC_COMMANDS`, ``--junit FILE`` on :data:`JUNIT_COMMANDS`."""
    for path in dict.fromkeys((*SPEC_COMMANDS, *JUNIT_COMMANDS)):
        command: Any = group
        for word in path.split():
            command = command.commands[word]
        file = UserPath(dir_okay=False, path_type=Path)
        if path in JUNIT_COMMANDS:
            command.params.append(click.Option(["--junit"], type=file, help=(
                "Also write the result as JUnit XML to this file (one test case per SLA criterion per step, or per "
                "finding), written whole; with $GITHUB_STEP_SUMMARY set, the report is appended to it.")))
        if path in SPEC_COMMANDS:
            command.params += [
                SpecOption(["--config"], type=file, is_eager=True, expose_value=False, help=(
                    f"Spec file (TOML, or YAML for .yaml/.yml) holding this command's settings: its "
                    f"[{path.replace(' ', '.')}] table (or its keys at the top), each key an option's long name "
                    "with _ for - (or an argument's name). A flag given on the command line wins.")),
                click.Option(["--print-config"], is_flag=True,
                             help="Print the spec (TOML) equal to this command line, for --config, and exit.")]
        command.callback = _wrap(command.callback)
