"""Objects whose controllers create DRA objects at run time: what a desired state provides without listing it.

Kubernetes accepts a pod that references a ResourceClaimTemplate that does not exist yet (the pod waits); a
controller that creates the template from another object makes such a pod correct. The generators we know
are this table, one entry each, each with a test (tests/policy/test_generators.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TemplateGenerator:
    """A kind whose controller creates a ResourceClaimTemplate, in the object's namespace, named by a field."""

    group: str
    kind: str
    name_field: tuple[str, ...]  # where the object names the template it makes
    controller: str  # who creates it, for messages and docs


TEMPLATE_GENERATORS: tuple[TemplateGenerator, ...] = (
    # NVIDIA k8s-dra-driver-gpu: the ComputeDomain controller creates the IMEX channel template its
    # workers' pods reference (resource.nvidia.com/v1beta1).
    TemplateGenerator(
        "resource.nvidia.com",
        "ComputeDomain",
        ("spec", "channel", "resourceClaimTemplate", "name"),
        "the ComputeDomain controller of NVIDIA's GPU driver",
    ),
)


def generated_template(group: str, kind: str, body: dict[str, Any]) -> tuple[str, TemplateGenerator] | None:
    """(template name, its generator) when `body` is an object whose controller creates a claim template."""
    for generator in TEMPLATE_GENERATORS:
        if (generator.group, generator.kind) != (group, kind):
            continue
        value: Any = body
        for step in generator.name_field:
            value = value.get(step) if isinstance(value, dict) else None
        if isinstance(value, str) and value:
            return value, generator
    return None
