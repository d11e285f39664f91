"""``tritonkit perf sweep``: the configuration that carries the most load within an SLA.

Registered on the ``perf`` group (``tritonkit.cli.perf`` imports this module). On a terminal,
one progress line per variant with an ETA on stderr and a summary on stdout; piped or under CI,
one ``key=value`` line per variant and one for the result on stdout; ``--json`` prints one JSON
document. Exit codes: 0 a configuration meets the SLA, 1 none does, 2 could not measure.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from tritonkit._dial import PLAIN, dial_for
from tritonkit._values import POSITIVE, TOLERANCE_PERCENT, excerpt
from tritonkit.cli._common import (
    SLA_TEXT,
    CommandExit,
    Percent,
    UserPath,
    Words,
    backend_dir_option,
    check_model_name,
    dial_options,
    echo_json,
    levels_type,
    number,
    rate_tolerance_option,
    server_bin_option,
    sigterm_as_interrupt,
)
from tritonkit.cli.ci import ci_report
from tritonkit.cli.perf_cluster import (
    cluster_settings,
    cluster_sweep_options,
    reject_cluster_options,
    run_cluster_sweep_command,
)
from tritonkit.cli.sweep_engine import engine_sweep_options
from tritonkit.cli.sweep_remote import remote_sweep_options, run_remote_command, split_names
from tritonkit.perf import PerfSpec, load_sla
from tritonkit.perf.sweep import (
    Exit,
    JointResult,
    SweepEvent,
    SweepGrid,
    SweepResult,
    SweepSettings,
    run_joint_sweep,
    run_sweep,
)

__all__ = ["SweepPrinter", "sweep_command"]


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(round(seconds))
    return f"{whole // 60}:{whole % 60:02d}"


def _kv(kind: str, **fields: object) -> None:
    parts = [kind] + [f"{k}={shlex.quote(str(v))}" for k, v in fields.items() if v is not None]
    click.echo(" ".join(parts))


class SweepPrinter:
    """Progress on a terminal (stderr, with an ETA); ``key=value`` lines when piped; nothing with --json."""

    def __init__(self, *, as_json: bool, quiet: bool) -> None:
        self.as_json = as_json
        self.tty = sys.stderr.isatty() and not as_json and not quiet
        self.lines = not as_json and not sys.stdout.isatty()

    def event(self, event: SweepEvent) -> None:
        if self.tty:
            if event.kind == "written":
                return  # the summary says it, with the restore command
            if event.kind == "warning":
                click.echo(f"warning: {event.message}", err=True)
                return
            counted = event.kind in ("start", "measured", "resumed", "load_failed", "failed")
            counter = f"[{event.done}/{event.done + event.left}] " if counted else "  "
            eta = f" — ETA ≤ {_clock(event.eta_s)}" if event.kind == "start" and event.eta_s is not None else ""
            click.echo(f"{counter}{event.message}{eta}".rstrip() if event.kind != "server" else event.message,
                       err=True)
        elif self.lines and event.kind == "warning":
            _kv("sweep_warning", message=event.message)
        elif self.lines and event.kind not in ("start", "note", "server"):
            _kv("sweep_" + event.kind, variant=event.variant, done=event.done, left=event.left,
                eta_s=None if event.eta_s is None else round(event.eta_s, 1),
                **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in event.data.items()
                   if not isinstance(v, (dict, list)) and k not in ("variant", "done", "left", "eta_s")})

    def result(self, result: SweepResult) -> None:
        ci_report(result)
        if self.as_json:
            echo_json(result.to_dict())
            return
        winner = result.search.winner
        score = winner.score() if winner else None
        if self.lines:
            _kv("sweep_result", exit_code=result.exit_code, winner=winner.variant.id if winner else "none",
                throughput_per_s=round(score.throughput_per_s, 2) if score else None,
                p99_ms=round(score.p99_ms, 3) if score else None, load=score.load if score else None,
                ratio_to_default=round(result.ratio_to_default, 3) if result.ratio_to_default else None,
                headroom_pct=round(100 * min(result.headroom.values()), 1) if result.headroom else None,
                tie_within_noise=bool(result.search.noise_note),
                **{k: result.counts()[k] for k in ("measured", "pruned", "skipped", "load_failed", "failed")},
                resumed=len(result.resumed),
                wall_s=round(result.wall_s, 1), report=result.report_path,
                config=result.write_back.config_path if result.write_back else None,
                backup=result.write_back.backup_path if result.write_back else None)
            _kv("sweep_time", **{f"{k}_s": v for k, v in result.time_breakdown().items()})
            return
        click.echo(result.headline())
        if result.write_back is not None and result.write_back.backup_path is not None:
            click.echo(f"written: {result.write_back.config_path}")
            click.echo(f"previous config kept: {result.write_back.backup_path}")
            click.echo(f"restore it with: {result.write_back.restore_command}")
        elif result.repo is not None:  # a sweep by URL writes no repository: its summary says what it left
            click.echo(f"the repository holds {result.holds()}")
        click.echo(f"report: {result.report_path} (plot {result.plot_path}); "
                   f"{result.counts()['measured']} measured, {result.counts()['pruned']} pruned, "
                   f"{result.counts()['skipped']} skipped, "
                   f"{result.counts()['failed']} failed, {len(result.resumed)} reused, {result.wall_s:.1f} s")
        click.echo(result.breakdown_text())


_D = SweepSettings.default


def _pairs(values: tuple[str, ...], option: str, *, number: bool = False) -> dict[str, str]:
    """``NAME=VALUE`` options as a mapping; a malformed one is a usage error naming it."""
    pairs: dict[str, str] = {}
    for text in values:
        name, sep, value = text.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise click.BadParameter(f"{excerpt(text)} is not NAME=VALUE", param_hint=option)
        if number:
            POSITIVE.parse(value, f"{option} {name.strip()}")
        pairs[name.strip()] = value.strip()
    return pairs


def _print_joint(result: JointResult, as_json: bool) -> None:
    ci_report(result)
    if as_json:
        echo_json(result.to_dict())
        return
    click.echo(result.headline())
    for model, written in result.write_backs.items():
        if written.backup_path is not None:
            click.echo(f"written: {written.config_path} (previous kept: {written.backup_path})")
        else:
            click.echo(f"{model}: {written.config_path} already holds its winner")
    reused = f", {len(result.resumed)} results reused from the sweep folder" if result.resumed else ""
    click.echo(f"report: {result.report_path}; {len(result.tried)} joint configurations{reused}, {result.wall_s:.1f} s")


@click.command("sweep")
@click.argument("names", metavar="[REPO] MODEL [MODEL...]", nargs=-1)
@click.option("--share", "shares", type=Words(example="detector=2"), multiple=True,
              help="With several models: a model's share of the traffic, NAME=WEIGHT (repeat; equal by default).")
@click.option("--model-sla", "model_slas", type=Words(example="b=p99<=200ms"), multiple=True,
              help="With several models: a model's own SLA, NAME=EXPR, e.g. b='p99<=200ms' (repeat).")
@click.option("--sla", "sla_text", type=SLA_TEXT, default=None,
              help="SLA the winner must meet, e.g. 'p99<=50ms' (as in `perf run`; errors==0 is added). Required.")
@click.option("--instances", type=Words(example="1,2,4"), default=None,
              help="Instance counts to try: a list or ranges, e.g. 1,2,4 or 1:8 (START:STOP[:STEP], step 1, or "
                   "x2 to double; default: the model's).")
@click.option("--max-batch-size", "max_batch", type=Words(example="1,4,8"), default=None,
              help="Max batch sizes to try, e.g. 1,4,8 or 1:64:x2 (turns the dynamic batcher on, 0 ms window, "
                   "unless --batch-window says otherwise).")
@click.option("--batch-window", type=Words(example="0,5ms"), default=None,
              help="Dynamic batching windows to try, e.g. 0,5ms,10ms or 0:20ms:5ms ('off': no dynamic batcher).")
@click.option("--preferred-batch", type=Words(example="none,max"), default=None,
              help="Preferred batch size options: none, a size, sizes joined by + (2+8), or max.")
@click.option("--max-queue-size", "queue_sizes", type=Words(example="0,16,64"), default=None,
              help="Queue policy: most requests waiting, e.g. 0,16,64 or 8:64:x2 (0: unbounded); more are rejected. "
                   "Allow a share with an SLA term such as rejected<=1%.")
@click.option("--queue-timeout", "queue_timeouts", type=Words(example="off,10ms"), default=None,
              help="Queue policy: a request waiting longer is rejected, e.g. off,10ms,50ms.")
@click.option("--pin", "pins", type=Words(example="instances=2"), multiple=True,
              help="Hold a knob at one value, [MODEL.]KNOB=VALUE (repeat): for every model, one swept model, or "
                   "with --target a composing model loaded so, e.g. --pin preprocessing.instances=2. KNOB: "
                   "instances, max_batch_size, batch_window, preferred_batch, max_queue_size, queue_timeout.")
@click.option("--concurrency", type=levels_type("concurrency"), default=None, help="Load ladder: '1,2,4,8', '1:64' (doubling). Default 1:8.")
@click.option("--request-rate", type=levels_type("request_rate"), default=None, help="Request-rate ladder (req/s) instead, e.g. '50:400'.")
@click.option("--window-ms", type=number(SweepSettings, "step_window_ms"), default=_D("step_window_ms"), show_default=True,
              help="perf_analyzer measurement window; a step needs three agreeing windows.")
@click.option("--warmup-s", type=number(SweepSettings, "warmup_s"), default=_D("warmup_s"), show_default=True,
              help="Unrecorded load after each variant is loaded.")
@click.option("--exhaustive", is_flag=True, help="Measure every variant instead of pruning those that cannot win.")
@click.option("--tie-tolerance", type=number(TOLERANCE_PERCENT), default=100 * _D("tie_tolerance"), show_default=True,
              help="Throughputs within this many percent are a tie (then lower p99, then fewer instances).")
@rate_tolerance_option(_D("rate_tolerance"))
@click.option("--max-gpu-memory-mb", type=number(SweepSettings, "max_gpu_memory_mb"), default=_D("max_gpu_memory_mb"),
              help="A variant whose peak GPU memory (server metrics) is above this does not meet the SLA.")
@click.option("--headroom", type=Percent(), default="0%", show_default=True,
              help="A step meets the SLA only if every bound keeps this margin to its limit, e.g. 20% (p99<=50ms "
                   "is then held at 40 ms), so the winner's load may be lower.")
@click.option("--target", type=Words(check_model_name, example="ensemble"), default=None,
              help="Send the load to this model instead: an ensemble or BLS model that calls MODEL "
                   "(MODEL's instances and batching are swept, the target's config is used as written).")
@click.option("--out", "out_dir", type=UserPath(file_okay=False, path_type=Path), default=None,
              help="Sweep folder (default results/<UTC>-<model>-sweep); re-running into it resumes.")
@click.option("--results-root", type=UserPath(file_okay=False, path_type=Path), default=_D("results_root"),
              show_default=True)
@click.option("--no-write-back", is_flag=True, help="Leave the repository's config.pbtxt as it is.")
@click.option("--input-data", type=Words(example="random"), default=None, help="'zero', 'random', or a perf_analyzer JSON data file.")
@click.option("--shape", "shapes", type=Words(example="INPUT0:3,224,224"), multiple=True, help="Shape of a variable-size input: NAME:D1,D2 (repeat).")
@server_bin_option("tritonserver binary the sweep starts")
@backend_dir_option("Backends the sweep's server loads (measure the backend production serves)")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
@click.option("--quiet", is_flag=True, help="No progress lines on a terminal.")
@cluster_sweep_options
@remote_sweep_options
@engine_sweep_options
@dial_options
def sweep_command(
    names: tuple[str, ...], shares: tuple[str, ...], model_slas: tuple[str, ...], sla_text: str | None,
    instances: str | None, max_batch: str | None,
    batch_window: str | None, preferred_batch: str | None, queue_sizes: str | None, queue_timeouts: str | None,
    pins: tuple[str, ...], concurrency: str | None, request_rate: str | None,
    window_ms: int, warmup_s: float, exhaustive: bool, tie_tolerance: float, rate_tolerance: float,
    max_gpu_memory_mb: float | None, headroom: float, target: str | None, out_dir: Path | None, results_root: Path, no_write_back: bool,
    input_data: str | None, shapes: tuple[str, ...], server_bin: Path | None, backend_dir: Path | None, as_json: bool,
    quiet: bool,
    cluster: str | None = None, node_resources: str | None = None, shared_repo: str | None = None,
    separately: bool = False, **remote: Any,
) -> None:
    """Find the configuration of MODEL (in REPO) that carries the most load within the SLA; with
    several models, the configurations that carry the most together under their joint load.

    One tritonserver serves REPO with explicit model control for the whole sweep; each variant
    is loaded with its config, warmed up, load-tested with the real perf_analyzer from its top
    load down (the first load that meets the SLA is its best) and unloaded (a python-backend
    model whose config declares its tensors, with no auto_complete_config in its model.py, is
    served with auto-complete off: its config is loaded as written, about a second sooner per
    variant). The default config is measured first, then the variant a model of throughput and
    latency over the knobs (fitted as variants are measured) predicts highest, then only variants
    that could still beat the best; the report says why each was measured or skipped.
    --exhaustive measures them all, each climbing its whole ladder. The sweep folder and the model folder are locked
    while it runs. The winner is written into REPO/MODEL/config.pbtxt (the old file kept beside
    it as config.pbtxt.orig-<UTC>) after the report with a throughput-vs-p99 plot is written to
    the sweep folder. Exit status: 0 a configuration meets the SLA, 1 none does, 2 could not
    measure (a variant failed, a folder is locked by another sweep, the disk is full, ...).

    \b
    Example:
      tritonkit perf sweep model_repository resnet --sla 'p99<=50ms' \\
          --instances 1:4 --max-batch-size 1:64:x2 --batch-window 0:20ms:5ms --concurrency 1:32
      tritonkit perf sweep model_repository resnet --sla 'p99<=50ms,rejected<=1%' \\
          --max-batch-size 8 --max-queue-size 0,16,64 --queue-timeout off,20ms
      tritonkit perf sweep model_repository postprocessing --target ensemble \\
          --sla 'p99<=200ms' --instances 1,2,4 --pin preprocessing.instances=2
      tritonkit perf sweep model_repository detector classifier --share detector=2 \\
          --sla 'p99<=50ms' --instances 1,2 --max-batch-size 4,8 --concurrency 2,4,8,16

    With several models, each model's default config and each model swept alone are measured
    too, and the joint winner is compared with both (joint.md in the sweep folder); the load is
    shared by --share, of the total concurrency or --request-rate, and --out resumes.

    With --url HOST:PORT (no REPO), MODEL is swept on a running tritonserver started with
    --model-control-mode=explicit (refused before anything is loaded otherwise): its served config
    is the default, journaled in the sweep folder and loaded back however the sweep ends (Ctrl-C,
    SIGTERM, an error; after a kill, the next sweep into the same --out or --restore does it); the
    winner's config.pbtxt is written under --out, never on the server; --apply leaves it loaded:

    \b
      tritonkit perf sweep resnet --url 10.0.0.9:8001 --sla 'p99<=50ms' --instances 1,2 \\
          --max-batch-size 4,8 --out results/resnet-remote
      tritonkit perf sweep --url 10.0.0.9:8001 --restore --out results/resnet-remote

    With --cluster ADDR (a Ray cluster), each model's sweep runs on a node of the cluster with its
    own server and perf_analyzer, the joint phase of several models on one node after their alone
    sweeps (--separately: each model on its own); results come back into the sweep folder, each
    model's node named (cluster.md), and the winners are written back here last:

    \b
      tritonkit perf sweep model_repository a b c d --cluster 10.0.0.5:6379 --separately \\
          --node-resources GPU=1 --sla 'p99<=50ms' --instances 1,2 --max-batch-size 4,8
    """
    repo, models = split_names(names, remote, sla_text=sla_text, out_dir=out_dir)
    model = models[0] if models else "restore"
    grid = SweepGrid.from_text(pins, instances=instances, max_batch_size=max_batch, batch_window=batch_window,
                               preferred_batch=preferred_batch, max_queue_size=queue_sizes, queue_timeout=queue_timeouts)
    spec = PerfSpec(model=target or model, url="127.0.0.1:8001", input_data=input_data,
                    shapes=PerfSpec.shapes_from_text(shapes))
    settings = SweepSettings(
        sla=load_sla(sla_text) if sla_text is not None else "p99<=1s", grid=grid, concurrency=concurrency, request_rate=request_rate,
        step_window_ms=window_ms, warmup_s=warmup_s, exhaustive=exhaustive, out=out_dir,
        results_root=results_root, write_back=not no_write_back, tie_tolerance=tie_tolerance / 100.0,
        rate_tolerance=rate_tolerance, max_gpu_memory_mb=max_gpu_memory_mb, headroom=headroom, spec=spec, target=target,
        shares={k: float(v) for k, v in _pairs(shares, "--share", number=True).items()} or None,
        model_slas={k: load_sla(v) for k, v in _pairs(model_slas, "--model-sla").items()} or None,
        server_bin=server_bin, backend_dir=backend_dir,
    ).with_out("-".join(models or ("restore",)))
    folder = settings.out_dir(model)
    printer = SweepPrinter(as_json=as_json, quiet=quiet)
    if len(models) > 1 and target is not None:
        raise click.UsageError("--target sweeps one composing model; give one MODEL with it")
    if len(models) == 1 and (shares or model_slas):
        raise click.UsageError("--share and --model-sla are for several models swept together")
    if remote.get("url") is not None:
        with sigterm_as_interrupt():
            run_remote_command(models, settings, {**remote, "cluster": cluster, "node_resources": node_resources,
                                                  "shared_repo": shared_repo, "separately": separately,
                                                  "server_bin": server_bin, "backend_dir": backend_dir},
                               printer=printer, joint=len(models) > 1)
    assert repo is not None  # split_names: a local sweep has its REPO
    if dial_for("*") != PLAIN:  # a sweep of a REPO dials the server it starts, plain on loopback
        raise click.UsageError("--tls, --tls-* and --header go with --url HOST:PORT (a running server)")
    if cluster is None:
        reject_cluster_options(node_resources=node_resources, shared_repo=shared_repo, separately=separately)
    else:
        run_cluster_sweep_command(repo, models, settings, cluster_settings(cluster, node_resources, shared_repo,
                                                                           separately), as_json=as_json, quiet=quiet)
    _run_local(repo, models, settings, printer, folder)


def _run_local(repo: Path, models: tuple[str, ...], settings: SweepSettings, printer: SweepPrinter,
               folder: Path) -> None:
    """The sweep of REPO's models on a server it starts (several models: the joint sweep)."""
    try:
        with sigterm_as_interrupt():
            if len(models) > 1:
                joint = run_joint_sweep(repo, models, settings, on_event=printer.event)
                _print_joint(joint, printer.as_json)
                raise CommandExit(joint.exit_code)
            result = run_sweep(repo, models[0], settings, on_event=printer.event)
    except KeyboardInterrupt:
        click.echo(f"interrupted: finished variants are kept in {folder}; run the same command with "
                   f"--out {shlex.quote(str(folder))} to resume", err=True)
        raise CommandExit(Exit.UNMEASURED) from None
    printer.result(result)
    raise CommandExit(result.exit_code)
