"""What a run looks like on disk: the file and folder names the readers recognise and batch
discovery looks for. One description, so a reader and ``curvediag batch`` never disagree on
what a run folder is.
"""

from __future__ import annotations

import re

__all__ = [
    "CHECKPOINT_DIR",
    "STATE_NAME",
    "WANDB_LEGACY_FILES",
    "WANDB_RUN_DIR",
    "is_event_file",
]

#: The Hugging Face Trainer's state file (in an output folder and in each ``checkpoint-N/``).
STATE_NAME = "trainer_state.json"
#: A Trainer checkpoint folder; the group is its step.
CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")
#: A W&B run folder (``wandb/run-20250101_120000-abc123``, ``offline-run-...``).
#: ``dryrun-...`` is what W&B before 0.9 named an offline run (``WANDB_MODE=dryrun``).
WANDB_RUN_DIR = re.compile(r"^(?:(?:offline-)?run|dryrun)-\d{8}_\d{6}-.+$")
#: Files an older W&B run folder keeps its history and summary in (under ``files/``).
WANDB_LEGACY_FILES = ("wandb-history.jsonl", "wandb-summary.json")


def is_event_file(name: str) -> bool:
    """A TensorBoard event file name: ``events.out.tfevents.*`` (or CatBoost's bare
    ``events.out.tfevents``)."""
    return name == "events.out.tfevents" or name.startswith("events.out.tfevents.")
