"""The logged learning rate against the configured one: a schedule that climbs past its peak."""

from __future__ import annotations

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features.registry import FeatureContext, Value, feature_group

#: A logged learning rate this much above the configured one counts as above it.
_TOLERANCE = 1.2


@feature_group(
    "lrcfg",
    requires=["train/learning_rate"],
    features={
        "lrcfg.configured": "the configured (peak) learning rate of the run's arguments",
        "lrcfg.max_ratio": "highest logged learning rate / the configured one",
        "lrcfg.last_ratio": "last logged learning rate / the configured one",
        "lrcfg.first_above_step": "first step at which the logged learning rate exceeded the "
        "configured one by more than 20%",
        "lrcfg.rising_logs": "logs in a row, up to the last one, over which the learning rate "
        "rose while above the configured value",
    },
)
def _lr_config(ctx: FeatureContext) -> dict[str, Value]:
    configured = ctx.run.meta.learning_rate
    if not configured or configured <= 0:
        raise InsufficientDataError("the run's configured learning rate is unknown")
    steps, values = ctx.finite_series("train/learning_rate")
    if values.size == 0:
        raise InsufficientDataError("no finite learning-rate values")
    ratio = values / configured
    above = np.flatnonzero(ratio > _TOLERANCE)
    rising = 0
    for i in range(values.size - 1, 0, -1):
        if ratio[i] > _TOLERANCE and values[i] > values[i - 1]:
            rising += 1
        else:
            break
    return {
        "lrcfg.configured": float(configured),
        "lrcfg.max_ratio": float(ratio.max()),
        "lrcfg.last_ratio": float(ratio[-1]),
        "lrcfg.first_above_step": int(steps[above[0]]) if above.size else None,
        "lrcfg.rising_logs": rising,
    }
