"""RunSpec: validation messages name the field; JSON/YAML round trip; overrides."""

from __future__ import annotations

import json

import pytest

from dpfl.errors import SpecError
from dpfl.spec import RunSpec, load_spec, parse_spec

YAML = """
algorithm: isrl_mbsgd
params: {lr: 0.5, batch_size: 128, clip: 1.0}
dataset: {name: mnist, silos: 25, partition: {kind: shards, labels_per_silo: 2}, features: {pca: 50}}
model: {name: mlp, hidden: [64]}
rounds: 50
participation: 25
privacy: {epsilon: 3.0, delta: 1.0e-5, accountant: rdp}
eval_every: 1
seed: 0
"""


def test_yaml_example_parses_and_round_trips():
    spec = load_spec(YAML)
    assert spec.dataset.partition.options() == {"labels_per_silo": 2}
    assert spec.model.options() == {"hidden": [64]}
    again = parse_spec(json.loads(json.dumps(spec.to_json())))
    assert again == spec
    assert again.digest() == spec.digest()


def test_overrides_apply_and_are_validated():
    spec = load_spec(YAML, overrides=["rounds=5", "privacy.epsilon=1", "model.hidden=[32, 16]"])
    assert (spec.rounds, spec.privacy.epsilon, spec.model.options()["hidden"]) == (5, 1.0, [32, 16])
    with pytest.raises(SpecError, match=r"^`rounds` input should be greater than or equal to 1; got 0\.$"):
        load_spec(YAML, overrides=["rounds=0"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("privacy.delta=1.5", "`privacy.delta` input should be less than 1; got 1.5."),
        ("privacy.epsilon=-1", "`privacy.epsilon` input should be greater than 0; got -1."),
        ("rounds=100000", "`rounds` input should be less than or equal to 10000; got 100000."),
        ("dataset.silos=0", "`dataset.silos` input should be greater than or equal to 1; got 0."),
        ("dataset.partition.alpha=0", "`dataset.partition.alpha` input should be greater than 0; got 0."),
        ("privacy.sigma=1", "`privacy.sigma` is not a known field."),
        ("epochs=3", "`epochs` is not a known field."),
        ("participation=30", "`participation` must be ≤ `dataset.silos` (25); got 30."),
        (
            "privacy.noise_multiplier=1.1",
            "`privacy` must have exactly one of `epsilon` (σ is calibrated), `mu` (μ-GDP target) and "
            "`noise_multiplier` (ε is projected).",
        ),
    ],
)
def test_bad_values_name_the_field(override, message):
    with pytest.raises(SpecError) as info:
        load_spec(YAML, overrides=[override])
    assert str(info.value) == message


def test_missing_algorithm_is_named():
    with pytest.raises(SpecError, match=r"^`algorithm` is required\.$"):
        parse_spec({"rounds": 3})


def test_not_a_mapping():
    with pytest.raises(SpecError, match="must be a mapping of fields; got list"):
        load_spec("- 1\n- 2\n")


def test_spec_is_hashable_and_frozen():
    spec = load_spec(YAML)
    assert hash(spec) == hash(load_spec(YAML))
    with pytest.raises(Exception, match="frozen"):
        spec.rounds = 3  # type: ignore[misc]
    assert isinstance(spec, RunSpec)


# --- strict types (issue 17, item 9): a string or a bool is never a number --------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rounds": "2"}, "`rounds` input should be a valid integer; got '2'."),
        ({"rounds": True}, "`rounds` input should be a valid integer; got True."),
        ({"rounds": 2.5}, "`rounds` input should be a valid integer; got 2.5."),
        ({"seed": "0"}, "`seed` input should be a valid integer; got '0'."),
        ({"eval_every": False}, "`eval_every` input should be a valid integer; got False."),
        ({"dataset": {"silos": "4"}}, "`dataset.silos` input should be a valid integer; got '4'."),
        ({"privacy": {"epsilon": "3"}}, "`privacy.epsilon` input should be a valid number; got '3'."),
        ({"privacy": {"epsilon": True}}, "`privacy.epsilon` input should be a valid number; got True."),
        (
            {"privacy": {"epsilon": 1.0, "delta": "1e-5"}},
            "`privacy.delta` input should be a valid number; got '1e-5'.",
        ),
        (
            {"dataset": {"partition": {"kind": "dirichlet", "alpha": "0.5"}}},
            "`dataset.partition.alpha` input should be a valid number; got '0.5'.",
        ),
    ],
)
def test_strings_and_bools_are_not_numbers(data, message):
    with pytest.raises(SpecError) as info:
        parse_spec({"algorithm": "isrl_mbsgd", "privacy": {"epsilon": 1.0}} | data)
    assert str(info.value) == message


def test_an_int_is_a_float_and_yaml_exponents_are_numbers():
    spec = parse_spec({"algorithm": "isrl_mbsgd", "privacy": {"epsilon": 3, "delta": 1e-5}})
    assert spec.privacy.epsilon == 3.0 and isinstance(spec.privacy.epsilon, float)
    # YAML 1.1 reads 1e-5 (no dot) as a string; specs read it as the number everyone means
    spec = load_spec(YAML.replace("delta: 1.0e-5", "delta: 1e-5"), overrides=["privacy.epsilon=2e0"])
    assert (spec.privacy.delta, spec.privacy.epsilon) == (1e-5, 2.0)
    with pytest.raises(SpecError, match=r"^`rounds` input should be a valid integer; got '5'\.$"):
        load_spec(YAML, overrides=["rounds='5'"])


def test_every_config_still_loads():
    from pathlib import Path

    configs = sorted((Path(__file__).resolve().parents[2] / "configs").rglob("*.yaml"))
    assert len(configs) >= 8
    for path in configs:
        assert isinstance(load_spec(path.read_text()), RunSpec), path
