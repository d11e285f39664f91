"""``tritonkit deploy``: Kubernetes manifests, Prometheus rules and a Grafana dashboard."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from tritonkit._fs import path_error
from tritonkit._values import COUNT, GPUS_PER_POD, RAY_WORKERS, check_http_url, excerpt
from tritonkit.cli._common import (
    CommandExit,
    ErrorHandlingGroup,
    UserPath,
    Words,
    echo_json,
    number,
    sla_option,
)
from tritonkit.deploy import (
    AlertOptions,
    DashboardOptions,
    GrpcIngress,
    K8sOptions,
    PodSize,
    RepositoryFacts,
    RepositorySource,
    build_dashboard,
    build_manifests,
    build_rules,
    install_prometheus,
    read_repository,
    render_yaml,
    write_dashboard,
    write_manifests,
    write_rules,
)
from tritonkit.deploy.alerts import limits_text
from tritonkit.deploy.checkov import CHECKOV_VERSION, check_manifest_folder, install_checkov
from tritonkit.deploy.k8s import parse_replicas
from tritonkit.deploy.k8s_options import DEFAULT_NAMESPACE, SCALE_OUT
from tritonkit.deploy.kuberay import JOB_DEADLINE_S, RayClusterOptions, build_ray_cluster, write_ray_cluster
from tritonkit.deploy.source import SCALE_OUT_UTILISATION
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.compare import parse_percent
from tritonkit.perf.judge.sla import SLA, load_sla

_REPO = UserPath(exists=True, file_okay=False, path_type=Path)


def _say(message: str) -> None:
    click.echo(message, err=True)


def _emit(notes: Sequence[str], docs: list[dict[str, Any]], out: Path | None,
          write: Callable[[Path], list[Path]]) -> None:
    """Manifests out: their notes on stderr, then one YAML stream on stdout, or ``write`` into ``out``."""
    for note in notes:
        _say(note)
    if out is None:
        click.echo(render_yaml(docs), nl=False)
        return
    try:
        written = write(out)
    except OSError as exc:  # /proc/x, a read-only or full file system: nothing was half-written
        raise path_error(exc, "write the manifests", getattr(exc, "filename", None) or out) from exc
    for path in written:
        _say(f"wrote {path}")


def _facts(repo: Path | None, models: tuple[str, ...]) -> RepositoryFacts | None:
    return read_repository(repo, models=models) if repo is not None else None


def _sla(text: str | None) -> SLA | None:
    return load_sla(text) if text else None


@click.group("deploy", cls=ErrorHandlingGroup)
def deploy() -> None:
    """Beyond one machine: Kubernetes/KServe manifests, Prometheus rules, a Grafana dashboard.

    Each is generated from the model repository (its configs hold the sweep's winner), the SLA
    and a few options.

    \b
    Example:
      tritonkit deploy k8s model_repository --image nvcr.io/nvidia/tritonserver:24.10-py3 --out k8s/
    """


@deploy.command("k8s")
@click.argument("repo", type=_REPO)
@click.option("--image", type=Words(example="nvcr.io/nvidia/tritonserver:24.10-py3"), required=True,
              help="tritonserver image, pinned: REPO:TAG (not latest) or REPO@sha256:DIGEST.")
@click.option("--name", type=Words(example="triton"), default="triton", show_default=True,
              help="Name of the Deployment, Services, HPA, NetworkPolicy and PodDisruptionBudget.")
@click.option("--namespace", type=Words(example="serving"), default=DEFAULT_NAMESPACE, show_default=True,
              help="Namespace of every object (`default` only when you ask for it).")
@click.option("--gpus", type=number(K8sOptions, "gpus"), default=None,
              help="GPUs per pod [default: 1 when a model asks for a GPU, else 0].")
@click.option("--replicas", type=Words(example="2:8"), default="1:4", show_default=True,
              help="N (fixed) or MIN:MAX (an autoscaler between them).")
@click.option("--repo-uri", type=Words(example="s3://bucket/repo"), default=None, help="Object-store repository (s3://…, gs://…) instead of a volume.")
@click.option("--pvc", type=Words(example="models"), default=None, help="PersistentVolumeClaim holding the repository [default: NAME-models].")
@click.option("--credentials-secret", type=Words(example="triton-creds"), default=None,
              help="Secret with Triton's object-store credential file (key cloud-credentials.json), mounted as a file.")
@sla_option("Sizes the shutdown drain and the queue-time scaling target.")
@click.option("--max-request-s", type=number(K8sOptions, "max_request_s"), default=None, help="Longest request, seconds (drained on shutdown).")
@click.option("--scale-out-at", type=Words(example="65%"), default=f"{SCALE_OUT_UTILISATION:.0%}", show_default=True,
              help="Utilisation at which to add replicas (rule of thumb: 60–70 %, not 100 %).")
@click.option("--concurrency-limit", type=number(K8sOptions, "concurrency_limit"), default=None,
              help="Requests a pod takes at once [default: the models' limits from their configs, summed].")
@click.option("--cpu", type=Words(example="4"), default=None, help="CPU per pod, e.g. 4 or 2500m [default: from the repository's instances].")
@click.option("--memory", type=Words(example="8Gi"), default=None, help="Memory per pod, e.g. 8Gi [default: from model sizes, instances, shm].")
@click.option("--shm-size", type=Words(example="512Mi"), default=None, help="/dev/shm size, e.g. 512Mi [default: from the python models' tensors].")
@click.option("--grpc-ingress", "grpc_ingress_host", type=Words(example="triton.example.com"), default=None,
              help="Host name: add an ingress-nginx Ingress that balances gRPC calls over the pods.")
@click.option("--ingress-tls-secret", type=Words(example="triton-tls"), default=None, help="TLS Secret of the gRPC Ingress [default: NAME-tls].")
@click.option("--prometheus-url", type=Words(check_http_url, example="http://prometheus:9090"), default=K8sOptions.prometheus_url, show_default=True,
              help="Prometheus that KServe's autoscaler (KEDA) queries (with --kserve).")
@click.option("--kserve", is_flag=True, help="An InferenceService on KServe's Triton runtime instead.")
@click.option("--server-version", default=None,
              help="Triton release the image runs (X.Y or an NGC tag) [default: from an NGC image's tag].")
@click.option("--client-shm", is_flag=True,
              help="Let clients register shared memory: adds --allow-client-shm=true where the release needs it "
                   "(2.68+).")
@click.option("--model", "models", type=Words(example="resnet"), multiple=True,
              help="Only these models of the repository (repeatable).")
@click.option("--out", type=UserPath(file_okay=False, path_type=Path), default=None,
              help="Write one file per kind into this folder (default: print one YAML stream).")
def k8s_command(repo: Path, replicas: str, repo_uri: str | None, pvc: str | None, credentials_secret: str | None,
                sla_text: str | None, scale_out_at: str, cpu: str | None, memory: str | None, shm_size: str | None,
                grpc_ingress_host: str | None, ingress_tls_secret: str | None, models: tuple[str, ...],
                out: Path | None, **options: Any) -> None:
    """Kubernetes manifests serving REPO: Deployment, Services, HPA, NetworkPolicy, PDB (or KServe).

    Hardened (non-root, read-only root filesystem, no capabilities, seccomp RuntimeDefault, no
    service-account token), with CPU and memory derived from the repository; a headless Service
    for gRPC clients that balance themselves (dns:///NAME-headless.NAMESPACE.svc.cluster.local:8001,
    round_robin); the HPA scales on pending requests, queue time, GPU utilisation and the alert
    rules' two-of-three signal through prometheus-adapter (whose rules are written too). Every
    name and the image are checked before anything is written.

    \b
    Example:
      tritonkit deploy k8s model_repository --image nvcr.io/nvidia/tritonserver:24.10-py3 \\
          --namespace serving --gpus 1 --replicas 2:8 --sla 'p99<=50ms' --out k8s/
    """
    low, high = parse_replicas(replicas)
    if ingress_tls_secret is not None and grpc_ingress_host is None:
        raise ConfigError("--ingress-tls-secret is the gRPC Ingress's, and there is none",
                          hint="add --grpc-ingress HOST, or drop --ingress-tls-secret")
    ingress = GrpcIngress(grpc_ingress_host, tls_secret=ingress_tls_secret) if grpc_ingress_host is not None else None
    # The other options are named as K8sOptions' fields (image, name, namespace, gpus, kserve, …).
    source = RepositorySource(uri=repo_uri, pvc=pvc, credentials_secret=credentials_secret)
    k8s = K8sOptions(min_replicas=low, max_replicas=high, source=source,
                     size=PodSize(cpu=cpu, memory=memory, shm_size=shm_size), ingress=ingress,
                     scale_out_utilisation=_scale_out(scale_out_at), **options)
    facts = read_repository(repo, models=models)
    manifests = build_manifests(facts, _sla(sla_text), k8s)
    _emit(manifests.notes, manifests.all(), out, lambda folder: write_manifests(manifests, folder))


def _scale_out(text: str) -> float:
    """``--scale-out-at`` as the fraction K8sOptions takes, refused outside 10–100 % naming the option."""
    share = parse_percent(text, option="--scale-out-at")
    if SCALE_OUT.problem(share) is not None:
        raise ConfigError(f"--scale-out-at {excerpt(text)}: a utilisation of {share:.0%} is outside 10 % to 100 %",
                          hint="give the utilisation at which to add replicas, e.g. --scale-out-at 65% (rule of "
                               "thumb: 60–70 %)")
    return share


@deploy.command("ray-cluster")
@click.option("--image", type=Words(example="registry.example.com/tritonkit:0.1.0"), required=True,
              help="Image with tritonkit[cluster,server] and perf_analyzer, pinned: REPO:TAG (not latest) or a digest.")
@click.option("--name", default=RayClusterOptions.name, show_default=True, help="Name of the RayCluster (or RayJob).")
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True, help="Namespace of every object.")
@click.option("--gpu-workers", type=number(RAY_WORKERS), default=RayClusterOptions.gpu_workers, show_default=True,
              help="Workers with GPUs (each sweep starts its own tritonserver and perf_analyzer on one).")
@click.option("--gpus-per-worker", type=number(GPUS_PER_POD), default=RayClusterOptions.gpus_per_worker, show_default=True)
@click.option("--cpu-workers", type=number(RAY_WORKERS), default=RayClusterOptions.cpu_workers, show_default=True,
              help="Workers without GPUs (CPU models' sweeps, load generators for perf run --clients).")
@click.option("--worker-cpu", default=RayClusterOptions.worker_cpu, show_default=True, help="CPU per worker.")
@click.option("--worker-memory", default=RayClusterOptions.worker_memory, show_default=True, help="Memory per worker.")
@click.option("--head-cpu", default=RayClusterOptions.head_cpu, show_default=True, help="CPU of the head (the driver).")
@click.option("--head-memory", default=RayClusterOptions.head_memory, show_default=True)
@click.option("--object-store", default=RayClusterOptions.object_store, show_default=True,
              help="/dev/shm per worker: Ray's object store (model folders travel through it) and the python backend.")
@click.option("--tmp-size", default=RayClusterOptions.tmp_size, show_default=True,
              help="/tmp per pod: Ray's session, sweep folders, model folders sent to the node.")
@click.option("--pvc", default=None, help="Claim holding the model repository, mounted at /models on every pod.")
@click.option("--job", default=None, metavar="'perf sweep …'",
              help="A RayJob instead: run this tritonkit command on the cluster it brings up (--cluster auto added).")
@click.option("--job-deadline-s", type=number(JOB_DEADLINE_S), default=None, help="The RayJob's activeDeadlineSeconds.")
@click.option("--out", type=UserPath(file_okay=False, path_type=Path), default=None,
              help="Write raycluster.yaml (or rayjob.yaml) and networkpolicy.yaml here (default: print one stream).")
def ray_cluster_command(out: Path | None, **options: Any) -> None:
    """A KubeRay RayCluster (or RayJob for one sweep) for tritonkit's image, with GPU worker groups.

    Hardened like `deploy k8s` (non-root UID 10001, read-only root with bounded /tmp and /dev/shm,
    no capabilities, seccomp RuntimeDefault, no service-account token, requests = limits), the
    probes KubeRay injects written out, a NetworkPolicy admitting only the cluster's own pods (and
    pods labelled tritonkit/ray-client-of: NAME to the head's ports); the fields are the ones
    KubeRay v1.7.0 accepts. `deploy check` scans the pods KubeRay builds from it.

    \b
    Example:
      tritonkit deploy ray-cluster --image registry.example.com/tritonkit:0.1.0 --gpu-workers 4 \\
          --pvc models --job "perf sweep /models a b c d --separately --shared-repo /models --sla 'p99<=50ms'" \\
          --out ray/
    """
    manifests = build_ray_cluster(RayClusterOptions(**options))
    _emit(manifests.notes, manifests.all(), out, lambda folder: write_ray_cluster(manifests, folder))


@deploy.command("check")
@click.argument("folder", type=UserPath(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check_command(folder: Path, as_json: bool) -> None:
    """Run checkov's Kubernetes checks on the manifests in FOLDER (as `deploy k8s --out` wrote them).

    Exit 0 when every failed check is on the accepted list (each with its reason), 1 otherwise.

    \b
    Example:
      tritonkit deploy k8s model_repository --image nvcr.io/nvidia/tritonserver:24.10-py3 --out k8s/
      tritonkit deploy check k8s/
    """
    check = check_manifest_folder(folder)
    report = check.report
    if as_json:
        echo_json(check.to_dict())
    else:
        click.echo(f"checkov {report.version}: {report.passed} passed, {len(report.failed)} failed "
                   f"({len(check.not_accepted)} not accepted) on {report.resources} resources")
        for f in report.failed:
            why = check.reason(f)
            click.echo(f"  {f.check_id} {f.resource}: {f.check_name}" + (f" — accepted: {why}" if why else ""))
    raise CommandExit(check.exit_code)


@deploy.command("alerts")
@click.argument("repo", type=_REPO, required=False)
@sla_option("Each term a server metric answers becomes an alert.")
@click.option("--concurrency-limit", type=number(COUNT), default=None,
              help="Requests a model takes at once [default: from each config: max_queue_size, "
                   "else instances × max batch].")
@click.option("--gpu-utilisation", type=Words(example="85%"), default="85%", show_default=True, help="GPU utilisation alert threshold.")
@click.option("--gpu-for", type=Words(example="5m"), default="5m", show_default=True, help="How long GPU utilisation must stay above it.")
@click.option("--p99-for", type=Words(example="3m"), default="3m", show_default=True, help="How long p99 must stay above the SLA.")
@click.option("--queue-fraction", type=Words(example="50%"), default="50%", show_default=True,
              help="Queue depth alert, as a share of the concurrency limit.")
@click.option("--queue-for", type=Words(example="5m"), default="5m", show_default=True, help="How long the queue must stay that deep.")
@click.option("--for", "sla_for", type=Words(example="3m"), default="3m", show_default=True, help="`for:` of the other SLA-term alerts.")
@click.option("--rate-window", type=Words(example="2m"), default="2m", show_default=True, help="Window of rate() (≥ 4 scrape intervals).")
@click.option("--job", type=Words(example="triton"), default=None, help="Restrict every rule to this Prometheus scrape job.")
@click.option("--model", "models", type=Words(example="resnet"), multiple=True,
              help="Only these models of REPO (repeatable).")
@click.option("--out", type=UserPath(dir_okay=False, path_type=Path), default=None,
              help="Write the rule file here (default: print it).")
@click.option("--json", "as_json", is_flag=True, help="Print the SLA-term mapping as JSON.")
def alerts_command(repo: Path | None, sla_text: str | None, concurrency_limit: int | None, gpu_utilisation: str,
                   gpu_for: str, p99_for: str, queue_fraction: str, queue_for: str, sla_for: str,
                   rate_window: str, job: str | None, models: tuple[str, ...], out: Path | None,
                   as_json: bool) -> None:
    """Prometheus alerting and recording rules from the SLA, on Triton's own metrics.

    GPU utilisation above 85 % for 5 minutes; p99 above the SLA for 3 minutes; queue depth above
    half the concurrency limit for 5 minutes; a recording rule (tritonkit:scale_out) and an alert
    when two of the three hold. Other SLA terms become alerts where a server metric answers them.
    The server needs --metrics-config=summary_latencies=true for percentiles.

    \b
    Example:
      tritonkit deploy alerts model_repository --sla 'p99<=50ms,errors==0' --out triton-rules.yml
      promtool check rules triton-rules.yml
    """
    options = AlertOptions(
        gpu_utilisation=parse_percent(gpu_utilisation, option="--gpu-utilisation"), gpu_for=gpu_for,
        p99_for=p99_for, queue_fraction=parse_percent(queue_fraction, option="--queue-fraction"),
        queue_for=queue_for, sla_for=sla_for, rate_window=rate_window, concurrency_limit=concurrency_limit, job=job,
    )
    facts = _facts(repo, models)
    rules = build_rules(_sla(sla_text), facts, options)
    if as_json:
        echo_json({**rules.mapping_dict(), "path": str(out) if out else None})
    if facts is not None and not as_json:
        for line in limits_text(facts, options):
            _say(line)
    if out is None:
        if not as_json:
            click.echo(rules.render(), nl=False)
        return
    write_rules(rules, out)
    if not as_json:
        for m in rules.unmapped:
            _say(f"no alert for {m.term}: {m.note}")
        _say(f"wrote {out} ({len(rules.alert_names)} alerts); the server needs "
             "--metrics-config=summary_latencies=true for percentiles")


@deploy.command("dashboard")
@click.argument("repo", type=_REPO, required=False)
@sla_option("Its p99 is drawn as a line.")
@click.option("--device", type=click.Choice(["gpu", "cpu"]), default="gpu", show_default=True,
              help="Show GPU or CPU utilisation and memory.")
@click.option("--llm", is_flag=True, help="Add the TensorRT-LLM row (automatic when REPO has a tensorrtllm model).")
@click.option("--job", type=Words(example="triton"), default=None, help="Restrict every query to this Prometheus scrape job.")
@click.option("--title", type=Words(example="Triton"), default="Triton Inference Server", show_default=True, help="Dashboard title.")
@click.option("--out", type=UserPath(dir_okay=False, path_type=Path), default=None,
              help="Write the dashboard JSON here (default: print it).")
def dashboard_command(repo: Path | None, sla_text: str | None, device: str, llm: bool, job: str | None,
                      title: str, out: Path | None) -> None:
    """A Grafana dashboard: throughput, latency percentiles, queue time, in-flight, GPU, per model.

    \b
    Example:
      tritonkit deploy dashboard model_repository --sla 'p99<=50ms' --out triton-dashboard.json
    """
    options = DashboardOptions(title=title, device="cpu" if device == "cpu" else "gpu", llm=llm, job=job)
    dashboard = build_dashboard(_facts(repo, ()), options, _sla(sla_text))
    if out is None:
        click.echo(json.dumps(dashboard, indent=2))
        return
    write_dashboard(dashboard, out)
    _say(f"wrote {out} ({sum(1 for p in dashboard['panels'] if p['type'] != 'row')} panels)")


@deploy.command("install-checkov")
@click.option("--force", is_flag=True, help="Install again even when installed.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def install_checkov_command(force: bool, quiet: bool) -> None:
    """checkov (pinned) in its own venv under this environment's share/tritonkit/checkov. Idempotent.

    \b
    Example:
      tritonkit deploy install-checkov
    """
    installed = install_checkov(force=force, progress=None if quiet else _say)
    click.echo(f"checkov {CHECKOV_VERSION}: {installed}")


@deploy.command("install-prometheus")
@click.option("--force", is_flag=True, help="Fetch again even when installed.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def install_prometheus_command(force: bool, quiet: bool) -> None:
    """Prometheus and promtool from Debian's package, unpacked into this environment.

    Never touches the system's packages or apt state and starts no service. Idempotent.

    \b
    Example:
      tritonkit deploy install-prometheus
    """
    installed = install_prometheus(force=force, progress=None if quiet else _say)
    click.echo(installed.describe())


COMMANDS: list[click.Command] = [deploy]
