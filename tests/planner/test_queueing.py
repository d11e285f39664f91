"""The queueing model: closed-form answers for a model of known cost, fitting, predicting and checking."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError, PlanError
from tritonkit.perf import PerfResult
from tritonkit.perf.measure import LatencyStats, RunMetadata, ServerBreakdown, StepMetrics, StepResult
from tritonkit.planner import (
    Measurement,
    Scenario,
    ServedConfig,
    ServiceModel,
    Workload,
    check_predictions,
    fit_service_model,
    load_measurement,
    load_predictions,
    plan_from_measurement,
    predict_loads,
    simulate,
)

# Known cost: 5 ms per execution + 2 ms per batch item, 1 ms outside the model, no spread.
KNOWN = ServiceModel(fixed_ms=5.0, per_item_ms=2.0, overhead_ms=1.0, cv=0.0)


def test_without_batching_and_enough_instances_nothing_queues() -> None:
    # N = 2 clients, 2 instances: X = N / (overhead + S(1)) = 2 / 8 ms = 250/s, latency 8 ms.
    sim = simulate(KNOWN, Scenario(2, 8, None), load_mode="concurrency", load_value=2)
    assert sim.throughput_per_s == pytest.approx(250.0) and sim.p99_ms == pytest.approx(8.0)


def test_without_batching_saturated_instances_serve_one_request_per_service_time() -> None:
    # N = 10 ≫ k = 2: X = k / S(1) = 2 / 7 ms; closed loop, so latency = N / X (Little's law).
    sim = simulate(KNOWN, Scenario(2, 8, None), load_mode="concurrency", load_value=10)
    assert sim.throughput_per_s == pytest.approx(2000 / 7, rel=1e-3)
    assert sim.mean_ms == pytest.approx(10 / (2 / 7), rel=1e-2)


def test_a_window_long_enough_to_gather_every_client_runs_full_batches() -> None:
    # N = B = 4, window 50 ms: the clients gather into one full batch: X = 4 / (1 + 5 + 2·4) ms.
    sim = simulate(KNOWN, Scenario(1, 4, 50_000), load_mode="concurrency", load_value=4)
    assert sim.items_per_exec == pytest.approx(4.0)
    assert sim.throughput_per_s == pytest.approx(4000 / 14)


def test_without_a_window_clients_that_return_apart_never_merge() -> None:
    # N = 4, window 0, clients started apart: whoever is queued leaves at once, so batches stay
    # split (as on a real server, where a straggler splits a batch for good): fewer than 4 per batch.
    sim = simulate(KNOWN, Scenario(1, 8, 0), load_mode="concurrency", load_value=4)
    assert 1.0 <= sim.items_per_exec < 4.0
    assert sim.throughput_per_s < 4000 / 14


def test_a_saturated_batcher_runs_full_batches() -> None:
    # N = 64 ≫ B = 8: X = B / S(B) = 8 / 21 ms.
    sim = simulate(KNOWN, Scenario(1, 8, 0), load_mode="concurrency", load_value=64)
    assert sim.items_per_exec == pytest.approx(8.0)
    assert sim.throughput_per_s == pytest.approx(8000 / 21, rel=1e-3)


def test_a_batching_window_is_waited_in_full_when_the_batch_cannot_fill() -> None:
    # N = 1 < B, window 3 ms: cycle = 1 + 3 + S(1) = 11 ms.
    sim = simulate(KNOWN, Scenario(1, 8, 3000), load_mode="concurrency", load_value=1)
    assert sim.p50_ms == pytest.approx(11.0) and sim.throughput_per_s == pytest.approx(1000 / 11)


def test_poisson_arrivals_on_one_instance_match_pollaczek_khinchine() -> None:
    # M/D/1, S = 7 ms, λ = 50/s → ρ = 0.35, W = ρS / (2(1 − ρ)) = 1.885 ms; latency = 1 + 7 + W.
    model = ServiceModel(7.0, 0.0, 1.0, 0.0)
    sim = simulate(model, Scenario(1, 1, None), load_mode="request_rate", load_value=50, arrivals="poisson",
                   requests=40000)
    assert sim.mean_ms == pytest.approx(1 + 7 + 0.35 * 7 / (2 * 0.65), rel=0.03)
    assert sim.throughput_per_s == pytest.approx(50, rel=0.03)


def test_constant_arrivals_below_capacity_never_queue() -> None:
    model = ServiceModel(7.0, 0.0, 1.0, 0.0)
    sim = simulate(model, Scenario(1, 1, None), load_mode="request_rate", load_value=100)
    assert sim.p99_ms == pytest.approx(8.0)


def test_the_simulation_is_deterministic_for_a_seed() -> None:
    spread = ServiceModel(5.0, 2.0, 1.0, 0.3)
    a = simulate(spread, Scenario(1, 8, 2000), load_mode="concurrency", load_value=8)
    b = simulate(spread, Scenario(1, 8, 2000), load_mode="concurrency", load_value=8)
    assert a == b and a.p99_ms > a.p50_ms


def _synthetic_run(model: ServiceModel, scenario: Scenario, levels: list[float]) -> PerfResult:
    """A PerfResult whose steps carry what the simulation of ``model`` measured, as perf would record it."""
    steps = []
    for level in levels:
        sim = simulate(model, scenario, load_mode="concurrency", load_value=level)
        service_us = sim.service_ms_per_request * 1000  # perf reports compute time per request
        queue_us = (sim.mean_ms - model.overhead_ms) * 1000 - service_us
        steps.append(StepResult(
            load_mode="concurrency", load_value=level, throughput_per_s=sim.throughput_per_s,
            latency=LatencyStats(p50_ms=sim.p50_ms, p90_ms=sim.p99_ms, p95_ms=sim.p99_ms, p99_ms=sim.p99_ms,
                                 mean_ms=sim.mean_ms),
            server=ServerBreakdown(queue_us=queue_us, compute_input_us=0.0, compute_infer_us=service_us,
                                   compute_output_us=0.0),
            metrics=StepMetrics(raw={"nv_inference_count": 1000.0 * sim.items_per_exec,
                                     "nv_inference_exec_count": 1000.0}),
        ))
    return PerfResult(metadata=RunMetadata(model="cost", url="127.0.0.1:8001", protocol="grpc",
                                           started_utc="2026-11-30T10:00:00Z", generator_cpu_count=2), steps=steps)


def _measure(result: PerfResult, folder: Path) -> Measurement:
    return load_measurement(result.save(folder / "result.json"), config=ServedConfig(8, 1, 0, "config.pbtxt"))


def test_fitting_a_ladder_of_a_known_cost_recovers_the_cost(tmp_path: Path) -> None:
    scenario = Scenario(1, 8, 0)
    m = _measure(_synthetic_run(KNOWN, scenario, [1, 2, 4]), tmp_path)
    fitted = fit_service_model(m.steps, scenario)
    assert fitted.fixed_ms == pytest.approx(5.0, rel=0.05)
    assert fitted.per_item_ms == pytest.approx(2.0, rel=0.05)
    assert fitted.overhead_ms == pytest.approx(1.0, rel=0.02)
    assert fitted.cv == 0.0 and fitted.overhead_cv == 0.0


def test_a_fit_over_one_batch_size_says_the_per_item_cost_is_unknown(tmp_path: Path) -> None:
    scenario = Scenario(1, 1, None)
    m = _measure(_synthetic_run(KNOWN, scenario, [1, 4]), tmp_path)
    fitted = fit_service_model(m.steps, scenario)
    assert fitted.per_item_ms == 0.0 and fitted.fixed_ms == pytest.approx(7.0)
    assert any("cannot be separated" in n for n in fitted.notes)


def test_a_run_without_server_timings_cannot_be_fitted(tmp_path: Path) -> None:
    result = _synthetic_run(KNOWN, Scenario(1, 8, 0), [1])
    result.steps[0].server = ServerBreakdown()
    m = _measure(result, tmp_path)
    with pytest.raises(PlanError, match="compute time"):
        fit_service_model(m.steps, Scenario(1, 8, 0))


def test_predictions_for_a_model_of_known_cost_match_the_closed_form_and_check_clean(tmp_path: Path) -> None:
    served = ServedConfig(8, 1, 0, "config.pbtxt")
    calib = _measure(_synthetic_run(KNOWN, Scenario(1, 8, 0), [1, 2, 4]), tmp_path)
    predictions = predict_loads(calib, config=served, loads=[("concurrency", 64.0)], instances=[2])
    one, two = predictions.predictions
    # Fitted from a noiseless ladder at concurrency ≤ 4, the saturated answer is B / S(B) to within 2 %.
    assert one.throughput_per_s == pytest.approx(8000 / 21, rel=0.02)
    assert two.throughput_per_s == pytest.approx(2 * 8000 / 21, rel=0.02)  # two instances, both saturated
    assert any("closed loop" in a for a in predictions.assumptions)
    saved = predictions.save(tmp_path / "pred.json")
    assert load_predictions(saved) == predictions
    later = load_measurement(_synthetic_run(KNOWN, Scenario(1, 8, 0), [64]).save(tmp_path / "later.json"))
    check = check_predictions(predictions, later, Scenario(1, 8, 0))
    assert {r.figure for r in check.rows} == {"throughput_per_s", "p50_ms", "p99_ms"}
    worst = check.worst("throughput_per_s")
    assert worst is not None and worst < 0.02  # the fitted cost is the true one, to the fit's precision
    assert "worst |error| throughput_per_s" in check.render_text()


def test_checking_names_the_error_per_figure_when_reality_differs(tmp_path: Path) -> None:
    served = ServedConfig(8, 1, 0, "config.pbtxt")
    calib = _measure(_synthetic_run(KNOWN, Scenario(1, 8, 0), [1, 2, 4]), tmp_path)
    predictions = predict_loads(calib, config=served, loads=[("concurrency", 16.0)])
    slower = ServiceModel(5.0, 2.5, 1.0, 0.0)  # the real per-item cost was 25 % higher
    later = load_measurement(_synthetic_run(slower, Scenario(1, 8, 0), [16]).save(tmp_path / "later.json"))
    check = check_predictions(predictions, later, None)
    row = next(r for r in check.rows if r.figure == "throughput_per_s")
    assert row.error == pytest.approx((21 / 25) ** -1 - 1, abs=0.03)  # predicted 8/21 ms vs measured 8/25 ms


def test_checking_several_scenarios_needs_the_new_runs_config(tmp_path: Path) -> None:
    served = ServedConfig(8, 1, 0, "config.pbtxt")
    calib = _measure(_synthetic_run(KNOWN, Scenario(1, 8, 0), [1, 2, 4]), tmp_path)
    predictions = predict_loads(calib, config=served, loads=[("concurrency", 16.0)], windows_us=[5000])
    later = load_measurement(_synthetic_run(KNOWN, Scenario(1, 8, 0), [16]).save(tmp_path / "later.json"))
    with pytest.raises(ConfigError, match="which one did the new run measure"):
        check_predictions(predictions, later, None)
    with pytest.raises(PlanError, match="no prediction was made"):
        check_predictions(predictions, later, Scenario(4, 8, 0))


def test_saved_predictions_that_are_not_predictions_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text('{"kind": "measured"}')
    with pytest.raises(ConfigError, match="holds no predictions"):
        load_predictions(path)


def test_a_lower_bound_plan_also_shows_the_ceiling_the_fitted_model_predicts(tmp_path: Path) -> None:
    m = _measure(_synthetic_run(KNOWN, Scenario(1, 8, 0), [1, 2, 4]), tmp_path)
    plan = plan_from_measurement(m, Workload(target_qps=1000))
    assert plan.value("qps_per_unit_at_least") < 8000 / 21
    assert plan.value("qps_per_unit_predicted_ceiling") == pytest.approx(8000 / 21, rel=0.02)  # B / S(B)
    assert plan.line("qps_per_unit_predicted_ceiling").basis == "theory"
    assert plan.value("gpus_needed") > 1000 / (8000 / 21)  # the fleet still rests on what was measured
