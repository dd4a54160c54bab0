"""CEL selectors (reconciler.dra.cel) against the example DeviceClasses and ResourceSlice."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.dra import cel
from reconciler.dra.quantity import format_quantity, parse_quantity, quantity_or_none
from reconciler.dra.selectors import evaluate_selectors

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "dra-examples" / "v1"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


@pytest.fixture(scope="module")
def devices() -> list[dict[str, Any]]:
    (slice_,) = _docs("07-resourceslice.yaml")
    driver = slice_["spec"]["driver"]
    return [
        cel.device_context(driver, d.get("attributes"), d.get("capacity")) for d in slice_["spec"]["devices"]
    ]


@pytest.fixture(scope="module")
def classes() -> dict[str, list[str]]:
    return {
        d["metadata"]["name"]: [s["cel"]["expression"] for s in d["spec"]["selectors"]]
        for d in _docs("01-deviceclasses.yaml")
    }


def test_example_class_selectors_match_example_devices(
    devices: list[dict[str, Any]], classes: dict[str, list[str]]
) -> None:
    for dev in devices:
        for name, exprs in classes.items():
            assert [cel.evaluate(expr, dev) for expr in exprs] == [True] * len(exprs), name


def test_request_selector_from_template(devices: list[dict[str, Any]]) -> None:
    (tmpl,) = [d for d in _docs("02-claimtemplate-deployment.yaml") if d["kind"] == "ResourceClaimTemplate"]
    expr = tmpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"]
    assert cel.evaluate(expr, devices[0]) is True


def test_attribute_names_are_qualified_with_the_driver(devices: list[dict[str, Any]]) -> None:
    assert devices[0]["attributes"]["gpu.example.com"]["model"] == "LATEST-GPU-MODEL"
    assert cel.evaluate("device.attributes['gpu.example.com'].index == 0", devices[0]) is True
    ctx = cel.device_context("d.example.com", {"other.org/kind": {"string": "x"}, "plain": {"bool": True}})
    assert cel.evaluate("device.attributes['other.org'].kind == 'x'", ctx) is True
    assert cel.evaluate("device.attributes['d.example.com'].plain", ctx) is True


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("device.driver == 'gpu.example.com'", True),
        ("device.driver == 'other'", False),
        ("device.driver.startsWith('gpu.')", True),
        ("device.attributes['gpu.example.com'].model in ['A', 'LATEST-GPU-MODEL']", True),
        ("device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0", True),
        ("device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) == 0", True),
        ("device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('100Gi'))", False),
        ("device.capacity['gpu.example.com'].memory.isLessThan(quantity('0.1Ti'))", True),
        ("device.capacity['gpu.example.com'].memory == quantity('81920Mi')", True),
        ("device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('0.9.9'))", True),
        ("device.attributes['gpu.example.com'].driverVersion.isLessThan(semver('1.0.0'))", False),
        ("device.attributes['gpu.example.com'].driverVersion.compareTo(semver('1.0.0-rc.1')) > 0", True),
        ("device.attributes['gpu.example.com'].driverVersion.major() == 1", True),
        ("device.attributes['gpu.example.com'].driverVersion == semver('1.0.0')", True),
        ("has(device.attributes['gpu.example.com'].model)", True),
        ("has(device.attributes['gpu.example.com'].nothere)", False),
        ("device.attributes['other.domain'].model == 'x' || true", True),
        ("device.allowMultipleAllocations", False),
        ("quantity('500m').asApproximateFloat() == 0.5", True),
        ("isQuantity('1Gi') && !isQuantity('1 Gi')", True),
    ],
)
def test_expressions(devices: list[dict[str, Any]], expr: str, expected: bool) -> None:
    assert cel.evaluate(expr, devices[0]) is expected


@pytest.mark.parametrize(
    "expr",
    [
        "device.driver ==",  # syntax error
        "device.attributes['gpu.example.com'].nothere == 'x'",  # no such key
        "device.driver.someUnknownFunction()",  # unsupported extension
        "device.capacity['gpu.example.com'].memory.compareTo(1) > 0",  # type error in an extension
        "quantity('not a quantity') == quantity('1')",
        "device.attributes['gpu.example.com'].index",  # not a bool
        "undefinedVariable == 1",
    ],
)
def test_unknown_never_raises(devices: list[dict[str, Any]], expr: str) -> None:
    assert cel.evaluate(expr, devices[0]) is None


def test_unknown_anded_with_false_is_false(devices: list[dict[str, Any]]) -> None:
    def anded(exprs: list[str]) -> object:
        return evaluate_selectors("c", exprs, [], devices[0])

    assert anded(["device.driver == 'x'", "device.driver.nope()"]) is False
    assert anded(["device.driver.nope()", "device.driver == 'x'"]) is False
    assert anded(["device.driver.nope()", "true"]) is None


def test_compiled_once() -> None:
    a = cel.compile_selector("device.driver == 'cache-me'")
    b = cel.compile_selector("device.driver == 'cache-me'")
    assert a is b and a.ok
    bad = cel.compile_selector("device.driver ==")
    assert not bad.ok and bad.error


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("40Gi", Fraction(40 * 2**30)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("500m", Fraction(1, 2)),
        ("1k", Fraction(1000)),
        ("2M", Fraction(2_000_000)),
        ("3G", Fraction(3 * 10**9)),
        ("1Ki", Fraction(1024)),
        ("10Mi", Fraction(10 * 2**20)),
        ("0.25", Fraction(1, 4)),
        ("1e3", Fraction(1000)),
        ("-2", Fraction(-2)),
        (7, Fraction(7)),
    ],
)
def test_parse_quantity(text: str | int, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1 Gi", "Gi", "1.2.3", "1GiB", "abc"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_format_quantity_round_trips() -> None:
    for text in ("80Gi", "500m", "1000", "3Mi"):
        assert parse_quantity(format_quantity(parse_quantity(text))) == parse_quantity(text)
    assert format_quantity(parse_quantity("80Gi")) == "80Gi"


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("40Gi", Fraction(40 * 2**30)),
        ({"value": "500m"}, Fraction(1, 2)),  # a capacity or counter entry
        ({"value": 3, "requestPolicy": {}}, Fraction(3)),
        (None, None),
        ({}, None),
        ("1 Gi", None),
        (True, None),
        ([1], None),
    ],
)
def test_quantity_or_none_reads_entries_and_never_raises(raw: object, value: Fraction | None) -> None:
    assert quantity_or_none(raw) == value


def test_semver_ordering() -> None:
    assert cel.parse_semver("1.0.0-alpha").key() < cel.parse_semver("1.0.0-alpha.1").key()
    assert cel.parse_semver("1.0.0-rc.1").key() < cel.parse_semver("1.0.0").key()
    assert cel.parse_semver("1.2.3").key() < cel.parse_semver("1.10.0").key()
    with pytest.raises(ValueError):
        cel.parse_semver("1.2")


def test_unparsable_device_values_raise_valueerror() -> None:
    with pytest.raises(ValueError):
        cel.device_context("d", {}, {"memory": {"value": "lots"}})


GPU_DEVICE = cel.device_context(
    "gpu.example.com", {"model": {"string": "LATEST-GPU-MODEL"}}, {"memory": {"value": "80Gi"}}
)


@pytest.mark.parametrize(
    ("expr", "message", "key"),
    [
        (
            'device.attributes["gpu.example.com"].productName == "H200"',
            "no such key: productName",
            "productName",
        ),
        # a domain the device does not publish reads as an empty map: the attribute is the missing key
        ('device.attributes["gpu.nvidia.com"].type == "gpu"', "no such key: type", "type"),
        (
            "device.capacity['gpu.example.com'].compute.compareTo(quantity('1')) >= 0",
            "no such key: compute",
            "compute",
        ),
        ("1 / 0 == 1", "division by zero", None),
    ],
)
def test_runtime_errors_are_told_apart_from_unknown(expr: str, message: str, key: str | None) -> None:
    result = cel.evaluate_detail(expr, GPU_DEVICE)
    assert isinstance(result, cel.CelFailure) and result.runtime
    assert (result.message, result.key) == (message, key)
    assert cel.evaluate(expr, GPU_DEVICE) is None


@pytest.mark.parametrize(
    "expr",
    [
        'device.driver == "other.example.com" && device.attributes["gpu.example.com"].productName == "H200"',
        '"productName" in device.attributes["gpu.example.com"] && device.attributes["gpu.example.com"].productName == "H200"',
        'has(device.attributes["gpu.example.com"].productName)',
        'device.attributes["gpu.example.com"].productName == "H200" && false',
    ],
)
def test_guards_and_short_circuits_never_error(expr: str) -> None:
    assert cel.evaluate_detail(expr, GPU_DEVICE) is False


@pytest.mark.parametrize(
    "expr",
    [
        "device.driver ==",  # does not compile
        "ip('10.0.0.1') == ip('10.0.0.1')",  # a Kubernetes extension the model does not have
        "quantity('not a quantity') == quantity('1')",
        "device.attributes['gpu.example.com'].model",  # not a bool
    ],
)
def test_what_the_model_cannot_decide_is_not_a_runtime_error(expr: str) -> None:
    result = cel.evaluate_detail(expr, GPU_DEVICE)
    assert isinstance(result, cel.CelFailure) and not result.runtime and result.message
