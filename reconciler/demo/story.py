"""The scripted history the demo plays: each step is one push a platform team could make.

Edits are textual (one exact line replaced), so each commit is the small diff a person would write and
keeps the example's comments. A step that expects a denial or a rollback is reverted with `git revert`
before the next step's change, as a team would do after reading the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import DraGitopsError
from reconciler.outcome import Outcome

PLUGIN = "10-driver/kubelet-plugin.yaml"
CANARY = "10-driver/kubelet-plugin-canary.yaml"
TEMPLATE = "30-claims/single-gpu-template.yaml"
TRAINER = "40-workloads/trainer.yaml"
OLD_IMAGE = "image: registry.example.com/gpu-example-driver:v0.3.0"
NEW_IMAGE = "image: registry.example.com/gpu-example-driver:v0.4.0"


@dataclass(frozen=True)
class Edit:
    """Replace the one line `old` of `path` (relative to the repository root) with `new`."""

    path: str
    old: str
    new: str

    def describe(self) -> str:
        return f"{self.path}: {self.old.strip()} → {self.new.strip()}"

    def apply(self, root: Path) -> None:
        file = root / self.path
        lines = file.read_text().splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if line.strip() == self.old.strip()]
        if len(hits) != 1:
            raise DraGitopsError(
                f"expected exactly one line {self.old.strip()!r}, found {len(hits)}", where=str(file)
            )
        line = lines[hits[0]]
        indent = line[: len(line) - len(line.lstrip())]
        lines[hits[0]] = indent + self.new.strip() + "\n"
        file.write_text("".join(lines))


@dataclass(frozen=True)
class Step:
    title: str
    why: str  # what the team meant by this push
    message: str  # the commit message
    expect: Outcome  # the pass outcome the story needs: applied, denied or rolled-back
    edits: tuple[Edit, ...] = ()
    revert_previous: bool = False  # revert the last (failed) commit before this one's change
    expect_diagnosis: str | None = None  # the failure mode a rollback must name


# Made to the example before its first commit: every verification of the trainers also looks inside one
# of them for the GPU its claim was allocated (the example driver puts GPU_DEVICE_0 in the container).
VERIFY_EXEC = 'dra-gitops.io/verify-exec: "printenv GPU_DEVICE_0"'
SEED_EDITS: tuple[Edit, ...] = (
    Edit(TRAINER, "name: trainer", f"name: trainer\n  annotations:\n    {VERIFY_EXEC}"),
)

STORY: tuple[Step, ...] = (
    Step(
        "A good baseline",
        "the example GPU stack: driver, class, template, a shared claim, a notebook and two trainers "
        "(each verification also looks inside the trainers for their GPU)",
        "GPU stack: driver v0.3.0, class gpu.example.com, notebook and trainers",
        Outcome.APPLIED,
    ),
    Step(
        "A template that names a class that does not exist",
        "someone points the single-gpu template at a class nobody created",
        "single-gpu: use the gpu-large class",
        Outcome.DENIED,
        (Edit(TEMPLATE, "deviceClassName: gpu.example.com", "deviceClassName: gpu-large.example.com"),),
    ),
    Step(
        "A driver upgrade without a canary",
        "the driver goes to v0.4.0 on every node at once",
        "driver: v0.4.0 everywhere",
        Outcome.DENIED,
        (Edit(PLUGIN, OLD_IMAGE, NEW_IMAGE),),
        revert_previous=True,
    ),
    Step(
        "The canary first",
        "v0.4.0 goes to the canary DaemonSet only (nodes labelled dra-gitops.io/canary=true)",
        "driver canary: v0.4.0",
        Outcome.APPLIED,
        (Edit(CANARY, OLD_IMAGE, NEW_IMAGE),),
        revert_previous=True,
    ),
    Step(
        "The promotion",
        "the canary held, so the main DaemonSet gets the template the canary runs",
        "driver: promote v0.4.0 from the canary",
        Outcome.APPLIED,
        (Edit(PLUGIN, OLD_IMAGE, NEW_IMAGE),),
    ),
    Step(
        "More GPUs than exist",
        "four trainers with a GPU each, beside the notebook's shared GPU: 5 asked, 4 exist",
        "trainer: 4 replicas",
        Outcome.ROLLED_BACK,
        (Edit(TRAINER, "replicas: 2", "replicas: 4"),),
        expect_diagnosis="exhaustion",
    ),
    Step(
        "The fix",
        "three trainers: with the notebook's GPU that is every device of the cluster, none more",
        "trainer: 3 replicas (4 GPUs in use of 4)",
        Outcome.APPLIED,
        (Edit(TRAINER, "replicas: 2", "replicas: 3"),),
        revert_previous=True,
    ),
)
