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

CONFIG = "dra-gitops.yaml"
PLUGIN = "10-driver/kubelet-plugin.yaml"
CANARY = "10-driver/kubelet-plugin-canary.yaml"
TEMPLATE = "30-claims/single-gpu-template.yaml"
TRAINER = "40-workloads/trainer.yaml"
OLD_IMAGE = "image: registry.example.com/gpu-example-driver:v0.3.0"
NEW_IMAGE = "image: registry.example.com/gpu-example-driver:v0.4.0"
BAD_IMAGE = "image: registry.example.com/gpu-example-driver:v0.4.1"

# The demo's cluster: a canary node and four GPU nodes in two zones, one GPU each (5 in all).
ZONE_LABEL = "topology.kubernetes.io/zone"
NODE_ZONES = ("zone-a", "zone-a", "zone-a", "zone-b", "zone-b")  # sim-node-0 (the canary) .. sim-node-4
GPUS_PER_NODE = 1
GPUS = len(NODE_ZONES) * GPUS_PER_NODE
# The hardware's one flaw: zone-b's GPUs run an older firmware, on which the plugin of BAD_IMAGE crash-loops
# (the simulated kubelet makes that image's containers crash on those nodes, as a real one would report it).
BAD_ZONE = "zone-b"

# The driver's upgrade in waves, as the team declares it in dra-gitops.yaml: one node, then half of the
# main DaemonSet's nodes, then all; each wave's devices drained while its plugin is replaced; a short soak.
WAVES_CONFIG = """canary_warn_unrestricted: true
  drivers:
    - name: gpu.example.com
      rollout:                  # after the canary, the main kubelet plugin is upgraded node by node
        waves: ["1", "50%", "100%"]
        drainDevices: true      # the wave's GPUs take no new claims while its plugin is replaced
        soak: 500ms             # between waves (a real fleet soaks for minutes)"""
ROLLING_UPDATE = """updateStrategy:
type: RollingUpdate
rollingUpdate:
maxSurge: 0              # the plugin does not implement seamless upgrades
maxUnavailable: 1"""
ON_DELETE = """updateStrategy:
    type: OnDelete             # dra-gitops replaces the plugin wave by wave (dra-gitops.yaml: rollout)"""


@dataclass(frozen=True)
class Edit:
    """Replace the lines `old` of `path` (relative to the repository root) with `new`.

    `old` is one line, or several consecutive ones (separated by newlines), compared without their
    indentation; it must occur exactly once. `new` takes the indentation of the first line replaced (its
    further lines carry their own)."""

    path: str
    old: str
    new: str

    def describe(self) -> str:
        old, new = self.old.strip().splitlines(), self.new.strip().splitlines()
        more = f" (+{len(old) - 1} line(s))" if len(old) > 1 else ""
        added = f" (+{len(new) - 1} line(s))" if len(new) > 1 else ""
        return f"{self.path}: {old[0].strip()}{more} → {new[0].strip()}{added}"

    def apply(self, root: Path) -> list[str]:
        """Make the edit; the lines that tell it: `describe()` for one line, else the lines removed (`-`)
        and added (`+`) as the file has them, without those both keep at the start."""
        file = root / self.path
        lines = file.read_text().splitlines(keepends=True)
        old = [line.strip() for line in self.old.strip().splitlines()]
        hits = [
            i
            for i in range(len(lines) - len(old) + 1)
            if [line.strip() for line in lines[i : i + len(old)]] == old
        ]
        if len(hits) != 1:
            raise DraGitopsError(
                f"expected exactly one line {self.old.strip()!r}, found {len(hits)}", where=str(file)
            )
        line = lines[hits[0]]
        indent = line[: len(line) - len(line.lstrip())]
        removed = [x.rstrip("\n") for x in lines[hits[0] : hits[0] + len(old)]]
        added = (indent + self.new.strip()).splitlines()
        lines[hits[0] : hits[0] + len(old)] = [indent + self.new.strip() + "\n"]
        file.write_text("".join(lines))
        if len(removed) == 1 and len(added) == 1:
            return [self.describe()]
        while removed and added and removed[0] == added[0]:
            removed, added = removed[1:], added[1:]
        return [f"{self.path}:", *(f"  - {x}" for x in removed), *(f"  + {x}" for x in added)]


@dataclass(frozen=True)
class Step:
    title: str
    why: str  # what the team meant by this push
    message: str  # the commit message
    expect: Outcome  # the pass outcome the story needs: applied, denied or rolled-back
    edits: tuple[Edit, ...] = ()
    revert_previous: bool = False  # revert the last (failed) commit before this one's change
    expect_diagnosis: str | None = None  # the failure mode a rollback must name
    waves: bool = False  # the driver's main DaemonSet is upgraded in waves: the narration follows them


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
        "Upgrades in waves",
        "before the promotion, the team has the main DaemonSet upgraded node by node: waves of 1 node, "
        "50% and 100% of its nodes, each wave's devices drained, a 0.5 s soak between waves; the DaemonSet "
        "leaves its updates to dra-gitops (OnDelete), so nothing moves yet",
        "driver: upgrade gpu.example.com in waves",
        Outcome.APPLIED,
        (
            Edit(CONFIG, "canary_warn_unrestricted: true", WAVES_CONFIG),
            Edit(PLUGIN, ROLLING_UPDATE, ON_DELETE),
        ),
    ),
    Step(
        "The promotion, in waves",
        "the canary held, so the main DaemonSet gets the template the canary runs, one wave at a time",
        "driver: promote v0.4.0 from the canary",
        Outcome.APPLIED,
        (Edit(PLUGIN, OLD_IMAGE, NEW_IMAGE),),
        waves=True,
    ),
    Step(
        "A new build on the canary",
        "v0.4.1 goes to the canary first, and runs there (sim-node-0, zone-a)",
        "driver canary: v0.4.1",
        Outcome.APPLIED,
        (Edit(CANARY, NEW_IMAGE, BAD_IMAGE),),
    ),
    Step(
        "A build that fails on a later wave",
        f"the canary held, so v0.4.1 is promoted in waves; but {BAD_ZONE}'s GPUs run an older firmware "
        "that v0.4.1 crash-loops on: the first wave passes, the second halts",
        "driver: promote v0.4.1 from the canary",
        Outcome.ROLLED_BACK,
        (Edit(PLUGIN, NEW_IMAGE, BAD_IMAGE),),
        expect_diagnosis="driver-wave-failed",
        waves=True,
    ),
    Step(
        "More GPUs than exist",
        f"five trainers with a GPU each, beside the notebook's shared GPU: 6 asked, {GPUS} exist",
        "trainer: 5 replicas",
        Outcome.ROLLED_BACK,
        (Edit(TRAINER, "replicas: 2", "replicas: 5"),),
        revert_previous=True,
        expect_diagnosis="exhaustion",
    ),
    Step(
        "The fix",
        "four trainers: with the notebook's GPU that is every device of the cluster, none more",
        f"trainer: 4 replicas ({GPUS} GPUs in use of {GPUS})",
        Outcome.APPLIED,
        (Edit(TRAINER, "replicas: 2", "replicas: 4"),),
        revert_previous=True,
    ),
)
